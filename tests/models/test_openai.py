"""The OpenAI adapter: the real ``openai`` SDK over real HTTP to a loopback server speaking Chat Completions."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from examples.banking import build
from pausepoint import (
    AgentFinishReason,
    MediaPart,
    Message,
    ModelRequest,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolDefinition,
    ToolRequestPart,
    ToolResponsePart,
)
from pausepoint.errors import (
    ModelBadRequest,
    ModelOutputError,
    ModelRateLimited,
)
from pausepoint.models import RetryPolicy
from pausepoint.models.openai import OpenAI, OpenAIModel

from .openai_wire import chunks, completion, error, reply, strict, tool_call
from .wire_server import Json, Reply, Sse, WireRequest, WireServer, scripted

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


def test_compatible_plugins_resolve_their_own_prefix_only() -> None:
    ollama = OpenAI.ollama()
    assert ollama.resolve_model("openai/gpt-4o") is None
    llama = ollama.resolve_model("ollama/llama3.2:1b")
    assert llama is not None and llama.name == "ollama/llama3.2:1b" and llama.model_id == "llama3.2:1b"
    assert OpenAI.compatible("vllm", "http://localhost:8000/v1").resolve_model("vllm/org/model-7b") is not None


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


async def test_a_stream_asks_for_its_usage() -> None:
    with serve(scripted([Sse(chunks("The quick brown fox", completion_tokens=4))])) as server:
        response = await model_at(server).generate(ModelRequest(USER), Deltas())
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


async def test_ollama_preset_points_at_the_local_server() -> None:
    plugin = OpenAI.ollama()
    assert str(plugin.client().base_url) == "http://localhost:11434/v1/"
    await plugin.aclose()


# -- tool calls -----------------------------------------------------------------------------------


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
        ({"content": "", "finish_reason": "content_filter"}, "blocked"),
        ({"refusal": "I can't help with that.", "finish_reason": "stop"}, "blocked"),
    ],
)
async def test_a_filtered_or_refused_answer_is_blocked(stream: bool, options: dict[str, Any], expected: str) -> None:
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


# -- replies of the wrong shape ----------------------------------------------------------------------


def _shaped(**message: Any) -> dict[str, Any]:
    """A completion whose message has ``message``'s fields instead."""
    body = completion("Hi")
    body["choices"][0]["message"].update(message)
    return body


def _chunk(delta: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": None}
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}


BAD_CALL = {"id": "c1", "type": "function", "function": None}


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"foo": 1}, "choices is missing"),
        ({"id": "c", "choices": "x"}, "choices is a string, not a list"),
        ({"id": "c", "choices": [5]}, "choices[0] is a number, not an object"),
        ({"id": "c", "choices": [{"index": 0, "message": None, "finish_reason": "stop"}]}, "message is missing"),
        (_shaped(content=5), "choices[0].message.content is a number, not a string"),
        (_shaped(content=[{"type": "text", "text": 5}]), "content[0].text is a number, not a string"),
        (_shaped(content=["hi"]), "content[0] is a string, not an object"),
        (_shaped(refusal=["no"]), "refusal is a list, not a string"),
        (_shaped(tool_calls={"id": "c1"}), "tool_calls is an object, not a list"),
        (_shaped(tool_calls=[BAD_CALL]), "tool_calls[0].function is missing"),
        (_shaped(tool_calls=[tool_call("c1", "pay", "{}") | {"id": 7}]), "tool_calls[0].id is a number"),
        (
            _shaped(tool_calls=[{"id": "c1", "type": "function", "function": {"name": "pay", "arguments": 5}}]),
            "tool_calls[0].function.arguments is a number, not a string",
        ),
    ],
)
async def test_a_completion_of_the_wrong_shape_is_an_output_error_naming_the_field(body: Any, said: str) -> None:
    """A 200 of valid JSON in the wrong shape (a proxy's, a compatible server's) is the provider's
    failure, typed and not retried — not a TypeError of the adapter's (found by a probe)."""
    with serve(scripted([Json(body)])) as server, pytest.raises(ModelOutputError, match=re.escape(said)) as caught:
        await model_at(server).generate(ModelRequest(USER))
    assert caught.value.message.startswith("openai: unusable response: ")
    assert caught.value.details["provider"] == "openai"
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("event", "said"),
    [
        ({**_chunk({}), "choices": "x"}, "choices is a string, not a list"),
        (_chunk("hi"), "delta is a string, not an object"),
        (_chunk({"content": 5}), "delta.content is a number, not a string"),
        (_chunk({"tool_calls": [{"index": [0], "id": "c1"}]}), "index is a list, not a whole number"),
        (_chunk({"tool_calls": [{"index": 0, "function": {"arguments": 5}}]}), "arguments is a number"),
    ],
)
async def test_a_stream_chunk_of_the_wrong_shape_is_an_output_error_naming_the_field(event: Any, said: str) -> None:
    with serve(scripted([Sse([event, "[DONE]"])])) as server, pytest.raises(ModelOutputError, match=re.escape(said)):
        await model_at(server).generate(ModelRequest(USER), Deltas())
    assert len(server.requests) == 1


async def test_content_as_a_list_of_parts_is_read_as_its_text_parts() -> None:
    """Some compatible servers send content as parts; other kinds of part (thinking) are not the answer."""
    parts = [
        {"type": "thinking", "thinking": "hmm"},
        {"type": "text", "text": "Hi "},
        {"type": "text", "text": "there"},
    ]
    streamed = [_chunk({"content": parts[:2]}), _chunk({"content": parts[2:]}), *chunks(finish_reason="stop")[1:]]
    with serve(scripted([Json(_shaped(content=parts)), Sse(streamed)])) as server:
        whole = await model_at(server).generate(ModelRequest(USER))
        deltas = Deltas()
        as_streamed = await model_at(server).generate(ModelRequest(USER), deltas)
    assert whole.message == as_streamed.message == Message("model", [TextPart("Hi there")])
    assert deltas == [TextDelta("Hi "), TextDelta("there")]


async def test_arguments_sent_as_an_object_are_read_in_a_stream_as_in_a_whole_reply() -> None:
    """A compatible server's variant, read in whole replies, was refused in streams (found by a
    probe: ``arguments is an object``): the object is read as its JSON text."""
    args = {"city": "Paris", "days": [1, 2]}
    whole_call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": args}}
    head = {"index": 0, "id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": args}}
    streamed = [_chunk({"role": "assistant", "tool_calls": [head]}), *chunks(finish_reason="tool_calls")[1:]]
    with serve(scripted([Json(_shaped(content=None, tool_calls=[whole_call])), Sse(streamed)])) as server:
        whole = await model_at(server).generate(ModelRequest(USER))
        deltas = Deltas()
        as_streamed = await model_at(server).generate(ModelRequest(USER), deltas)
    assert (
        whole.message == as_streamed.message == Message("model", [ToolRequestPart("get_weather", args, call_id="c1")])
    )
    assert deltas == [ToolCallDelta(0, "get_weather", "c1", '{"city":"Paris","days":[1,2]}')]


async def test_a_chunk_whose_delta_is_null_carries_nothing() -> None:
    """Some compatible servers send ``"delta": null`` (with a finish reason, or alone)."""
    events = [_chunk(None), *chunks("Hi there", finish_reason=None, done=False), _chunk(None)]
    events[-1]["choices"][0]["finish_reason"] = "stop"
    with serve(scripted([Sse([*events, "[DONE]"])])) as server:
        response = await model_at(server).generate(ModelRequest(USER), Deltas())
    assert (response.message, response.finish_reason) == (Message("model", [TextPart("Hi there")]), "stop")


# -- errors and retries ---------------------------------------------------------------------------


async def test_exhausted_quota_is_not_retried() -> None:
    no_quota = error(429, "quota", kind="insufficient_quota", code="insufficient_quota")
    with serve(scripted([no_quota])) as server, pytest.raises(ModelRateLimited):
        await model_at(server).generate(ModelRequest(USER))
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
