"""The OpenAI adapter: the real ``openai`` SDK over real HTTP to a loopback server speaking Chat Completions."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import openai
import pytest

from examples.banking import build
from pausepoint import (
    AgentFinishReason,
    InterruptChunk,
    MediaPart,
    Message,
    ModelRequest,
    TextChunk,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolDefinition,
    ToolRequestPart,
    ToolResponsePart,
)
from pausepoint.errors import (
    ModelAuthError,
    ModelBadRequest,
    ModelOutputError,
    ModelRateLimited,
    ModelTimeout,
    ModelUnavailable,
)
from pausepoint.models import RetryPolicy
from pausepoint.models.openai import OpenAI, OpenAIModel

from .openai_wire import chunks, completion, error, reply, strict, tool_call
from .wire_server import Hang, Json, Reply, Sse, WireRequest, WireServer, scripted

FAST = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.02)
USER = [Message("user", [TextPart("Hello")])]


@contextmanager
def serve(handler: Callable[[WireRequest], Reply]) -> Iterator[WireServer]:
    with WireServer(strict(handler)) as server:
        yield server


def model_at(server: WireServer, **options: Any) -> OpenAIModel:
    options.setdefault("retry", FAST)
    plugin = OpenAI(api_key="sk-test", base_url=f"{server.url}/v1", **options)
    found = plugin.resolve_model("openai/gpt-test")
    assert found is not None
    return found


def bodies(server: WireServer) -> list[dict[str, Any]]:
    return [r.body for r in server.posts("/chat/completions")]


class Deltas(list[TextDelta | ToolCallDelta]):
    """An ``on_chunk`` sink that keeps what it was given."""

    def __call__(self, chunk: TextDelta | ToolCallDelta) -> None:
        self.append(chunk)


# -- names ----------------------------------------------------------------------------------------


def test_plugins_resolve_their_own_prefix_only() -> None:
    plugin = OpenAI(api_key="sk-test")
    found = plugin.resolve_model("openai/gpt-4o-mini")
    assert found is not None and found.name == "openai/gpt-4o-mini" and found.model_id == "gpt-4o-mini"
    assert plugin.resolve_model("anthropic/claude") is None
    assert plugin.resolve_model("openai/") is None
    assert plugin.resolve_model("gpt-4o") is None
    ollama = OpenAI.ollama()
    assert ollama.resolve_model("openai/gpt-4o") is None
    llama = ollama.resolve_model("ollama/llama3.2:1b")
    assert llama is not None and llama.name == "ollama/llama3.2:1b" and llama.model_id == "llama3.2:1b"
    assert OpenAI.compatible("vllm", "http://localhost:8000/v1").resolve_model("vllm/org/model-7b") is not None


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    monkeypatch.delitem(sys.modules, "pausepoint.models.openai")
    with pytest.raises(ImportError, match=r"pausepoint\[openai\]"):
        importlib.import_module("pausepoint.models.openai")


# -- requests -------------------------------------------------------------------------------------


async def test_json_text_reply_and_the_request_sent() -> None:
    with serve(scripted([Json(completion("Hi there!", prompt_tokens=21, completion_tokens=3))])) as server:
        tool = ToolDefinition("get_weather", "Weather for a city.", {"type": "object", "properties": {}})
        request = ModelRequest(USER, system="Be brief.", tools=[tool])
        response = await model_at(server, default_headers={"x-team": "payments"}).generate(request)
    assert response.message == Message("model", [TextPart("Hi there!")])
    assert response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (21, 3)  # type: ignore[union-attr]
    [sent] = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.headers["x-team"] == "payments"
    assert sent.body["model"] == "gpt-test"
    assert sent.body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
    assert sent.body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city.",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    assert "stream" not in sent.body


async def test_streamed_text_is_reported_as_it_comes() -> None:
    with serve(scripted([Sse(chunks("The quick brown fox", completion_tokens=4))])) as server:
        deltas = Deltas()
        response = await model_at(server).generate(ModelRequest(USER), deltas)
    assert [d.text for d in deltas if isinstance(d, TextDelta)] == ["The ", "quick ", "brown ", "fox"]
    assert response.message == Message("model", [TextPart("The quick brown fox")])
    assert response.finish_reason == "stop"
    assert response.usage is not None and response.usage.output_tokens == 4
    [body] = bodies(server)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_history_is_mapped_with_provider_call_ids() -> None:
    history = [
        Message("user", [TextPart("What is in this picture? "), MediaPart("https://x.test/cat.png", "image/png")]),
        Message(
            "model",
            [
                TextPart("Let me look."),
                ToolRequestPart("lookup", {"q": "cat"}, ref="r1", call_id="call_1"),
                ToolRequestPart("lookup", {"q": "dog"}, ref="r2", call_id=None),  # from a scripted model
                ToolRequestPart("lookup", '{"q": "bro', ref="r3", call_id="call_3"),  # malformed, kept raw
            ],
        ),
        Message(
            "tool",
            [
                ToolResponsePart("lookup", {"animal": "cat"}, ref="r1", call_id="call_1"),
                ToolResponsePart("lookup", "plain text", ref="r2"),
                ToolResponsePart("lookup", {"error": "invalid input"}, ref="r3", call_id="call_3", is_error=True),
            ],
        ),
        Message("model", []),  # an empty (filtered) answer
        Message("user", [TextPart("Read this: "), MediaPart("data:application/pdf;base64,JVBERi0=")]),
    ]
    with serve(scripted([Json(completion("A cat."))])) as server:
        await model_at(server).generate(ModelRequest(history))
    [body] = bodies(server)
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this picture? "},
                {"type": "image_url", "image_url": {"url": "https://x.test/cat.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q":"cat"}'}},
                {"id": "r2", "type": "function", "function": {"name": "lookup", "arguments": '{"q":"dog"}'}},
                {"id": "call_3", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "bro'}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"animal":"cat"}'},
        {"role": "tool", "tool_call_id": "r2", "content": "plain text"},
        {"role": "tool", "tool_call_id": "call_3", "content": 'Error: {"error":"invalid input"}'},
        {"role": "assistant", "content": ""},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Read this: "},
                {
                    "type": "file",
                    "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "attachment.pdf"},
                },
            ],
        },
    ]


async def test_config_is_translated_and_passed_through() -> None:
    config = {
        "temperature": 0.2,
        "max_output_tokens": 50,
        "stop_sequences": ["END"],
        "top_k": 40,
        "reasoning_effort": "low",
    }
    with serve(scripted([Json(completion("ok"))])) as server:
        await model_at(server).generate(ModelRequest(USER, config=config))
        compatible = OpenAI.compatible("vllm", f"{server.url}/v1", retry=FAST).resolve_model("vllm/m")
        assert compatible is not None
        await compatible.generate(ModelRequest(USER, config={"max_tokens": 9, "top_k": 40}))
    first, second = bodies(server)
    assert first["temperature"] == 0.2 and first["max_completion_tokens"] == 50
    assert first["stop"] == ["END"] and first["reasoning_effort"] == "low"
    assert "max_output_tokens" not in first and "top_k" not in first
    assert second["max_tokens"] == 9 and second["top_k"] == 40 and second["model"] == "m"
    with pytest.raises(ModelBadRequest, match="messages"):
        await compatible.generate(ModelRequest(USER, config={"messages": []}))


async def test_compatible_servers_never_get_the_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    with serve(scripted([Json(completion("ok"))])) as server:
        model = OpenAI.compatible("ollama", f"{server.url}/v1").resolve_model("ollama/llama3.2")
        assert model is not None
        await model.generate(ModelRequest(USER))
        keyed = OpenAI.compatible("lmstudio", f"{server.url}/v1", api_key="lm-key").resolve_model("lmstudio/m")
        assert keyed is not None
        await keyed.generate(ModelRequest(USER))
        default = OpenAI(base_url=f"{server.url}/v1").resolve_model("openai/gpt-test")
        assert default is not None
        await default.generate(ModelRequest(USER))
    assert [r.headers["authorization"] for r in server.requests] == [
        "Bearer no-key",
        "Bearer lm-key",
        "Bearer sk-secret",
    ]


async def test_missing_key_is_an_auth_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = OpenAI().resolve_model("openai/gpt-4o-mini")
    assert model is not None
    with pytest.raises(ModelAuthError, match="OPENAI_API_KEY"):
        await model.generate(ModelRequest(USER))


async def test_ollama_preset_points_at_the_local_server() -> None:
    plugin = OpenAI.ollama()
    assert str(plugin.client().base_url) == "http://localhost:11434/v1/"
    await plugin.aclose()


async def test_a_given_client_is_used_without_its_own_retries() -> None:
    with serve(scripted([error(500, "boom")])) as server:
        client = openai.AsyncOpenAI(api_key="sk-given", base_url=f"{server.url}/v1", max_retries=5)
        model = OpenAI(client=client, retry=FAST).resolve_model("openai/gpt-test")
        assert model is not None
        with pytest.raises(ModelUnavailable):
            await model.generate(ModelRequest(USER))
        await client.close()
    assert len(server.requests) == 3
    assert server.requests[0].headers["authorization"] == "Bearer sk-given"


def test_a_plugin_serves_several_event_loops() -> None:
    with serve(scripted([Json(completion("ok"))])) as server:
        model = model_at(server)
        for _ in range(2):
            response = asyncio.run(model.generate(ModelRequest(USER)))
            assert response.message.text == "ok"
    assert len(server.requests) == 2


# -- tool calls -----------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_parallel_tool_calls(stream: bool) -> None:
    calls = [
        tool_call("call_a", "get_weather", {"city": "Paris", "unit": "celsius"}),
        tool_call("call_b", "get_time", {"timezone": "Europe/Paris"}),
    ]
    with serve(scripted([reply("Checking.", calls, stream=stream)])) as server:
        deltas = Deltas()
        response = await model_at(server).generate(ModelRequest(USER), deltas if stream else None)
    assert response.message.parts == [
        TextPart("Checking."),
        ToolRequestPart("get_weather", {"city": "Paris", "unit": "celsius"}, call_id="call_a"),
        ToolRequestPart("get_time", {"timezone": "Europe/Paris"}, call_id="call_b"),
    ]
    assert response.finish_reason == "stop"  # tool_calls → stop
    if stream:
        tool_deltas = [d for d in deltas if isinstance(d, ToolCallDelta)]
        assert len(tool_deltas) > 10  # the arguments came in many small pieces
        for index, call in enumerate(calls):
            mine = [d for d in tool_deltas if d.index == index]
            assert (mine[0].name, mine[0].call_id) == (call["function"]["name"], call["id"])
            assert all(d.name is None and d.call_id is None for d in mine[1:])
            assert "".join(d.arguments_delta for d in mine) == call["function"]["arguments"]


async def test_streamed_calls_sharing_an_index_are_kept_apart() -> None:
    # Some compatible servers send each complete call at index 0.
    events = [
        {**chunks()[0], "choices": [{"index": 0, "delta": {"tool_calls": [{**call, "index": 0}]}}]}
        for call in (tool_call("c1", "a", {"x": 1}), tool_call("c2", "b", {"y": 2}))
    ]
    events += chunks(finish_reason="tool_calls")[1:]
    with serve(scripted([Sse(events)])) as server:
        response = await model_at(server).generate(ModelRequest(USER), Deltas())
    assert response.message.tool_requests == [
        ToolRequestPart("a", {"x": 1}, call_id="c1"),
        ToolRequestPart("b", {"y": 2}, call_id="c2"),
    ]


@pytest.mark.parametrize("stream", [False, True])
async def test_malformed_arguments_become_an_invalid_input_result(stream: bool) -> None:
    """The model's broken JSON reaches the runtime raw; the tool does not run; the model is told."""
    raw = '{"amount": 500, "to_account": '

    def handler(request: WireRequest) -> Reply:
        last = request.body["messages"][-1]
        if last["role"] == "user":
            return reply(None, [tool_call("call_bad", "transfer_money", raw)], stream=stream)
        return reply("Sorry, let me try again later.", stream=stream)

    ledger: list[str] = []
    with serve(handler) as server:
        plugin = OpenAI(api_key="sk-test", base_url=f"{server.url}/v1", retry=FAST)
        _, agent = build(ledger=ledger, model="openai/gpt-test", plugins=[plugin])
        chat = agent.chat()
        res = await (chat.send_stream("Move money.") if stream else chat.send("Move money."))
    assert res.finish_reason == AgentFinishReason.STOP
    assert res.text == "Sorry, let me try again later."
    assert ledger == []
    second = bodies(server)[1]["messages"]
    assert second[-2]["tool_calls"][0]["function"]["arguments"] == raw
    result = second[-1]
    assert result["role"] == "tool" and result["tool_call_id"] == "call_bad"
    assert result["content"].startswith("Error: ") and "invalid input" in result["content"]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "raw",
    [
        '{"amount": NaN, "to_account": "x"}',  # Python's json reads NaN; no store can keep it
        '{"amount": 1, "to_account": "\\ud800"}',  # a lone surrogate
        '{"amount": 1' + "0" * 700 + ', "to_account": "x"}',  # more digits than a session keeps
        '{"amount": ' + "[" * 5000 + "]" * 5000 + ', "to_account": "x"}',  # too deep for json itself
    ],
    ids=["nan", "surrogate", "long-integer", "deep"],
)
async def test_arguments_no_session_can_keep_become_an_invalid_input_result(stream: bool, raw: str) -> None:
    """Arguments that parse but cannot be stored (or do not even parse) never run the tool."""

    def handler(request: WireRequest) -> Reply:
        last = request.body["messages"][-1]
        if last["role"] == "user":
            return reply(None, [tool_call("call_odd", "transfer_money", raw)], stream=stream)
        return reply("Let me ask again.", stream=stream)

    ledger: list[str] = []
    with serve(handler) as server:
        plugin = OpenAI(api_key="sk-test", base_url=f"{server.url}/v1", retry=FAST)
        _, agent = build(ledger=ledger, model="openai/gpt-test", plugins=[plugin])
        chat = agent.chat()
        res = await (chat.send_stream("Move money.") if stream else chat.send("Move money."))
        assert (res.finish_reason, res.text) == (AgentFinishReason.STOP, "Let me ask again.")
        assert ledger == []
        [call] = (await chat.history())[1].tool_requests
        assert isinstance(call.input, str)  # kept as text, like malformed arguments
    result = bodies(server)[1]["messages"][-1]
    assert result["role"] == "tool" and result["tool_call_id"] == "call_odd"
    assert result["content"].startswith("Error: ") and "invalid input" in result["content"]


# -- finish reasons and usage ---------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"content": "All done.", "finish_reason": "stop"}, "stop"),
        ({"content": "Truncated", "finish_reason": "length"}, "length"),
        ({"content": "", "finish_reason": "content_filter"}, "blocked"),
        ({"refusal": "I can't help with that.", "finish_reason": "stop"}, "blocked"),
    ],
)
async def test_finish_reasons_and_usage(stream: bool, options: dict[str, Any], expected: str) -> None:
    content = options.pop("content", None)
    with serve(scripted([reply(content, stream=stream, prompt_tokens=5, completion_tokens=2, **options)])) as server:
        response = await model_at(server).generate(ModelRequest(USER), Deltas() if stream else None)
    assert response.finish_reason == expected
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (5, 2)
    if "refusal" in options:
        assert response.message.text == options["refusal"]


async def test_a_stream_without_usage_has_no_usage() -> None:
    with serve(scripted([Sse(chunks("Hi", usage=False))])) as server:
        response = await model_at(server, stream_usage=False).generate(ModelRequest(USER), Deltas())
    assert response.usage is None and response.message.text == "Hi"
    assert "stream_options" not in bodies(server)[0]


# -- errors and retries ---------------------------------------------------------------------------


async def test_rate_limit_honours_retry_after_then_succeeds() -> None:
    replies = [error(429, "slow down", kind="rate_limit_error", retry_after="0"), Json(completion("ok"))]
    with serve(scripted(replies)) as server:
        response = await model_at(server).generate(ModelRequest(USER))
    assert response.message.text == "ok"
    assert len(server.requests) == 2


async def test_rate_limit_exhausted_raises_rate_limited() -> None:
    limited = error(429, "slow down", kind="rate_limit_error", retry_after="0")
    with serve(scripted([limited])) as server, pytest.raises(ModelRateLimited) as caught:
        await model_at(server).generate(ModelRequest(USER))
    assert caught.value.retry_after == 0.0
    assert isinstance(caught.value.__cause__, openai.RateLimitError)
    assert len(server.requests) == 3  # the policy's attempts; the SDK's own retries are off


@pytest.mark.parametrize(("header", "value", "seconds"), [("retry_after", "7", 7.0), ("retry_after_ms", "2500", 2.5)])
async def test_retry_after_is_read_and_a_long_one_is_not_waited_for(header: str, value: str, seconds: float) -> None:
    patient = RetryPolicy(attempts=3, base_delay=0.01, max_retry_after=1.0)
    limited = error(429, "later", kind="rate_limit_error", **{header: value})
    with serve(scripted([limited])) as server, pytest.raises(ModelRateLimited) as caught:
        await model_at(server, retry=patient).generate(ModelRequest(USER))
    assert caught.value.retry_after == seconds
    assert len(server.requests) == 1


async def test_exhausted_quota_is_not_retried() -> None:
    no_quota = error(429, "quota", kind="insufficient_quota", code="insufficient_quota")
    with serve(scripted([no_quota])) as server, pytest.raises(ModelRateLimited):
        await model_at(server).generate(ModelRequest(USER))
    assert len(server.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_server_error_is_retried_then_succeeds(stream: bool) -> None:
    with serve(scripted([error(500, "boom"), reply("recovered", stream=stream)])) as server:
        response = await model_at(server).generate(ModelRequest(USER), Deltas() if stream else None)
    assert response.message.text == "recovered"
    assert len(server.requests) == 2


async def test_persistent_server_error_raises_unavailable() -> None:
    with (
        serve(scripted([error(503, "overloaded")])) as server,
        pytest.raises(ModelUnavailable, match="overloaded") as caught,
    ):
        await model_at(server).generate(ModelRequest(USER))
    assert caught.value.details["status"] == 503
    assert len(server.requests) == 3


@pytest.mark.parametrize(
    ("status", "kind", "raised"),
    [(401, "invalid_api_key", ModelAuthError), (403, "forbidden", ModelAuthError), (400, "bad", ModelBadRequest)],
)
async def test_client_errors_are_not_retried(status: int, kind: str, raised: type[Exception]) -> None:
    with serve(scripted([error(status, "no", kind=kind)])) as server, pytest.raises(raised):
        await model_at(server).generate(ModelRequest(USER))
    assert len(server.requests) == 1


async def test_timeout_is_retried_then_raised() -> None:
    with serve(scripted([Hang(3)])) as server, pytest.raises(ModelTimeout) as caught:
        await model_at(server, timeout=0.2, retry=RetryPolicy(attempts=2, base_delay=0.01)).generate(ModelRequest(USER))
    assert isinstance(caught.value.__cause__, openai.APITimeoutError)
    assert len(server.requests) == 2


async def test_a_stream_that_stalls_after_output_is_not_retried() -> None:
    stalled = Sse(chunks("Hello there friend")[1:], delay=3.0)  # the first event already carries text
    with serve(scripted([stalled])) as server:
        deltas = Deltas()
        with pytest.raises(ModelTimeout):
            await model_at(server, timeout=0.5).generate(ModelRequest(USER), deltas)
    assert [d.text for d in deltas if isinstance(d, TextDelta)] == ["Hello "]
    assert len(server.requests) == 1  # the caller already saw part of the answer: no second attempt


async def test_a_stream_that_fails_before_output_is_retried() -> None:
    failing = Sse([{"error": {"message": "overloaded", "type": "server_error", "code": None}}])
    with serve(scripted([failing, Sse(chunks("fine"))])) as server:
        deltas = Deltas()
        response = await model_at(server).generate(ModelRequest(USER), deltas)
    assert response.message.text == "fine"
    assert [d.text for d in deltas if isinstance(d, TextDelta)] == ["fine"]
    assert len(server.requests) == 2


async def test_a_cut_stream_fails_clearly() -> None:
    cut = Sse(chunks("Half an ans", done=False))
    with serve(scripted([cut])) as server, pytest.raises(ModelUnavailable, match="ended before"):
        await model_at(server).generate(ModelRequest(USER), Deltas())
    assert len(server.requests) == 1


async def test_unreadable_stream_data_is_an_output_error() -> None:
    with serve(scripted([Sse(["not json"])])) as server, pytest.raises(ModelOutputError):
        await model_at(server).generate(ModelRequest(USER), Deltas())


async def test_media_the_api_cannot_take_is_refused_before_sending() -> None:
    message = Message("user", [MediaPart("https://x.test/song.mp3", "audio/mpeg")])
    with serve(scripted([Json(completion("ok"))])) as server, pytest.raises(ModelBadRequest, match="audio/mpeg"):
        await model_at(server).generate(ModelRequest([message]))
    assert server.requests == []


# -- agents ---------------------------------------------------------------------------------------


async def test_a_failed_model_call_leaves_the_session_as_it_was() -> None:
    state = {"fail": False}

    def handler(request: WireRequest) -> Reply:
        return error(500, "down") if state["fail"] else Json(completion("hello"))

    with serve(handler) as server:
        plugin = OpenAI(api_key="sk-test", base_url=f"{server.url}/v1", retry=FAST)
        _, agent = build(model="openai/gpt-test", plugins=[plugin])
        chat = agent.chat()
        assert (await chat.send("Hi")).text == "hello"
        before = await chat.history()
        state["fail"] = True
        with pytest.raises(ModelUnavailable):
            await chat.send("Are you there?")
        assert await chat.history() == before
        state["fail"] = False
        res = await chat.send("Again?")
        assert res.finish_reason == AgentFinishReason.STOP and res.text == "hello"
        assert [m.role for m in await chat.history()] == ["user", "model", "user", "model"]


def banking_handler(stream: bool) -> Callable[[WireRequest], Reply]:
    """Behaves as the banking agent's system prompt asks, keyed on the call ids it handed out."""

    def handler(request: WireRequest) -> Reply:
        last = request.body["messages"][-1]
        if last["role"] == "user":
            args = {"action": "transfer_money", "details": "Transfer $500 to savings"}
            return reply("Asking for approval.", [tool_call("call_approve", "userApproval", args)], stream=stream)
        if last["tool_call_id"] == "call_approve" and json.loads(last["content"])["approved"]:
            args = {"amount": "500", "to_account": "savings"}
            return reply(None, [tool_call("call_transfer", "transfer_money", args)], stream=stream)
        return reply(f"Done. {last['content']}", stream=stream)

    return handler


@pytest.mark.parametrize("stream", [False, True])
async def test_banking_example_end_to_end(stream: bool) -> None:
    ledger: list[str] = []
    with serve(banking_handler(stream)) as server:
        plugin = OpenAI(api_key="sk-test", base_url=f"{server.url}/v1", retry=FAST)
        _, agent = build(ledger=ledger, model="openai/gpt-test", plugins=[plugin])
        chat = agent.chat()
        if stream:
            seen = [chunk async for chunk in chat.send_stream("Transfer $500 to savings.")]
            assert any(isinstance(c, InterruptChunk) for c in seen)
            res = await chat.last_response()
            assert res is not None
        else:
            res = await chat.send("Transfer $500 to savings.")
        assert res.finish_reason == AgentFinishReason.INTERRUPTED
        [pending] = res.interrupts
        assert pending.name == "userApproval"
        assert pending.input == {"action": "transfer_money", "details": "Transfer $500 to savings"}
        assert pending.ref != "call_approve"  # refs are the runtime's
        answer = pending.respond({"approved": True, "feedback": "Looks good!"})
        if stream:
            stream_ = chat.resume_stream(respond=[answer])
            texts = [c.text async for c in stream_ if isinstance(c, TextChunk)]
            res = await stream_.response
            assert "".join(texts).endswith("Transferred $500 to savings.")
        else:
            res = await chat.resume(respond=[answer])
    assert res.finish_reason == AgentFinishReason.STOP
    assert res.text == "Done. Transferred $500 to savings."
    assert ledger == ["500->savings"]
    first, second, third = bodies(server)
    assert first["messages"][0]["role"] == "system"
    assert "first userApproval" in first["messages"][0]["content"]
    assert sorted(t["function"]["name"] for t in first["tools"]) == ["transfer_money", "userApproval"]
    approval_schema = next(t for t in first["tools"] if t["function"]["name"] == "userApproval")["function"]
    assert set(approval_schema["parameters"]["properties"]) == {"action", "details"}
    assert second["messages"][-2]["tool_calls"][0]["id"] == "call_approve"
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_approve",
        "content": '{"approved":true,"feedback":"Looks good!"}',
    }
    assert third["messages"][-1]["tool_call_id"] == "call_transfer"
    assert all(b.get("stream", False) is stream for b in (first, second, third))
