"""The cloud providers under test, each as its wire speaks it.

A ``Provider`` knows one API's wire format (through ``openai_wire``, ``anthropic_wire``,
``gemini_wire``): how a reply, an error reply and a stream look, and how to read what the SDK
sent (the system prompt, the tools, the calls and results it sent back). The scenarios every
provider must pass are written once, in ``test_providers.py``, against this interface, as the
store suite is written against ``tests/stores/backends.py``; what is particular to one API (the
exact request body, history mapping, config keys) stays in its ``test_<provider>.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pydantic_core
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from pausepoint import Message, ModelRequest, TextDelta, TextPart, ToolCallDelta
from pausepoint.errors import ModelBadRequest, ModelError
from pausepoint.models import RetryPolicy
from pausepoint.models.anthropic import Anthropic
from pausepoint.models.google_genai import GoogleAI
from pausepoint.models.openai import OpenAI

from . import anthropic_wire, gemini_wire, openai_wire
from .wire_server import Handler, Json, Reply, Sse, WireRequest, WireServer, scripted

__all__ = ["ALL", "FAST", "Call", "Deltas", "Provider", "Result", "provider_named"]

FAST = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.02)


@dataclass(frozen=True)
class Call:
    """A tool call as a model sends it: ``args`` is an object, or raw (possibly malformed) text."""

    call_id: str
    name: str
    args: Any


@dataclass(frozen=True)
class Result:
    """A tool result as the SDK sent it back: ``output`` as it is on the wire."""

    call_id: str
    output: Any
    is_error: bool


class Provider:
    """One provider's wire format; see the module docstring."""

    name: str  # the plugin's prefix, and the id of the parametrised tests
    module: str  # pausepoint.models.<module>
    extra: str  # the pip extra that installs its SDK
    sdk: str  # the SDK's top-level module
    key_variables: tuple[str, ...]
    #: the exceptions the SDK raises for a 429 and for a timeout (what typed errors chain from)
    rate_limit_cause: type[BaseException]
    timeout_cause: tuple[type[BaseException], ...]
    #: whether the SDK streams a call's arguments in pieces (else each call comes whole)
    arguments_in_pieces: bool
    #: what the model is told when its arguments cannot be used, and what this API sends back
    bad_arguments: Any
    #: (finish reason on the wire, pausepoint's)
    finish_reasons: Sequence[tuple[str, str]]

    model_id = "test-model"

    @property
    def model_name(self) -> str:
        return f"{self.name}/{self.model_id}"

    # -- plugins ------------------------------------------------------------------------------

    def serve(self, handler: Handler) -> WireServer:
        """A loopback server answering with ``handler`` what the API would accept, and with the
        API's own 400 what it would refuse."""
        return WireServer(handler)

    def plugin(self, server: WireServer | str, *, retry: RetryPolicy = FAST, **options: Any) -> Any:
        """A plugin pointed at ``server`` (or a base URL), with a key."""
        raise NotImplementedError

    def keyless_plugin(self, server: WireServer) -> Any:
        """A plugin pointed at ``server`` that takes its key from the environment."""
        raise NotImplementedError

    def given_client(self, server: WireServer) -> Any:
        """An SDK client of the caller's own, pointed at ``server``, whose own retries are on."""
        raise NotImplementedError

    def is_closed(self, client: Any) -> bool:
        raise NotImplementedError

    def clear_credentials(self, monkeypatch: pytest.MonkeyPatch, home: Any) -> None:
        for variable in self.key_variables:
            monkeypatch.delenv(variable, raising=False)

    def model(self, server: WireServer | str, **options: Any) -> Any:
        found = self.plugin(server, **options).resolve_model(self.model_name)
        assert found is not None
        return found

    # -- replies ------------------------------------------------------------------------------

    def reply(
        self,
        text: str | None = None,
        calls: Sequence[Call] = (),
        *,
        stream: bool,
        finish: str | None = None,
        input_tokens: int = 11,
        output_tokens: int = 7,
    ) -> Reply:
        """A whole answer (``finish`` on the wire; default: what a finished answer says)."""
        raise NotImplementedError

    def cut_stream(self, text: str) -> Sse:
        """A stream that sends ``text`` and ends before the answer does."""
        raise NotImplementedError

    def failing_stream(self, text: str = "") -> Sse:
        """A 200 stream carrying an overload error event, after ``text`` (none: before any output)."""
        raise NotImplementedError

    def slow_stream(self, text: str, delay: float) -> Sse:
        """A stream of ``text`` word by word, ``delay`` seconds apart."""
        raise NotImplementedError

    def error(self, status: int, message: str, **headers: str) -> Json:
        """The API's error reply of ``status``."""
        raise NotImplementedError

    # -- what the SDK sent --------------------------------------------------------------------

    def is_stream(self, request: WireRequest) -> bool:
        raise NotImplementedError

    def system(self, request: WireRequest) -> str:
        raise NotImplementedError

    def tool_names(self, request: WireRequest) -> list[str]:
        raise NotImplementedError

    def tool_parameters(self, request: WireRequest, name: str) -> dict[str, Any]:
        raise NotImplementedError

    def texts(self, request: WireRequest) -> list[str]:
        """The text of each message of the conversation sent (the system prompt apart)."""
        raise NotImplementedError

    def calls(self, request: WireRequest) -> list[Call]:
        """The calls of the last model message sent, with their arguments as sent back."""
        raise NotImplementedError

    def results(self, request: WireRequest) -> list[Result]:
        """The tool results that end the conversation sent, in order (none: it ends otherwise)."""
        raise NotImplementedError

    def call_ids(self, request: WireRequest) -> tuple[list[str], list[str]]:
        """The ids of every call and of every result in the whole conversation sent, in order."""
        raise NotImplementedError

    def last_user_text(self, request: WireRequest) -> str:
        raise NotImplementedError

    def key_sent(self, request: WireRequest) -> str:
        raise NotImplementedError

    def sdk_attempt(self, request: WireRequest) -> str | None:
        """The SDK's own retry count header (Stainless SDKs say it), or None."""
        return request.headers.get("x-stainless-retry-count")

    def sent_output(self, value: Any) -> Any:
        """How a tool's result ``value`` reads on this wire."""
        raise NotImplementedError

    def read_output(self, output: Any) -> Any:
        """The tool's result, read back from how it reads on this wire."""
        if not isinstance(output, str):
            return output
        try:
            return json.loads(output)
        except ValueError:
            return output

    def sent_arguments(self, raw: Any) -> Any:
        """How a call whose ``bad_arguments`` were kept goes back to the model."""
        raise NotImplementedError


def _words(text: str) -> list[str]:
    words = text.split(" ")
    return [w if i == len(words) - 1 else w + " " for i, w in enumerate(words)]


class OpenAIProvider(Provider):
    name = module = extra = sdk = "openai"
    key_variables = ("OPENAI_API_KEY",)
    rate_limit_cause = openai.RateLimitError
    timeout_cause = (openai.APITimeoutError,)
    arguments_in_pieces = True
    bad_arguments = '{"amount": 5'
    finish_reasons = (("stop", "stop"), ("tool_calls", "stop"), ("length", "length"), ("content_filter", "blocked"))

    def serve(self, handler: Handler) -> WireServer:
        return WireServer(openai_wire.strict(handler))

    def plugin(self, server: WireServer | str, *, retry: RetryPolicy = FAST, **options: Any) -> OpenAI:
        url = server if isinstance(server, str) else server.url
        return OpenAI(api_key="sk-test", base_url=f"{url}/v1", retry=retry, **options)

    def keyless_plugin(self, server: WireServer) -> OpenAI:
        return OpenAI(base_url=f"{server.url}/v1", retry=FAST)

    def given_client(self, server: WireServer) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(api_key="sk-given", base_url=f"{server.url}/v1", max_retries=5)

    def is_closed(self, client: Any) -> bool:
        return bool(client.is_closed())

    def reply(
        self,
        text: str | None = None,
        calls: Sequence[Call] = (),
        *,
        stream: bool,
        finish: str | None = None,
        input_tokens: int = 11,
        output_tokens: int = 7,
    ) -> Reply:
        wire_calls = [openai_wire.tool_call(c.call_id, c.name, c.args) for c in calls]
        return openai_wire.reply(
            text,
            wire_calls,
            stream=stream,
            finish_reason=finish,
            prompt_tokens=input_tokens,
            completion_tokens=output_tokens,
        )

    def cut_stream(self, text: str) -> Sse:
        return Sse(openai_wire.chunks(text, done=False))

    def failing_stream(self, text: str = "") -> Sse:
        error = {"error": {"message": "overloaded", "type": "server_error", "code": None}}
        return Sse([*(openai_wire.chunks(text, done=False) if text else []), error])

    def slow_stream(self, text: str, delay: float) -> Sse:
        return Sse(openai_wire.chunks(text), delay=delay, delay_from=2)  # the second event carries text

    def error(self, status: int, message: str, **headers: str) -> Json:
        kind = {401: "invalid_api_key", 429: "rate_limit_error"}.get(status, "server_error")
        return openai_wire.error(status, message, kind=kind, **headers)

    def is_stream(self, request: WireRequest) -> bool:
        return request.body.get("stream") is True

    def system(self, request: WireRequest) -> str:
        first = request.body["messages"][0]
        assert first["role"] == "system"
        return str(first["content"])

    def tool_names(self, request: WireRequest) -> list[str]:
        return [t["function"]["name"] for t in request.body.get("tools", [])]

    def tool_parameters(self, request: WireRequest, name: str) -> dict[str, Any]:
        return next(t["function"]["parameters"] for t in request.body["tools"] if t["function"]["name"] == name)

    def texts(self, request: WireRequest) -> list[str]:
        return [m["content"] for m in request.body["messages"] if m["role"] != "system"]

    def calls(self, request: WireRequest) -> list[Call]:
        model = [m for m in request.body["messages"] if m["role"] == "assistant"][-1]
        return [Call(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in model.get("tool_calls", [])]

    def results(self, request: WireRequest) -> list[Result]:
        found: list[Result] = []
        for message in reversed(request.body["messages"]):
            if message["role"] != "tool":
                break
            error = message["content"].startswith("Error: ")
            found.insert(0, Result(message["tool_call_id"], message["content"], error))
        return found

    def call_ids(self, request: WireRequest) -> tuple[list[str], list[str]]:
        messages = request.body["messages"]
        calls = [c["id"] for m in messages for c in m.get("tool_calls") or []]
        return calls, [m["tool_call_id"] for m in messages if m["role"] == "tool"]

    def last_user_text(self, request: WireRequest) -> str:
        return str([m for m in request.body["messages"] if m["role"] == "user"][-1]["content"])

    def key_sent(self, request: WireRequest) -> str:
        return request.headers["authorization"].removeprefix("Bearer ")

    def sent_output(self, value: Any) -> Any:
        return value if isinstance(value, str) else pydantic_core.to_json(value).decode()

    def sent_arguments(self, raw: Any) -> Any:
        return raw  # the model's own text, resent as it was


_ANTHROPIC_ERRORS = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                     404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}  # fmt: skip


class AnthropicProvider(Provider):
    name = module = extra = sdk = "anthropic"
    key_variables = ("ANTHROPIC_API_KEY",)
    rate_limit_cause = anthropic.RateLimitError
    timeout_cause = (anthropic.APITimeoutError,)
    arguments_in_pieces = True
    bad_arguments = '{"amount": 5'
    finish_reasons = (
        ("end_turn", "stop"),
        ("tool_use", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("refusal", "blocked"),
        ("pause_turn", "other"),
    )

    def serve(self, handler: Handler) -> WireServer:
        def checked(request: WireRequest) -> Reply:
            problem = anthropic_wire.check_request(request.body)
            if problem is not None:
                return anthropic_wire.error(400, "invalid_request_error", problem)
            return handler(request)

        return WireServer(checked)

    def plugin(self, server: WireServer | str, *, retry: RetryPolicy = FAST, **options: Any) -> Anthropic:
        url = server if isinstance(server, str) else server.url
        return Anthropic(api_key="sk-test", base_url=url, retry=retry, **options)

    def keyless_plugin(self, server: WireServer) -> Anthropic:
        return Anthropic(base_url=server.url, retry=FAST)

    def given_client(self, server: WireServer) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(api_key="sk-given", base_url=server.url, max_retries=5)

    def is_closed(self, client: Any) -> bool:
        return bool(client.is_closed())

    def clear_credentials(self, monkeypatch: pytest.MonkeyPatch, home: Any) -> None:
        import os

        for name in [n for n in os.environ if n.startswith("ANTHROPIC_")]:
            monkeypatch.delenv(name)
        monkeypatch.setenv("HOME", str(home))  # no credentials profile either

    def reply(
        self,
        text: str | None = None,
        calls: Sequence[Call] = (),
        *,
        stream: bool,
        finish: str | None = None,
        input_tokens: int = 11,
        output_tokens: int = 7,
    ) -> Reply:
        blocks = ([anthropic_wire.text(text)] if text else []) + [
            anthropic_wire.tool_use(c.call_id, c.name, c.args) for c in calls
        ]
        stop = finish or ("tool_use" if calls else "end_turn")
        return anthropic_wire.reply(
            blocks, stream=stream, stop_reason=stop, input_tokens=input_tokens, output_tokens=output_tokens
        )

    def cut_stream(self, text: str) -> Sse:
        return Sse(anthropic_wire.events([anthropic_wire.text(text)], stop=False))

    def failing_stream(self, text: str = "") -> Sse:
        before = anthropic_wire.events([anthropic_wire.text(text)] if text else [], stop=False)
        return Sse([*before, anthropic_wire.stream_error("overloaded_error", "Overloaded")])

    def slow_stream(self, text: str, delay: float) -> Sse:
        events = anthropic_wire.events([anthropic_wire.text(text)])
        first_text = next(i for i, (name, _) in enumerate(events) if name == "content_block_delta")
        return Sse(events, delay=delay, delay_from=first_text + 1)

    def error(self, status: int, message: str, **headers: str) -> Json:
        return anthropic_wire.error(status, _ANTHROPIC_ERRORS.get(status, "api_error"), message, **headers)

    def is_stream(self, request: WireRequest) -> bool:
        return request.body.get("stream") is True

    def system(self, request: WireRequest) -> str:
        return str(request.body["system"])

    def tool_names(self, request: WireRequest) -> list[str]:
        return [t["name"] for t in request.body.get("tools", [])]

    def tool_parameters(self, request: WireRequest, name: str) -> dict[str, Any]:
        return next(t["input_schema"] for t in request.body["tools"] if t["name"] == name)

    def texts(self, request: WireRequest) -> list[str]:
        return ["".join(b.get("text", "") for b in m["content"]) for m in request.body["messages"]]

    def calls(self, request: WireRequest) -> list[Call]:
        model = [m for m in request.body["messages"] if m["role"] == "assistant"][-1]
        return [Call(b["id"], b["name"], b["input"]) for b in model["content"] if b["type"] == "tool_use"]

    def results(self, request: WireRequest) -> list[Result]:
        last = request.body["messages"][-1]
        return [
            Result(b["tool_use_id"], b["content"], b.get("is_error", False))
            for b in last["content"]
            if b["type"] == "tool_result"
        ]

    def call_ids(self, request: WireRequest) -> tuple[list[str], list[str]]:
        blocks = [b for m in request.body["messages"] if isinstance(m["content"], list) for b in m["content"]]
        return [b["id"] for b in blocks if b["type"] == "tool_use"], [
            b["tool_use_id"] for b in blocks if b["type"] == "tool_result"
        ]

    def last_user_text(self, request: WireRequest) -> str:
        last = [m for m in request.body["messages"] if m["role"] == "user"][-1]
        return "".join(b.get("text", "") for b in last["content"])

    def key_sent(self, request: WireRequest) -> str:
        return request.headers["authorization"].removeprefix("Bearer ")

    def sent_output(self, value: Any) -> Any:
        return value if isinstance(value, str) else json.dumps(value)

    def sent_arguments(self, raw: Any) -> Any:
        return {"_raw_arguments": raw}  # tool_use.input must be an object on this wire


_GOOGLE_STATES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                  408: "DEADLINE_EXCEEDED", 409: "ABORTED", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
                  503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}  # fmt: skip


class GeminiProvider(Provider):
    name = "googleai"
    module = "google_genai"
    extra = "google"
    sdk = "google.genai"
    key_variables = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    rate_limit_cause = genai_errors.ClientError
    timeout_cause = (httpx.TimeoutException, httpx2.TimeoutException)
    arguments_in_pieces = False

    @property
    def bad_arguments(self) -> Any:
        return {"amount": "five"}  # Gemini sends objects only: here, one the tool cannot take

    finish_reasons = (
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "blocked"),
        ("RECITATION", "blocked"),
        ("PROHIBITED_CONTENT", "blocked"),
        ("SPII", "blocked"),
        ("BLOCKLIST", "blocked"),
        ("OTHER", "other"),
        ("LANGUAGE", "other"),
    )

    def plugin(self, server: WireServer | str, *, retry: RetryPolicy = FAST, **options: Any) -> GoogleAI:
        url = server if isinstance(server, str) else server.url
        return GoogleAI(api_key="test-key", base_url=url, retry=retry, **options)

    def keyless_plugin(self, server: WireServer) -> GoogleAI:
        return GoogleAI(base_url=server.url, retry=FAST)

    def given_client(self, server: WireServer) -> genai.Client:
        return genai.Client(api_key="given-key", http_options=genai_types.HttpOptions(base_url=server.url))

    def is_closed(self, client: Any) -> bool:
        return bool(client.aio._api_client._async_httpx_client.is_closed)

    def reply(
        self,
        text: str | None = None,
        calls: Sequence[Call] = (),
        *,
        stream: bool,
        finish: str | None = None,
        input_tokens: int = 11,
        output_tokens: int = 7,
    ) -> Reply:
        calls_ = [gemini_wire.call(c.name, c.args, id=c.call_id) for c in calls]
        tokens = gemini_wire.usage(input_tokens, output_tokens)
        if not stream:
            parts = ([gemini_wire.text(text)] if text else []) + calls_
            return Json(gemini_wire.reply(*parts, finish=finish or "STOP", tokens=tokens))
        events = [gemini_wire.reply(gemini_wire.text(w), finish=None) for w in _words(text)] if text else []
        events += [gemini_wire.reply(c, finish=None) for c in calls_]  # each call whole, in an event of its own
        return Sse([*events, gemini_wire.reply(finish=finish or "STOP", tokens=tokens)])

    def cut_stream(self, text: str) -> Sse:
        return Sse([gemini_wire.reply(gemini_wire.text(text), finish=None)])

    def failing_stream(self, text: str = "") -> Sse:
        before = [gemini_wire.reply(gemini_wire.text(text), finish=None)] if text else []
        return Sse([*before, {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}])

    def slow_stream(self, text: str, delay: float) -> Sse:
        reply = self.reply(text, stream=True)
        assert isinstance(reply, Sse)
        return Sse(reply.events, delay=delay, delay_from=1)

    def error(self, status: int, message: str, **headers: str) -> Json:
        named = {k.replace("_", "-"): v for k, v in headers.items()}
        return gemini_wire.api_error(status, _GOOGLE_STATES.get(status, "UNKNOWN"), message, **named)

    def is_stream(self, request: WireRequest) -> bool:
        return request.path.endswith(":streamGenerateContent?alt=sse")

    def system(self, request: WireRequest) -> str:
        return str(request.body["systemInstruction"]["parts"][0]["text"])

    def tool_names(self, request: WireRequest) -> list[str]:
        return [d["name"] for t in request.body.get("tools", []) for d in t["functionDeclarations"]]

    def tool_parameters(self, request: WireRequest, name: str) -> dict[str, Any]:
        declarations = [d for t in request.body["tools"] for d in t["functionDeclarations"]]
        found = next(d for d in declarations if d["name"] == name)
        return dict(found.get("parametersJsonSchema", found.get("parameters_json_schema")))

    def texts(self, request: WireRequest) -> list[str]:
        return [gemini_wire.content_text(c) for c in request.body["contents"]]

    def calls(self, request: WireRequest) -> list[Call]:
        model = [c for c in request.body["contents"] if c["role"] == "model"][-1]
        found = [p["functionCall"] for p in model["parts"] if "functionCall" in p]
        return [Call(c.get("id", ""), c["name"], c.get("args", {})) for c in found]

    def results(self, request: WireRequest) -> list[Result]:
        last = request.body["contents"][-1]
        found = [p["functionResponse"] for p in last["parts"] if "functionResponse" in p]
        return [Result(r.get("id", ""), r["response"], "error" in r["response"]) for r in found]

    def call_ids(self, request: WireRequest) -> tuple[list[str], list[str]]:
        parts = [p for c in request.body["contents"] for p in c["parts"]]
        calls = [p["functionCall"].get("id", "") for p in parts if "functionCall" in p]
        return calls, [p["functionResponse"].get("id", "") for p in parts if "functionResponse" in p]

    def last_user_text(self, request: WireRequest) -> str:
        return gemini_wire.content_text(request.body["contents"][-1])

    def key_sent(self, request: WireRequest) -> str:
        return request.headers["x-goog-api-key"]

    def sent_output(self, value: Any) -> Any:
        # a dict result is the response object itself; anything else is wrapped
        return value if isinstance(value, dict) and "error" not in value else {"output": value}

    def read_output(self, output: Any) -> Any:
        return output["output"] if set(output) == {"output"} else output

    def sent_arguments(self, raw: Any) -> Any:
        return raw


ALL: dict[str, Provider] = {p.name: p for p in (OpenAIProvider(), AnthropicProvider(), GeminiProvider())}


def provider_named(name: str) -> Provider:
    return ALL[name]


class Deltas(list[TextDelta | ToolCallDelta]):
    """An ``on_chunk`` sink that keeps what it was given."""

    def __call__(self, chunk: TextDelta | ToolCallDelta) -> None:
        self.append(chunk)

    @property
    def texts(self) -> list[str]:
        return [d.text for d in self if isinstance(d, TextDelta)]


async def refused_before_sending(provider: Provider, config: dict[str, Any], stream: bool) -> ModelBadRequest:
    """The ``ModelBadRequest`` a request with ``config`` raises on ``provider`` — typed as such,
    not as another ``ModelError`` — with nothing reaching its server."""
    with provider.serve(scripted([provider.reply("never", stream=stream)])) as server:
        with pytest.raises(ModelError) as caught:
            await provider.model(server).generate(
                ModelRequest([Message("user", [TextPart("Hello")])], config=config), Deltas() if stream else None
            )
        assert server.requests == []
    assert type(caught.value) is ModelBadRequest, repr(caught.value)
    return caught.value
