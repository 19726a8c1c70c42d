"""The Anthropic provider: the real ``anthropic`` SDK over real HTTP to a loopback fake of the
Messages API (JSON and SSE), asserting on what the SDK sent as well as on what came back."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import pytest

from pausepoint import (
    MediaPart,
    Message,
    ModelRequest,
    TextPart,
    ToolDefinition,
    ToolRequestPart,
    ToolResponsePart,
)
from pausepoint.errors import (
    ModelAuthError,
    ModelBadRequest,
    ModelOutputError,
)
from pausepoint.models import RetryPolicy
from pausepoint.models.anthropic import Anthropic, AnthropicModel

from .anthropic_wire import check_request, error, events, message, reply, stream_error, text, thinking, tool_use
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


WEATHER = ToolDefinition(
    "get_weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


# -- names and requests ----------------------------------------------------------------------------


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


@pytest.mark.parametrize("config", [{"messages": []}, {"system": "Ignore the agent."}, {"tools": []}, {"stream": True}])
async def test_config_never_replaces_what_the_adapter_sets(config: dict[str, Any]):
    """The session's history, the agent's system prompt and tools, streaming: refused as OpenAI's
    and Gemini's adapters refuse them, before sending (found by a probe: they replaced them, and
    the turn went on with the history gone)."""
    refused = f"config key '{next(iter(config))}' is set by pausepoint"
    with WireServer(scripted([Json(message([text("ok")]))])) as server, pytest.raises(ModelBadRequest, match=refused):
        await model_for(server).generate(ModelRequest([user("Hi")], config=config))
    assert server.requests == []


def without_anthropic_environment(monkeypatch: pytest.MonkeyPatch, home) -> None:
    for name in [n for n in os.environ if n.startswith("ANTHROPIC_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))


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


async def test_call_ids_the_api_would_refuse_go_as_ids_it_takes_the_same_on_call_and_result():
    """Another provider's call ids (a compatible OpenAI server's ``functions.lookup:0``) break the
    API's pattern, ``^[a-zA-Z0-9_-]+$``: sent as they were, a session moved here was refused every
    turn (found by a probe). Such an id goes as ``toolu_`` and a hash of it, on the call and on its
    result alike, in every request, and another for every other id; an id the API takes goes as it is."""
    ids = ["functions.lookup:0", "functions.lookup:1", "call_ok-1"]
    calls = [ToolRequestPart("lookup", {"n": n}, ref=f"r{n}", call_id=i) for n, i in enumerate(ids)]
    results = [ToolResponsePart("lookup", {"balance": n}, ref=f"r{n}", call_id=i) for n, i in enumerate(ids)]
    history = [user("Look up three."), Message("model", calls), Message("tool", results)]
    with WireServer(claude(lambda body: [text("Done.")])) as server:
        for _ in range(2):
            assert (await model_for(server).generate(ModelRequest(history))).message.text == "Done."
    first, again = (r.body["messages"] for r in server.requests)
    sent_calls = [b["id"] for b in first[1]["content"]]
    assert [b["tool_use_id"] for b in first[2]["content"]] == sent_calls
    assert all(re.fullmatch(r"toolu_[0-9a-f]{32}", i) for i in sent_calls[:2])
    assert len(set(sent_calls)) == 3 and sent_calls[2] == "call_ok-1"
    assert again == first


# -- responses ---------------------------------------------------------------------------------------


async def test_stream_tool_call_without_arguments_is_an_empty_object():
    with WireServer(scripted([Sse(events([tool_use("toolu_n", "now", "")], stop_reason="tool_use"))])) as server:
        response = await model_for(server).generate(ModelRequest([user("Time?")]), lambda chunk: None)
    assert response.message.parts == [ToolRequestPart("now", {}, call_id="toolu_n")]


async def test_usage_counts_cached_input_tokens():
    body = message([text("ok")], input_tokens=5, output_tokens=2, cache_read_input_tokens=100)
    with WireServer(scripted([Json(body)])) as server:
        response = await model_for(server).generate(ModelRequest([user("Hi")]))
    assert (response.usage.input_tokens, response.usage.output_tokens) == (105, 2)


async def test_a_reply_without_usage_is_a_reply_with_no_counts():
    """A gateway may strip ``usage`` (found by a probe: an AttributeError, as a ModelError)."""
    body = message([text("ok")])
    del body["usage"]
    start = {key: value for key, value in message([], stop_reason=None).items() if key != "usage"}
    streamed = [
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": "ok"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    with WireServer(scripted([Json(body), Sse(streamed)])) as server:
        model = model_for(server)
        replied = await model.generate(ModelRequest([user("Hi")]))
        streamed_reply = await model.generate(ModelRequest([user("Hi")]), lambda chunk: None)
    for response in (replied, streamed_reply):
        assert response.message.parts == [TextPart("ok")] and response.finish_reason == "stop"
        assert (response.usage.input_tokens, response.usage.output_tokens) == (None, None)


# -- errors and retries --------------------------------------------------------------------------------


# -- through the agent runtime --------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_thinking_blocks_come_back_unchanged_before_the_call_they_led_to(stream):
    """With extended thinking, the API refuses an assistant turn whose tool results follow unless
    it starts with its thinking blocks, unchanged (found by a probe: approving a pause ran the
    tool, then every request failed)."""
    thought = thinking("The user wants the weather; I should call the tool.", "c2lnbmF0dXJl")
    hidden = {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}
    answers = [[thought, hidden, tool_use("toolu_1", "get_weather", {"city": "Oslo"})], [text("Sunny.")]]
    config = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    with WireServer(claude(lambda body: answers.pop(0))) as server:
        model = model_for(server)
        sink = [] if stream else None
        first = await model.generate(
            ModelRequest([user("Weather in Oslo?")], tools=[WEATHER], config=config),
            sink.append if sink is not None else None,
        )
        [call] = first.message.parts
        assert isinstance(call, ToolRequestPart) and call.call_id == "toolu_1"
        assert call.provider_metadata == {"anthropic_thinking": [thought, hidden]}
        call.ref = "ref-1"
        history = [
            user("Weather in Oslo?"),
            first.message,
            Message("tool", [ToolResponsePart("get_weather", "Sunny", "ref-1", call_id="toolu_1")]),
        ]
        second = await model.generate(ModelRequest(history, tools=[WEATHER], config=config))
    assert second.message.text == "Sunny."
    sent = server.requests[1].body["messages"][1]["content"]
    assert sent == [
        thought,
        hidden,
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
    ]


async def test_a_call_id_the_reply_repeats_goes_back_under_its_ref_and_a_nameless_call_is_refused():
    """Some servers repeat one id for two calls of a message: sent back as they came, two
    results under one id cannot be told apart (the API refuses it), so the second call goes back
    under its runtime ref. A call with no name cannot be sent back at all: the reply is refused
    as unusable output, nothing of it recorded (found by a probe)."""
    from pausepoint import AgentFinishReason, Pausepoint
    from pausepoint.errors import ModelOutputError

    answers = [
        [tool_use("dup", "get_weather", {"city": "Oslo"}), tool_use("dup", "get_weather", {"city": "Rome"})],
        [text("Both sunny.")],
        [tool_use("toolu_9", "", {})],
        [text("Hello again.")],
    ]
    with WireServer(claude(lambda body: answers.pop(0))) as server:
        ai = Pausepoint(plugins=[Anthropic(api_key="sk-test", base_url=server.url, retry=FAST)])

        @ai.tool()
        async def get_weather(city: str) -> str:
            """The weather in a city."""
            return f"sunny in {city}"

        agent = ai.define_agent(name="weather", model="anthropic/claude-test", tools=[get_weather])
        chat = agent.chat()
        res = await chat.send("Oslo and Rome?")
        assert (res.finish_reason, res.text) == (AgentFinishReason.STOP, "Both sunny.")
        sent = server.requests[1].body["messages"]
        first, second = (b["id"] for b in sent[1]["content"])
        assert first == "dup" and second != "dup"
        assert [b["tool_use_id"] for b in sent[2]["content"]] == [first, second]
        before = await chat.history()
        with pytest.raises(ModelOutputError, match="no name"):
            await chat.send("again?")
        assert await chat.history() == before
        assert (await chat.send("still there?")).text == "Hello again."


async def test_a_surrogate_pair_cut_between_two_deltas_streams_and_records_whole():
    """A gateway that slices text by UTF-16 code units may end a delta halfway through a
    character: it streams whole, and the reply records it (found by a probe: the turn failed)."""
    from pausepoint import AgentFinishReason, Pausepoint

    start = message([], stop_reason=None, output_tokens=1)
    stream = [
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "hi \ud83d"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "\ude00 there"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    with WireServer(scripted([Sse(stream)])) as server:
        ai = Pausepoint(plugins=[Anthropic(api_key="sk-test", base_url=server.url, retry=FAST)])
        agent = ai.define_agent(name="talker", model="anthropic/claude-test")
        turn = agent.chat().send_stream("hello")
        texts = [chunk.text async for chunk in turn if chunk.kind == "text"]
        res = await turn.response
    assert res.finish_reason == AgentFinishReason.STOP and res.text == "hi \U0001f600 there"
    assert texts == ["hi ", "\U0001f600 there"]


async def test_media_blocks_follow_the_data_urls_own_type_and_other_media_are_refused_before_sending():
    """A PDF given as a data URL is a document block (it went out as an image, which the API
    refuses); audio or text, which the API takes no block for, is refused before the request."""
    from pausepoint.errors import ModelBadRequest

    with WireServer(claude(lambda body: [text("Read it.")])) as server:
        model = model_for(server)
        pdf = Message("user", [MediaPart("data:application/pdf;base64,JVBERi0xLjQ="), TextPart("Summarise.")])
        await model.generate(ModelRequest([pdf]))
        [block, _] = server.requests[0].body["messages"][0]["content"]
        assert block == {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                                        "data": "JVBERi0xLjQ="}}  # fmt: skip
        for part in (MediaPart("data:audio/mpeg;base64,SUQz"), MediaPart("data:text/plain,hello"),
                     MediaPart("https://example.com/song.mp3", "audio/mpeg")):  # fmt: skip
            with pytest.raises(ModelBadRequest, match=r"cannot be sent|must be base64"):
                await model.generate(ModelRequest([Message("user", [part])]))
        assert len(server.requests) == 1


async def test_a_stream_error_of_a_type_the_api_never_listed_is_unavailable():
    from pausepoint.errors import ModelUnavailable

    start = message([], stop_reason=None, output_tokens=1)
    stream = [("message_start", {"type": "message_start", "message": start}), stream_error("brand_new_error", "hm")]
    with WireServer(scripted([Sse(stream)])) as server, pytest.raises(ModelUnavailable, match="hm") as caught:
        await model_for(server, retry=RetryPolicy(attempts=1)).generate(ModelRequest([user("hi")]), lambda c: None)
    assert caught.value.details["provider"] == "anthropic"


async def test_an_auth_error_event_in_a_stream_is_named_without_the_providers_text():
    start = message([], stop_reason=None, output_tokens=1)
    refused = stream_error("authentication_error", "invalid x-api-key sk-ant-abc")
    stream = [("message_start", {"type": "message_start", "message": start}), refused]
    with WireServer(scripted([Sse(stream)])) as server, pytest.raises(ModelAuthError) as caught:
        await model_for(server).generate(ModelRequest([user("hi")]), lambda c: None)
    said = "anthropic: the provider refused the server's credentials (authentication_error in the stream)"
    assert caught.value.message == said
    assert len(server.requests) == 1


# -- replies of the wrong shape ----------------------------------------------------------------------


def _with(**fields: Any) -> dict[str, Any]:
    return {**message([text("Hi")]), **fields}


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"foo": 1}, "content is missing"),
        (_with(content=None), "content is missing"),
        (_with(content="hello"), "content is a string, not a list"),
        (_with(content=[5]), "content[0] is a number, not an object"),
        (_with(content=[{"text": "hi"}]), "content[0].type is missing"),
        (_with(content=[{"type": "text", "text": 5}]), "content[0].text is a number, not a string"),
        (_with(content=[{"type": "tool_use", "id": "t1", "name": ["pay"], "input": {}}]), "content[0].name is a list"),
        (_with(content=[{"type": "thinking", "thinking": "hm", "signature": 1}]), "content[0].signature is a number"),
        (_with(stop_reason=["end_turn"]), "stop_reason is a list, not a string"),
    ],
)
async def test_a_message_of_the_wrong_shape_is_an_output_error_naming_the_field(body, said):
    """A 200 of valid JSON in the wrong shape (a gateway's) is the provider's failure, typed and
    not retried — not a TypeError of the adapter's (found by a probe)."""
    with WireServer(scripted([Json(body)])) as server, pytest.raises(ModelOutputError, match=re.escape(said)) as caught:
        await model_for(server).generate(ModelRequest([user("hi")]))
    assert caught.value.message.startswith("anthropic: unusable response: ")
    assert caught.value.details["provider"] == "anthropic"
    assert len(server.requests) == 1


def _event(kind: str, **data: Any) -> tuple[str, Any]:
    return (kind, {"type": kind, **data})


@pytest.mark.parametrize(
    ("event", "said"),
    [
        (_event("content_block_start", index=0, content_block=None), "content_block is missing"),
        (_event("content_block_start", index=[0], content_block=text("")), "index is a list, not a whole number"),
        (_event("content_block_start", index=0, content_block={"type": 5}), "content_block.type is a number"),
        (_event("content_block_delta", index=0, delta={"type": "text_delta", "text": 5}), "delta.text is a number"),
        (_event("message_delta", delta={"stop_reason": 5}, usage={}), "delta.stop_reason is a number"),
    ],
)
async def test_a_stream_event_of_the_wrong_shape_is_an_output_error_naming_the_field(event, said):
    stream = [*events([text("")], stop=False)[:3], event, _event("message_stop")]
    with WireServer(scripted([Sse(stream)])) as server, pytest.raises(ModelOutputError, match=re.escape(said)):
        await model_for(server).generate(ModelRequest([user("hi")]), lambda c: None)
    assert len(server.requests) == 1


async def test_usage_counts_of_the_wrong_type_are_no_counts():
    body = _with(usage={"input_tokens": "11", "output_tokens": 7})
    with WireServer(scripted([Json(body)])) as server:
        response = await model_for(server).generate(ModelRequest([user("hi")]))
    assert response.message == Message("model", [TextPart("Hi")])
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (None, 7)
