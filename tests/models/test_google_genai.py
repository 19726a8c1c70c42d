"""The Gemini provider through the real ``google-genai`` SDK, over real HTTP to a loopback server."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest
from google.genai import types

from pausepoint import (
    MediaPart,
    Message,
    ModelRequest,
    Pausepoint,
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
)
from pausepoint.models import RetryPolicy
from pausepoint.models.google_genai import GoogleAI, GoogleAIModel
from pausepoint.stores import InMemorySessionStore
from tests.models.gemini_wire import (
    api_error,
    call,
    camel,
    content_text,
    function_calls,
    function_responses,
    reply,
    text,
    usage,
)
from tests.models.wire_server import Json, Reply, Sse, WireServer, scripted

FAST = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.02)
SIGNATURE_SKIP = "skip_thought_signature_validator"


def gemini(server: WireServer, *, retry: RetryPolicy = FAST, **options: Any) -> GoogleAIModel:
    plugin = GoogleAI(api_key="test-key", base_url=server.url, retry=retry, **options)
    model = plugin.resolve_model("googleai/gemini-test")
    assert model is not None
    return model


def ask(*messages: Message, **request: Any) -> ModelRequest:
    return ModelRequest(list(messages) or [Message("user", [TextPart("Hello")])], **request)


def user(value: str) -> Message:
    return Message("user", [TextPart(value)])


async def stream(model: GoogleAIModel, request: ModelRequest) -> tuple[Any, list[Any]]:
    chunks: list[Any] = []
    response = await model.generate(request, chunks.append)
    return response, chunks


# -- names and credentials ----------------------------------------------------------------------


def test_the_api_key_comes_from_gemini_api_key_first(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "from-gemini")
    monkeypatch.setenv("GOOGLE_API_KEY", "from-google")
    assert GoogleAI().api_key == "from-gemini"
    monkeypatch.delenv("GEMINI_API_KEY")
    assert GoogleAI().api_key == "from-google"


# -- replies ------------------------------------------------------------------------------------


async def test_json_text_reply_and_the_request_as_sent():
    with WireServer(scripted([Json(reply(text("Hello "), text("there."), tokens=usage(11, 4, thoughts=6)))])) as server:
        model = gemini(server)
        schema = {"type": "object", "properties": {"q": {"type": "string"}}}
        tool = ToolDefinition("lookup", "Look something up.", schema)
        response = await model.generate(ask(system="Be brief.", tools=[tool], config={"temperature": 0.2}))
    assert response.message == Message("model", [TextPart("Hello there.")])
    assert response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (11, 10)  # thinking is output
    sent = server.requests[0]
    assert sent.method == "POST" and sent.path.endswith("/models/gemini-test:generateContent")
    assert sent.headers["x-goog-api-key"] == "test-key"
    body = sent.body
    assert body["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    assert body["contents"] == [{"role": "user", "parts": [{"text": "Hello"}]}]
    declarations = body["tools"][0]["functionDeclarations"]
    assert [d["name"] for d in declarations] == ["lookup"]
    assert declarations[0]["description"] == "Look something up."
    schema = declarations[0].get("parametersJsonSchema", declarations[0].get("parameters_json_schema"))
    assert schema == tool.input_schema
    assert body["generationConfig"] == {"temperature": 0.2}


async def test_json_parallel_function_calls_keep_gemini_ids_or_none():
    parts = [text("Checking both."), call("weather", {"city": "Paris"}, id="fc-1"), call("weather", {"city": "Oslo"})]
    with WireServer(scripted([Json(reply(*parts))])) as server:
        response = await gemini(server).generate(ask())
    assert response.message.parts == [
        TextPart("Checking both."),
        ToolRequestPart("weather", {"city": "Paris"}, call_id="fc-1"),
        ToolRequestPart("weather", {"city": "Oslo"}, call_id=None),
    ]


async def test_stream_reports_each_function_call_whole_across_many_events():
    events = [
        reply(text("Let me "), finish=None),
        reply(text("check."), finish=None),
        reply(call("weather", {"city": "Paris", "units": {"temp": "C"}}, thoughtSignature="c2ln"), finish=None),
        reply(call("time", {"zone": "CET"}, id="t-1"), finish=None),
        reply(finish="STOP", tokens=usage(20, 9)),
    ]
    with WireServer(scripted([Sse(events)])) as server:
        response, chunks = await stream(gemini(server), ask())
    assert chunks == [
        TextDelta("Let me "),
        TextDelta("check."),
        ToolCallDelta(0, "weather", None, '{"city": "Paris", "units": {"temp": "C"}}'),
        ToolCallDelta(1, "time", "t-1", '{"zone": "CET"}'),
    ]
    assert response.message.parts == [
        TextPart("Let me check."),
        ToolRequestPart(
            "weather", {"city": "Paris", "units": {"temp": "C"}}, provider_metadata={"gemini_thought_signature": "c2ln"}
        ),
        ToolRequestPart("time", {"zone": "CET"}, call_id="t-1"),
    ]
    assert response.usage.output_tokens == 9


async def test_thought_signatures_go_back_with_their_calls_in_later_requests():
    first = reply(
        text("Checking.", thoughtSignature="dGV4dA=="), call("weather", {"city": "Oslo"}, thoughtSignature="c2ln")
    )
    with WireServer(scripted([Json(first), Json(reply(text("Done.")))])) as server:
        model = gemini(server)
        answer = (await model.generate(ask())).message
        tool = Message("tool", [ToolResponsePart("weather", {"temp": 3}, ref="r1")])
        answer.parts[1].ref = "r1"
        await model.generate(ask(user("Weather?"), answer, tool))
    [model_content] = [c for c in server.requests[1].body["contents"] if c["role"] == "model"]
    assert [p.get("thoughtSignature") for p in model_content["parts"]] == ["dGV4dA==", "c2ln"]


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_signature_on_an_empty_text_part_goes_back_on_that_part(streamed):
    """Gemini may sign an answer on an empty text part (a stream's last one, often): it was
    dropped with the empty text, and the next request sent no signature (found by a probe). The
    part is kept, empty, with its signature, and goes back as it came; signed parts are not
    merged with the text beside them."""
    signed = text("", thoughtSignature="RklOQUw=")
    if streamed:
        first: Reply = Sse([reply(text("Hello "), finish=None), reply(text("world"), finish=None), reply(signed)])
    else:
        first = Json(reply(text("Hello world"), signed))
    with WireServer(scripted([first, Json(reply(text("Again.")))])) as server:
        model = gemini(server)
        response, chunks = await stream(model, ask()) if streamed else (await model.generate(ask()), [])
        await model.generate(ask(user("Hi"), response.message, user("Next")))
    assert response.message.parts == [
        TextPart("Hello world"),
        TextPart("", provider_metadata={"gemini_thought_signature": "RklOQUw="}),
    ]
    assert chunks == ([TextDelta("Hello "), TextDelta("world")] if streamed else [])
    [model_content] = [c for c in server.requests[1].body["contents"] if c["role"] == "model"]
    assert model_content["parts"] == [{"text": "Hello world"}, {"text": "", "thoughtSignature": "RklOQUw="}]


async def test_thought_parts_are_not_part_of_the_answer():
    parts = [text("thinking about it", thought=True), text("The answer.", thoughtSignature="c2ln")]
    with WireServer(scripted([Json(reply(*parts)), Sse([reply(*parts)])])) as server:
        model = gemini(server)
        response = await model.generate(ask())
        streamed, chunks = await stream(model, ask())
    assert response.message.text == streamed.message.text == "The answer."
    assert chunks == [TextDelta("The answer.")]


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_blocked_prompt_is_blocked_with_an_empty_message(streamed):
    body = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": usage(7, 0)}
    with WireServer(scripted([Sse([body]) if streamed else Json(body)])) as server:
        model = gemini(server)
        response = (await stream(model, ask()))[0] if streamed else await model.generate(ask())
    assert (response.finish_reason, response.message.parts, response.usage.input_tokens) == ("blocked", [], 7)


async def test_a_reply_with_no_candidate_and_no_block_is_an_output_error():
    server = WireServer(scripted([Json({"usageMetadata": usage(1, 0)})]))
    with server, pytest.raises(ModelOutputError, match="no candidate"):
        await gemini(server).generate(ask())


# -- requests -----------------------------------------------------------------------------------


async def test_history_maps_roles_ids_results_and_media():
    history = [
        Message("user", [TextPart("Look at this"), MediaPart("data:image/png;base64,iVBORw0K", "image/png")]),
        Message(
            "model",
            [
                TextPart("Two lookups."),
                ToolRequestPart("weather", {"city": "Paris"}, ref="ref-a", call_id="fc-1"),
                ToolRequestPart("weather", '{"city": "Os', ref="ref-b"),
            ],
        ),
        Message(
            "tool",
            [
                ToolResponsePart("weather", {"temp": 21}, ref="ref-a", call_id="fc-1"),
                ToolResponsePart("weather", {"error": "invalid input"}, ref="ref-b", is_error=True),
            ],
        ),
        Message("model", []),
        user("And a file?"),
        Message("user", [MediaPart("https://example.com/report.pdf", "application/pdf")]),
        Message("model", [ToolRequestPart("count", 3, ref="ref-c")]),
        Message(
            "tool",
            [ToolResponsePart("count", "three", ref="ref-c")],
        ),
        Message("model", [ToolRequestPart("fail", {}, ref="ref-d")]),
        Message("tool", [ToolResponsePart("fail", "boom", ref="ref-d", is_error=True)]),
    ]
    with WireServer(scripted([Json(reply(text("ok")))])) as server:
        await gemini(server).generate(ModelRequest(history))
    contents = server.requests[0].body["contents"]
    # empty messages are dropped; consecutive user-side messages merge into one content
    assert [c["role"] for c in contents] == ["user", "model", "user", "model", "user", "model", "user"]
    assert camel(contents[0]["parts"]) == [
        {"text": "Look at this"},
        {"inlineData": {"mimeType": "image/png", "data": "iVBORw0K"}},
    ]
    assert contents[1]["parts"][0] == {"text": "Two lookups."}
    assert function_calls(server.requests[0]) == [
        {"id": "fc-1", "name": "weather", "args": {"city": "Paris"}},
        {"id": "ref-b", "name": "weather", "args": {"raw_arguments": '{"city": "Os'}},
        {"id": "ref-c", "name": "count", "args": {"raw_arguments": "3"}},
        {"id": "ref-d", "name": "fail", "args": {}},
    ]
    # each model message's first call carries the validator-skipping thought signature
    signatures = [p.get("thoughtSignature") for c in contents for p in c["parts"] if "functionCall" in p]
    assert signatures == [SIGNATURE_SKIP, None, SIGNATURE_SKIP, SIGNATURE_SKIP]
    assert function_responses(server.requests[0]) == [
        {"id": "fc-1", "name": "weather", "response": {"temp": 21}},
        {"id": "ref-b", "name": "weather", "response": {"error": "invalid input"}},
        {"id": "ref-c", "name": "count", "response": {"output": "three"}},
        {"id": "ref-d", "name": "fail", "response": {"error": "boom"}},
    ]
    assert camel(contents[2]["parts"][2:]) == [
        {"text": "And a file?"},
        {"fileData": {"fileUri": "https://example.com/report.pdf", "mimeType": "application/pdf"}},
    ]


async def test_config_maps_max_tokens_and_bad_config_or_media_sends_nothing():
    with WireServer(scripted([Json(reply(text("ok")))])) as server:
        model = gemini(server)
        await model.generate(ask(config={"max_tokens": 64, "stop_sequences": ["END"], "top_k": 5}))
        with pytest.raises(ModelBadRequest, match="invalid Gemini config"):
            await model.generate(ask(config={"no_such_option": 1}))
        with pytest.raises(ModelBadRequest, match="set by pausepoint"):
            await model.generate(ask(config={"tools": []}))
        with pytest.raises(ModelBadRequest, match="invalid data URL"):
            await model.generate(ask(Message("user", [MediaPart("data:image/png;base64,@@not base64@@")])))
    assert len(server.requests) == 1
    assert server.requests[0].body["generationConfig"] == {"maxOutputTokens": 64, "stopSequences": ["END"], "topK": 5}


async def test_config_takes_the_sdks_own_types_and_schema_classes_as_json():
    """A value JSON cannot carry is refused before sending (``test_providers_refusals.py``); the
    SDK's own types and a schema class are not: the SDK turns them into JSON itself."""

    class Answer(pydantic.BaseModel):
        city: str

    config = {
        "response_mime_type": "application/json",
        "response_schema": list[Answer],
        "thinking_config": types.ThinkingConfig(thinking_budget=64),
    }
    with WireServer(scripted([Json(reply(text('[{"city": "Oslo"}]')))])) as server:
        await gemini(server).generate(ask(config=config))
    sent = camel(server.requests[0].body["generationConfig"])
    assert sent["thinkingConfig"] == {"thinkingBudget": 64}
    assert sent["responseSchema"]["items"]["properties"]["city"]["type"].upper() == "STRING"


# -- errors and retries -------------------------------------------------------------------------


async def test_rate_limit_retry_delay_from_google_retry_info():
    retry_info = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}
    server = WireServer(scripted([api_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded", retry_info)]))
    with server, pytest.raises(ModelRateLimited) as caught:
        await gemini(server, retry=RetryPolicy(max_retry_after=10)).generate(ask())
    # 37 s is beyond the policy's max_retry_after: raised at once, not waited for
    assert caught.value.retry_after == 37.0
    assert len(server.requests) == 1


async def test_a_400_for_an_invalid_key_is_an_auth_error_and_not_retried():
    refused = api_error(
        400,
        "INVALID_ARGUMENT",
        "API key not valid. Please pass a valid API key.",
        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"},
    )
    with WireServer(scripted([refused])) as server, pytest.raises(ModelAuthError) as caught:
        await gemini(server).generate(ask())
    assert caught.value.message == "googleai: the provider refused the server's credentials (HTTP 400)"
    assert caught.value.details["status"] == 400
    assert len(server.requests) == 1


async def test_a_reply_the_sdk_cannot_read_is_an_output_error():
    unreadable = reply(call("weather", "{not an object"))  # type: ignore[arg-type]
    with WireServer(scripted([Json(unreadable)])) as server, pytest.raises(ModelOutputError):
        await gemini(server).generate(ask())
    assert len(server.requests) == 1


# -- malformed calls ----------------------------------------------------------------------------

MALFORMED = reply(finish="MALFORMED_FUNCTION_CALL", finishMessage="Malformed function call: print(transfer(")
# (google-genai 3.x does not read ``finishMessage`` from the Developer API, so it is not asserted on)


@pytest.mark.parametrize("streamed", [False, True])
async def test_malformed_function_call_is_asked_again(streamed):
    fixed = reply(call("weather", {"city": "Paris"}))
    replies: list[Reply] = [Sse([MALFORMED]), Sse([fixed])] if streamed else [Json(MALFORMED), Json(fixed)]
    with WireServer(scripted(replies)) as server:
        model = gemini(server)
        response = (await stream(model, ask()))[0] if streamed else await model.generate(ask())
    assert response.message.tool_requests == [ToolRequestPart("weather", {"city": "Paris"})]
    assert len(server.requests) == 2


async def test_persistent_malformed_function_call_is_an_output_error():
    server = WireServer(scripted([Json(MALFORMED)]))
    with server, pytest.raises(ModelOutputError, match=r"unusable function call \(MALFORMED_FUNCTION_CALL\)"):
        await gemini(server).generate(ask())
    assert len(server.requests) == FAST.attempts


def agent_on(server: WireServer, *, retry: RetryPolicy = FAST) -> Any:
    ai = Pausepoint(plugins=[GoogleAI(api_key="test-key", base_url=server.url, retry=retry)])

    @ai.tool()
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"Sunny in {city}."

    return ai.define_agent(
        name="weatherAgent",
        model="googleai/gemini-test",
        system="Answer weather questions with the weather tool.",
        tools=[weather],
        store=InMemorySessionStore(),
    )


async def test_parallel_results_pair_with_their_calls_by_id():
    first = reply(call("weather", {"city": "Paris"}, id="fc-paris"), call("weather", {"city": "Oslo"}))
    with WireServer(scripted([Json(first), Json(reply(text("Both sunny.")))])) as server:
        chat = agent_on(server).chat()
        res = await chat.send("Paris and Oslo?")
        history = await chat.history()
    assert res.text == "Both sunny."
    calls, results = function_calls(server.requests[1]), function_responses(server.requests[1])
    assert calls[0]["id"] == "fc-paris"
    oslo_ref = history[1].tool_requests[1].ref
    assert calls[1]["id"] == oslo_ref and oslo_ref  # no Gemini id: the runtime's ref pairs them
    assert [(r["id"], r["response"]) for r in results] == [
        ("fc-paris", {"output": "Sunny in Paris."}),
        (oslo_ref, {"output": "Sunny in Oslo."}),
    ]
    assert server.requests[1].body["systemInstruction"]["parts"][0]["text"].startswith("Answer weather")


async def test_an_unusable_call_leaves_the_session_as_it_was():
    bad = Json(MALFORMED)
    replies: list[Reply] = [Json(reply(text("First answer."))), bad, bad, Json(reply(text("Second answer.")))]
    with WireServer(scripted(replies)) as server:
        chat = agent_on(server, retry=RetryPolicy(attempts=2, base_delay=0.01)).chat()
        await chat.send("One")
        before = await chat.history()
        with pytest.raises(ModelOutputError):
            await chat.send("Two")
        assert await chat.history() == before
        res = await chat.send("Three")
    assert res.text == "Second answer."
    assert [content_text(c) for c in server.requests[-1].body["contents"]] == ["One", "First answer.", "Three"]
