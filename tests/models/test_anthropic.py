"""The Anthropic provider: the real ``anthropic`` SDK over real HTTP to a loopback fake of the
Messages API (JSON and SSE), asserting on what the SDK sent as well as on what came back."""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import pytest

from examples import banking
from pausepoint import (
    AgentFinishReason,
    InterruptChunk,
    MediaPart,
    Message,
    ModelRequest,
    Pausepoint,
    TextChunk,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallDeltaChunk,
    ToolDefinition,
    ToolRequestPart,
    ToolResponsePart,
    TurnEndChunk,
)
from pausepoint.errors import (
    ModelAuthError,
    ModelBadRequest,
    ModelRateLimited,
    ModelTimeout,
    ModelUnavailable,
)
from pausepoint.models import RetryPolicy
from pausepoint.models.anthropic import Anthropic, AnthropicModel

from .anthropic_wire import check_request, error, events, message, reply, stream_error, text, tool_use
from .wire_server import Hang, Json, Reply, Sse, WireRequest, WireServer, scripted

FAST = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.02)
Script = Callable[[dict[str, Any]], list[dict[str, Any]] | Reply]


def claude(script: Script, **options: Any) -> Callable[[WireRequest], Reply]:
    """A fake Messages endpoint: refuses what the API would refuse, answers JSON or SSE as asked."""

    def handler(request: WireRequest) -> Reply:
        body = request.body
        problem = check_request(body)
        if problem is not None:
            return error(400, "invalid_request_error", problem)
        answer = script(body)
        if isinstance(answer, Json | Sse | Hang):
            return answer
        stop = "tool_use" if any(b["type"] == "tool_use" for b in answer) else "end_turn"
        return reply(answer, stream=bool(body.get("stream")), stop_reason=stop, **options)

    return handler


def model_for(server: WireServer, retry: RetryPolicy = FAST, **options: Any) -> AnthropicModel:
    plugin = Anthropic(api_key="sk-test", base_url=server.url, retry=retry, **options)
    model = plugin.resolve_model("anthropic/claude-test")
    assert model is not None
    return model


def user(text_: str) -> Message:
    return Message("user", [TextPart(text_)])


def results_of(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The tool_result blocks of the request's last message, by tool_use_id."""
    content = body["messages"][-1]["content"]
    return {b["tool_use_id"]: b for b in content if b["type"] == "tool_result"}


WEATHER = ToolDefinition(
    "get_weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


# -- names and requests ----------------------------------------------------------------------------


def test_resolves_only_anthropic_names():
    plugin = Anthropic(api_key="sk-test")
    model = plugin.resolve_model("anthropic/claude-sonnet-4-5")
    assert model is not None
    assert model.name == "anthropic/claude-sonnet-4-5"
    assert model.model == "claude-sonnet-4-5"
    assert plugin.resolve_model("openai/gpt-4o") is None
    assert plugin.resolve_model("anthropic/") is None


def test_a_missing_sdk_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "anthropic", None)
    monkeypatch.delitem(sys.modules, "pausepoint.models.anthropic")
    with pytest.raises(ImportError, match=r"pip install 'pausepoint\[anthropic\]'"):
        importlib.import_module("pausepoint.models.anthropic")


async def test_json_text_reply_and_the_request_as_sent():
    with WireServer(scripted([Json(message([text("Hello there.")], input_tokens=20, output_tokens=3))])) as server:
        model = model_for(server)
        request = ModelRequest([user("Hi")], system="Be brief.", tools=[WEATHER], config={"temperature": 0.2})
        response = await model.generate(request)

    assert response.message == Message("model", [TextPart("Hello there.")])
    assert response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (20, 3)
    [sent] = server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert "anthropic-version" in sent.headers
    assert sent.body == {
        "model": "claude-test",
        "max_tokens": 1024,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        "tools": [
            {
                "name": "get_weather",
                "description": "The weather in a city.",
                "input_schema": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            }
        ],
        "temperature": 0.2,
        "stream": False,
    }


async def test_config_sets_max_tokens_and_stop_sequences_and_passes_other_keys_as_given():
    with WireServer(scripted([Json(message([text("ok")]))])) as server:
        config = {"max_output_tokens": 64, "stop_sequences": ["END"], "top_k": 5, "metadata": {"user_id": "u1"}}
        await model_for(server).generate(ModelRequest([user("Hi")], config=config))
    body = server.requests[0].body
    assert (body["max_tokens"], body["stop_sequences"], body["top_k"]) == (64, ["END"], 5)
    assert body["metadata"] == {"user_id": "u1"}
    assert "max_output_tokens" not in body and "system" not in body and "tools" not in body


async def test_api_key_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env")
    with WireServer(scripted([Json(message([text("ok")]))])) as server:
        model = Anthropic(base_url=server.url).resolve_model("anthropic/claude-test")
        assert model is not None
        await model.generate(ModelRequest([user("Hi")]))
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env"


def without_anthropic_environment(monkeypatch: pytest.MonkeyPatch, home) -> None:
    for name in [n for n in os.environ if n.startswith("ANTHROPIC_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))


async def test_no_credentials_is_an_auth_error_without_a_request(monkeypatch, tmp_path):
    without_anthropic_environment(monkeypatch, tmp_path)
    with WireServer(scripted([Json(message([text("ok")]))])) as server:
        model = Anthropic(base_url=server.url).resolve_model("anthropic/claude-test")
        assert model is not None
        with pytest.raises(ModelAuthError, match="ANTHROPIC_API_KEY"):
            await model.generate(ModelRequest([user("Hi")]))
    assert server.requests == []


def test_an_unloadable_credentials_profile_is_an_auth_error(monkeypatch, tmp_path):
    without_anthropic_environment(monkeypatch, tmp_path)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path))
    with pytest.raises(ModelAuthError, match="credentials"):
        Anthropic()


async def test_history_maps_to_alternating_messages_with_paired_call_ids():
    """Tool results go back as a user message of tool_result blocks carrying each call's id
    (the provider's, or the runtime ref when there is none); the following user text joins it."""
    history = [
        user("Weather in Paris and Rome? Also book a table."),
        Message(
            "model",
            [
                TextPart("Checking."),
                ToolRequestPart("get_weather", {"city": "Paris"}, ref="r1", call_id="toolu_1"),
                ToolRequestPart("get_weather", {"city": "Rome"}, ref="r2", call_id=None),
            ],
        ),
        Message(
            "tool",
            [
                ToolResponsePart("get_weather", {"temp": 21}, ref="r1", call_id="toolu_1"),
                ToolResponsePart("get_weather", {"error": "no data"}, ref="r2", is_error=True),
            ],
        ),
        user("Thanks; and tomorrow?"),
        Message("user", [MediaPart("data:image/png;base64,iVBORw0KGgo=", "image/png")]),
        Message("user", [MediaPart("https://example.com/map.png", "image/png")]),
    ]
    with WireServer(claude(lambda body: [text("Sunny.")])) as server:
        response = await model_for(server).generate(ModelRequest(history, tools=[WEATHER]))

    assert response.message.text == "Sunny."
    assert server.requests[0].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Rome? Also book a table."}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "r2", "name": "get_weather", "input": {"city": "Rome"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"temp": 21}'},
                {"type": "tool_result", "tool_use_id": "r2", "content": '{"error": "no data"}', "is_error": True},
                {"type": "text", "text": "Thanks; and tomorrow?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/map.png"}},
            ],
        },
    ]


# -- responses ---------------------------------------------------------------------------------------


async def test_json_parallel_tool_calls():
    blocks = [
        text("Let me look."),
        tool_use("toolu_a", "get_weather", {"city": "Paris"}),
        tool_use("toolu_b", "get_weather", {"city": "Rome"}),
    ]
    with WireServer(scripted([Json(message(blocks, stop_reason="tool_use"))])) as server:
        response = await model_for(server).generate(ModelRequest([user("Weather?")], tools=[WEATHER]))
    assert response.message.parts == [
        TextPart("Let me look."),
        ToolRequestPart("get_weather", {"city": "Paris"}, call_id="toolu_a"),
        ToolRequestPart("get_weather", {"city": "Rome"}, call_id="toolu_b"),
    ]
    assert response.finish_reason == "stop"


async def test_stream_reports_deltas_and_assembles_parallel_tool_calls_split_over_many_events():
    arguments = {"city": "Rio de Janeiro", "unit": "celsius", "days": [1, 2, 3]}
    blocks = [
        text("Looking that up now."),
        tool_use("toolu_a", "get_weather", arguments),
        tool_use("toolu_b", "get_weather", {"city": "Lima"}),
    ]
    sse = events(blocks, stop_reason="tool_use", input_tokens=30, output_tokens=42, piece=3)
    assert sum(1 for name, _ in sse if name == "content_block_delta") > 20
    chunks: list[Any] = []
    with WireServer(scripted([Sse(sse)])) as server:
        response = await model_for(server).generate(ModelRequest([user("Weather?")], tools=[WEATHER]), chunks.append)

    assert server.requests[0].body["stream"] is True
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "Looking that up now."
    assert len([c for c in chunks if isinstance(c, TextDelta)]) == 4
    deltas = [c for c in chunks if isinstance(c, ToolCallDelta)]
    assert [(d.index, d.name, d.call_id) for d in deltas if d.name] == [
        (0, "get_weather", "toolu_a"),
        (1, "get_weather", "toolu_b"),
    ]
    assert json.loads("".join(d.arguments_delta for d in deltas if d.index == 0)) == arguments
    assert len([d for d in deltas if d.index == 0]) > 10
    assert response.message.parts == [
        TextPart("Looking that up now."),
        ToolRequestPart("get_weather", arguments, call_id="toolu_a"),
        ToolRequestPart("get_weather", {"city": "Lima"}, call_id="toolu_b"),
    ]
    assert response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (30, 42)


async def test_stream_tool_call_without_arguments_is_an_empty_object():
    with WireServer(scripted([Sse(events([tool_use("toolu_n", "now", "")], stop_reason="tool_use"))])) as server:
        response = await model_for(server).generate(ModelRequest([user("Time?")]), lambda chunk: None)
    assert response.message.parts == [ToolRequestPart("now", {}, call_id="toolu_n")]


@pytest.mark.parametrize(
    ("stop_reason", "expected"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("refusal", "blocked"),
        ("pause_turn", "other"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_finish_reasons(stop_reason, expected, stream):
    answer = reply([text("Partial")], stream=stream, stop_reason=stop_reason)
    with WireServer(scripted([answer])) as server:
        model = model_for(server)
        response = await model.generate(ModelRequest([user("Hi")]), (lambda c: None) if stream else None)
    assert response.finish_reason == expected
    assert response.message.text == "Partial"


async def test_usage_counts_cached_input_tokens():
    body = message([text("ok")], input_tokens=5, output_tokens=2, cache_read_input_tokens=100)
    with WireServer(scripted([Json(body)])) as server:
        response = await model_for(server).generate(ModelRequest([user("Hi")]))
    assert (response.usage.input_tokens, response.usage.output_tokens) == (105, 2)


# -- errors and retries --------------------------------------------------------------------------------


async def test_rate_limit_with_retry_after_is_retried_then_succeeds():
    replies = [error(429, "rate_limit_error", retry_after="0"), Json(message([text("Finally.")]))]
    with WireServer(scripted(replies)) as server:
        response = await model_for(server).generate(ModelRequest([user("Hi")]))
    assert response.message.text == "Finally."
    assert len(server.requests) == 2
    # the SDK's own retries are off: each attempt is ours
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "0"]


async def test_rate_limit_retry_after_beyond_the_policy_is_raised_at_once():
    with (
        WireServer(scripted([error(429, "rate_limit_error", retry_after="120")])) as server,
        pytest.raises(ModelRateLimited) as raised,
    ):
        await model_for(server, RetryPolicy(base_delay=0.01, max_retry_after=30)).generate(ModelRequest([user("Hi")]))
    assert raised.value.retry_after == 120
    assert len(server.requests) == 1


async def test_rate_limit_exhausted_raises_rate_limited():
    with (
        WireServer(scripted([error(429, "rate_limit_error", retry_after_ms="10")])) as server,
        pytest.raises(ModelRateLimited) as raised,
    ):
        await model_for(server).generate(ModelRequest([user("Hi")]))
    assert raised.value.retry_after == pytest.approx(0.01)
    assert isinstance(raised.value.__cause__, Exception)
    assert len(server.requests) == FAST.attempts


async def test_server_error_is_retried_then_succeeds():
    with WireServer(scripted([error(500, "api_error"), Json(message([text("Recovered.")]))])) as server:
        response = await model_for(server).generate(ModelRequest([user("Hi")]))
    assert response.message.text == "Recovered."
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [500, 529])
async def test_persistent_server_error_or_overload_is_unavailable(status):
    kind = "overloaded_error" if status == 529 else "api_error"
    with (
        WireServer(scripted([error(status, kind, "Overloaded")])) as server,
        pytest.raises(ModelUnavailable, match="Overloaded") as raised,
    ):
        await model_for(server).generate(ModelRequest([user("Hi")]))
    assert raised.value.details["status"] == status
    assert len(server.requests) == FAST.attempts


async def test_timeout_is_model_timeout():
    with WireServer(scripted([Hang(2)])) as server:
        model = model_for(server, RetryPolicy(attempts=2, base_delay=0.01), timeout=0.2)
        with pytest.raises(ModelTimeout):
            await model.generate(ModelRequest([user("Hi")]))
    assert len(server.requests) == 2


async def test_401_is_auth_error_and_not_retried():
    with (
        WireServer(scripted([error(401, "authentication_error", "invalid x-api-key")])) as server,
        pytest.raises(ModelAuthError, match="invalid x-api-key"),
    ):
        await model_for(server).generate(ModelRequest([user("Hi")]))
    assert len(server.requests) == 1


async def test_400_is_bad_request_and_not_retried():
    with (
        WireServer(scripted([error(400, "invalid_request_error", "messages: bad")])) as server,
        pytest.raises(ModelBadRequest, match="messages: bad"),
    ):
        await model_for(server).generate(ModelRequest([user("Hi")]))
    assert len(server.requests) == 1


async def test_an_existing_client_gets_its_sdk_retries_turned_off():
    import anthropic

    with WireServer(scripted([error(500, "api_error")])) as server:
        client = anthropic.AsyncAnthropic(api_key="sk-test", base_url=server.url, max_retries=5)
        model = Anthropic(client=client, retry=RetryPolicy(attempts=2, base_delay=0.01)).resolve_model(
            "anthropic/claude-test"
        )
        assert model is not None
        with pytest.raises(ModelUnavailable):
            await model.generate(ModelRequest([user("Hi")]))
    assert len(server.requests) == 2


async def test_stream_error_event_before_any_chunk_is_retried():
    overloaded = Sse([events([])[0], stream_error("overloaded_error", "Overloaded")])
    with WireServer(scripted([overloaded, Sse(events([text("Second try.")]))])) as server:
        chunks: list[Any] = []
        response = await model_for(server).generate(ModelRequest([user("Hi")]), chunks.append)
    assert response.message.text == "Second try."
    assert "".join(c.text for c in chunks) == "Second try."
    assert len(server.requests) == 2


async def test_stream_error_after_chunks_is_raised_without_retry():
    partial = events([text("Half an answer")], stop=False)
    with WireServer(scripted([Sse([*partial, stream_error("overloaded_error", "Overloaded")])])) as server:
        chunks: list[Any] = []
        with pytest.raises(ModelUnavailable, match="Overloaded"):
            await model_for(server).generate(ModelRequest([user("Hi")]), chunks.append)
    assert "".join(c.text for c in chunks) == "Half an answer"
    assert len(server.requests) == 1


async def test_stream_cut_before_message_stop_is_unavailable():
    with (
        WireServer(scripted([Sse(events([text("Cut")], stop=False))])) as server,
        pytest.raises(ModelUnavailable, match="message_stop"),
    ):
        await model_for(server, RetryPolicy(attempts=1)).generate(ModelRequest([user("Hi")]), lambda c: None)


# -- through the agent runtime --------------------------------------------------------------------------


def pay_agent(server: WireServer, ledger: list[int]):
    ai = Pausepoint(plugins=[Anthropic(api_key="sk-test", base_url=server.url, retry=FAST)])

    @ai.tool()
    def pay(amount: int) -> str:
        """Pay an amount."""
        ledger.append(amount)
        return f"paid {amount}"

    return ai.define_agent(name="payer", model="anthropic/claude-test", tools=[pay])


@pytest.mark.parametrize("stream", [False, True])
async def test_malformed_tool_arguments_are_reported_to_the_model_as_invalid_input(stream):
    def script(body: dict[str, Any]) -> list[dict[str, Any]]:
        results = results_of(body)
        if not results:
            return [tool_use("toolu_bad", "pay", '{"amount": 5')]
        result = results["toolu_bad"]
        assert result["is_error"] is True
        assert "invalid input for tool 'pay'" in result["content"]
        sent_call = body["messages"][-2]["content"][0]
        assert sent_call == {
            "type": "tool_use",
            "id": "toolu_bad",
            "name": "pay",
            "input": {"_raw_arguments": '{"amount": 5'},
        }
        return [text("Sorry, I could not pay.")]

    ledger: list[int] = []
    with WireServer(claude(script)) as server:
        chat = pay_agent(server, ledger).chat()
        res = await (chat.send_stream("Pay 5.") if stream else chat.send("Pay 5."))
    assert res.finish_reason == AgentFinishReason.STOP
    assert res.text == "Sorry, I could not pay."
    assert ledger == []
    assert len(server.requests) == 2


async def test_a_failing_model_call_leaves_the_session_as_it_was():
    answers: dict[str, Reply | None] = {"next": None}

    def script(body: dict[str, Any]) -> list[dict[str, Any]] | Reply:
        override = answers["next"]
        return override if override is not None else [text(f"Reply {len(body['messages'])}")]

    ledger: list[int] = []
    with WireServer(claude(script)) as server:
        chat = pay_agent(server, ledger).chat()
        assert (await chat.send("First.")).text == "Reply 1"
        before = await chat.history()

        answers["next"] = error(529, "overloaded_error", "Overloaded")
        with pytest.raises(ModelUnavailable):
            await chat.send("Second.")
        assert await chat.history() == before

        answers["next"] = None
        res = await chat.send("Third.")
    assert res.text == "Reply 3"
    assert [m["content"][0]["text"] for m in server.requests[-1].body["messages"]] == ["First.", "Reply 1", "Third."]


def banking_claude(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Claude as the banking system prompt asks: approval first, then the transfer."""
    assert "first userApproval" in body["system"]
    assert {t["name"] for t in body["tools"]} == {"userApproval", "transfer_money"}
    results = results_of(body)
    if not results:
        return [
            tool_use("toolu_appr", "userApproval", {"action": "transfer_money", "details": "Transfer $500 to savings"})
        ]
    if "toolu_appr" in results:
        approval = json.loads(results["toolu_appr"]["content"])
        if not approval["approved"]:
            return [text("Not transferred.")]
        return [
            text("Approved, transferring."),
            tool_use("toolu_xfer", "transfer_money", {"amount": "500", "to_account": "savings"}),
        ]
    return [text(results["toolu_xfer"]["content"])]


async def test_banking_example_pause_respond_final_text():
    ledger: list[str] = []
    with WireServer(claude(banking_claude)) as server:
        plugin = Anthropic(api_key="sk-test", base_url=server.url, retry=FAST)
        _, agent = banking.build(ledger=ledger, model="anthropic/claude-test", plugins=[plugin])
        chat = agent.chat()

        res = await chat.send("Transfer $500 to savings.")
        assert res.finish_reason == AgentFinishReason.INTERRUPTED
        [pause] = res.interrupts
        assert (pause.name, pause.input) == (
            "userApproval",
            {"action": "transfer_money", "details": "Transfer $500 to savings"},
        )
        assert pause.ref != "toolu_appr"
        assert ledger == []

        res = await chat.resume(respond=[pause.respond({"approved": True, "feedback": "Looks good!"})])
    assert res.finish_reason == AgentFinishReason.STOP
    assert res.text == "Transferred $500 to savings."
    assert ledger == ["500->savings"]
    second = server.requests[1].body
    assert results_of(second)["toolu_appr"]["content"] == '{"approved": true, "feedback": "Looks good!"}'
    assert len(server.requests) == 3


async def test_banking_example_streamed():
    ledger: list[str] = []
    with WireServer(claude(banking_claude)) as server:
        plugin = Anthropic(api_key="sk-test", base_url=server.url, retry=FAST)
        _, agent = banking.build(ledger=ledger, model="anthropic/claude-test", plugins=[plugin])
        chat = agent.chat()

        first = [chunk async for chunk in chat.send_stream("Transfer $500 to savings.")]
        assert any(isinstance(c, ToolCallDeltaChunk) and c.name == "userApproval" for c in first)
        [interrupt] = [c for c in first if isinstance(c, InterruptChunk)]
        assert isinstance(first[-1], TurnEndChunk)
        assert first[-1].response.finish_reason == AgentFinishReason.INTERRUPTED

        answer = interrupt.interrupt.respond({"approved": True})
        second = [chunk async for chunk in chat.resume_stream(respond=[answer])]
    texts = "".join(c.text for c in second if isinstance(c, TextChunk))
    assert texts == "Approved, transferring.Transferred $500 to savings."
    assert isinstance(second[-1], TurnEndChunk)
    assert second[-1].response.finish_reason == AgentFinishReason.STOP
    assert second[-1].response.text == "Transferred $500 to savings."
    assert ledger == ["500->savings"]
    assert all(r.body["stream"] is True for r in server.requests)
