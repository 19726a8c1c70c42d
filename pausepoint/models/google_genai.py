"""Gemini through the official ``google-genai`` SDK (the Gemini Developer API): ``googleai/<model>``.

    from pausepoint.models.google_genai import GoogleAI      # pip install 'pausepoint[google]'

    ai = Pausepoint(plugins=[GoogleAI()])                    # GEMINI_API_KEY or GOOGLE_API_KEY
    agent = ai.define_agent(name="bank", model="googleai/gemini-flash-latest", ...)

What maps to what:

- ``ModelRequest.system`` → ``system_instruction``; ``ModelRequest.config`` → ``GenerateContentConfig``
  fields (``temperature``, ``top_p``, ``top_k``, ``max_output_tokens`` (alias ``max_tokens``),
  ``stop_sequences``, ``seed``, ...; an unknown key, or a value JSON cannot carry, is a
  ``ModelBadRequest``). The keys agents share are checked as on every provider
  (``_portable.SharedConfig``).
- Messages → ``contents``: user → ``user``, model → ``model``, tool → ``user`` content of
  ``functionResponse`` parts. Consecutive contents of one role are merged (a tool result followed
  by a new user message becomes one ``user`` content), and empty messages are dropped.
- Tools → one ``Tool`` of ``function_declarations``, each with its pydantic JSON schema as
  ``parameters_json_schema`` (sent as is).
- Tool requests in history → ``functionCall`` parts: ``id`` is ``call_id or ref`` (the ref when an
  earlier call of the request has that id: ``_portable.CallIds``), ``args`` the
  input (a non-object input, e.g. a raw malformed argument string from another provider, is sent
  as ``{"raw_arguments": ...}``, since Gemini takes only objects). Gemini 3 models refuse history
  whose function calls lack their thought signature: the signatures Gemini sends are kept in
  the parts' ``provider_metadata`` and sent back; history from elsewhere (another provider, a
  scripted model) has none, so its first call carries the validator-skipping signature Google
  documents for history the client rebuilt. A signed text part stays a part of its own, an empty
  one too (a stream's last part may carry only the signature), to go back as it came.
- Tool results → ``functionResponse`` parts (``id`` is their call's, so they pair with their
  calls): a dict output is sent as the response object, anything else (or a dict with an ``error``
  key, which Gemini would read as a failure) as ``{"output": ...}``; an ``is_error`` result as
  ``{"error": ...}``, or as is when it is a dict that already has an ``error`` key.
- Response parts → ``TextPart`` / ``ToolRequestPart`` (``call_id`` = Gemini's ``id``, often
  None; ``input`` = the ``args`` object). Thought parts are not part of the answer and are dropped.
  Parallel calls come as several ``functionCall`` parts of one candidate.
- Streaming (``streamGenerateContent?alt=sse``): text parts are ``TextDelta``s; Gemini sends each
  function call whole, reported as one ``ToolCallDelta`` carrying the complete JSON arguments.
- Finish reasons: ``STOP`` → stop, ``MAX_TOKENS`` → length, ``SAFETY`` / ``RECITATION`` /
  ``BLOCKLIST`` / ``PROHIBITED_CONTENT`` / ``SPII`` / image and armor filters, or a prompt
  ``blockReason`` → blocked, anything else → other. ``MALFORMED_FUNCTION_CALL`` and
  ``UNEXPECTED_TOOL_CALL`` (Gemini could not produce a usable call, and returns no call to report
  to the model) raise ``ModelOutputError`` marked retryable: the retry policy asks again, and
  when attempts run out the turn fails with the session left as it was. A stream that ends
  without a finish reason was cut: ``ModelUnavailable``. A reply with neither a candidate nor a
  block reason is a ``ModelOutputError``.
- Usage: ``promptTokenCount`` → input, ``candidatesTokenCount + thoughtsTokenCount`` → output.
- Errors (``_map_errors``): an error status maps as every provider's does
  (``pausepoint.models._http``: 401/403 — and a 400 ``API_KEY_INVALID`` — auth, 429 rate
  limited with the ``Retry-After`` header, else the ``RetryInfo.retryDelay`` detail, 408/504
  timeout, 409/5xx unavailable, other 4xx bad request); connection failures →
  ``ModelUnavailable``; client timeouts → ``ModelTimeout``; a 200 whose body is no JSON (a
  proxy's HTML page, broken JSON), or a reply the SDK cannot read into its types →
  ``ModelOutputError``, not retried, as is a 200 to a streamed request that is no event stream.
  Retries follow the plugin's ``RetryPolicy`` (the SDK's own retries are switched off); a stream
  is retried only before its first delta.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from types import GenericAlias
from typing import Any
from urllib.parse import unquote_to_bytes

import pydantic

from .._extras import missing_extra
from ..content._messages import MediaPart, Message, Part, TextPart, ToolRequestPart, ToolResponsePart
from ..errors import ModelAuthError, ModelBadRequest, ModelError, ModelOutputError, ModelUnavailable
from ._clients import LoopClients
from ._http import ReplyReader, refuse_reserved, refuse_unsendable, retry_after, status_error, transport_error
from ._model import (
    ChunkSink,
    ModelFinishReason,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCallDelta,
    ToolDefinition,
    Usage,
)
from ._portable import SHARED_KEYS, CallIds, SharedConfig, portable_tool_name
from ._retry import RetryPolicy, call_with_retries, stream_with_retries

try:
    from google import genai
    from google.genai import errors as genai_errors
    from google.genai import types
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("google-genai", "google") from exc

__all__ = ["GoogleAI", "GoogleAIModel"]

PROVIDER = "googleai"
API_KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")

# Google's documented stand-in for a thought signature the client could not keep. The SDK
# base64-encodes bytes, so these are the bytes whose encoding is that literal string.
_SKIP_SIGNATURE = base64.urlsafe_b64decode("skip_thought_signature_validator")
_SIGNATURE_KEY = "gemini_thought_signature"

_BLOCKED = frozenset(
    {
        types.FinishReason.SAFETY,
        types.FinishReason.RECITATION,
        types.FinishReason.BLOCKLIST,
        types.FinishReason.PROHIBITED_CONTENT,
        types.FinishReason.SPII,
        types.FinishReason.IMAGE_SAFETY,
        types.FinishReason.IMAGE_PROHIBITED_CONTENT,
        types.FinishReason.IMAGE_RECITATION,
        types.FinishReason.MODEL_ARMOR,
    }
)
_UNUSABLE_CALL = frozenset({types.FinishReason.MALFORMED_FUNCTION_CALL, types.FinishReason.UNEXPECTED_TOOL_CALL})


class GoogleAI:
    """The Gemini plugin: resolves ``googleai/<model>`` (e.g. ``googleai/gemini-flash-latest``).

    ``api_key`` defaults to ``GEMINI_API_KEY``, then ``GOOGLE_API_KEY``; a missing key is reported
    as ``ModelAuthError`` on the first model call, not here. ``base_url`` points the SDK at another
    endpoint (a proxy, a test server); ``timeout`` is in seconds per request; ``retry`` governs
    retries of rate limits, server errors, timeouts and unusable calls. ``client`` uses an existing
    ``genai.Client`` as is (its own timeout and retry options then apply; the other arguments but
    ``retry`` are ignored).

    The SDK client is made one per event loop (see ``pausepoint.models``); ``aclose()`` closes them.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = 60.0,
        retry: RetryPolicy | None = None,
        api_version: str | None = None,
        client: genai.Client | None = None,
    ) -> None:
        self.prefix = PROVIDER
        self.api_key = api_key or next((v for name in API_KEY_VARIABLES if (v := os.environ.get(name))), None)
        self.base_url = base_url
        self.timeout = timeout
        self.api_version = api_version
        self.retry = retry if retry is not None else RetryPolicy()
        self._clients = LoopClients(self._make_client, _close_client, client)

    def resolve_model(self, name: str) -> GoogleAIModel | None:
        """The model for ``googleai/<model>``; None for any other name."""
        head, sep, model_id = name.partition("/")
        if not sep or head != self.prefix or not model_id:
            return None
        return GoogleAIModel(self, model_id)

    def client(self) -> genai.Client:
        """The SDK client for the running event loop. Raises ``ModelAuthError`` when there is no API key."""
        return self._clients.get()

    async def aclose(self) -> None:
        """Close the HTTP connections of the clients this plugin made (a given client is left open)."""
        await self._clients.aclose()

    def _make_client(self) -> genai.Client:
        if not self.api_key:
            raise ModelAuthError(
                "no Gemini API key: pass GoogleAI(api_key=...) or set GEMINI_API_KEY or GOOGLE_API_KEY"
            )
        options = types.HttpOptions(
            base_url=self.base_url,
            api_version=self.api_version,
            timeout=None if self.timeout is None else max(1, round(self.timeout * 1000)),
            # One attempt: retries belong to ``self.retry``, which knows streams and Retry-After.
            retry_options=types.HttpRetryOptions(attempts=1),
        )
        return genai.Client(api_key=self.api_key, vertexai=False, http_options=options)


async def _close_client(client: genai.Client) -> None:
    await client.aio.aclose()
    client.close()  # the SDK makes a sync client beside the async one; it is never used here


class GoogleAIModel:
    """One Gemini model; ``name`` is ``googleai/<model_id>``. Made by ``GoogleAI.resolve_model``."""

    def __init__(self, plugin: GoogleAI, model_id: str) -> None:
        self.plugin = plugin
        self.model_id = model_id
        self.name = f"{plugin.prefix}/{model_id}"

    def prepare(self) -> None:
        """Check, before any call, what a call needs: raises ``ModelAuthError`` without an API key
        (a client is made; it opens no connection until used)."""
        self.plugin._clients.prepare()

    async def generate(self, request: ModelRequest, on_chunk: ChunkSink | None = None) -> ModelResponse:
        """One ``generateContent`` call (``streamGenerateContent`` when ``on_chunk`` is given).

        Raises a ``ModelError`` subclass (see the module docstring) once retries are spent; a
        stream that already reported deltas is not retried.
        """
        models = self.plugin.client().aio.models
        contents = _map_messages(request.messages)
        config = _map_config(request)

        async def complete() -> ModelResponse:
            with _map_errors():
                response = await models.generate_content(model=self.model_id, contents=contents, config=config)
            return _process_response(response)

        async def stream(sink: ChunkSink) -> ModelResponse:
            with _map_errors():
                events = await models.generate_content_stream(model=self.model_id, contents=contents, config=config)
                return await _process_streamed_response(events, sink)

        if on_chunk is None:
            return await call_with_retries(complete, self.plugin.retry)
        return await stream_with_retries(stream, on_chunk, self.plugin.retry)


# -- request ----------------------------------------------------------------------------------


def _map_messages(messages: Sequence[Message]) -> list[types.Content]:
    """pausepoint messages as Gemini contents (roles ``user`` / ``model``, merged per run)."""
    ids = CallIds(messages)
    contents: list[types.Content] = []
    for message in messages:
        role = "model" if message.role == "model" else "user"
        parts = _map_parts(message, ids)
        if not parts:
            continue
        last = contents[-1] if contents else None
        if last is not None and last.role == role and last.parts is not None:
            last.parts.extend(parts)
        else:
            contents.append(types.Content(role=role, parts=parts))
    return contents


def _map_parts(message: Message, ids: CallIds) -> list[types.Part]:
    parts: list[types.Part] = []
    signed = False
    for part in message.parts:
        if isinstance(part, TextPart):
            signature = _signature(part.provider_metadata)
            if part.text or signature is not None:  # a signature may come on an empty text part
                parts.append(types.Part(text=part.text, thought_signature=signature))
        elif isinstance(part, MediaPart):
            parts.append(_map_media(part))
        elif isinstance(part, ToolRequestPart):
            name = portable_tool_name(part.name)
            call = types.FunctionCall(id=ids.sent_id(part) or None, name=name, args=_call_args(part.input))
            signature = _signature(part.provider_metadata)
            if signature is None and not signed:
                signature = _SKIP_SIGNATURE
            parts.append(types.Part(function_call=call, thought_signature=signature))
            signed = True
        else:
            parts.append(types.Part(function_response=_map_tool_response(part, ids.sent_id(part))))
    return parts


def _signature(metadata: dict[str, Any] | None) -> bytes | None:
    kept = (metadata or {}).get(_SIGNATURE_KEY)
    return base64.b64decode(kept) if isinstance(kept, str) else None


def _kept_signature(part: types.Part) -> dict[str, Any] | None:
    if not part.thought_signature:
        return None
    return {_SIGNATURE_KEY: base64.b64encode(part.thought_signature).decode()}


def _call_args(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    return {"raw_arguments": value if isinstance(value, str) else json.dumps(value)}


def _map_tool_response(part: ToolResponsePart, call_id: str) -> types.FunctionResponse:
    output = part.output
    if part.is_error:
        response = output if isinstance(output, dict) and "error" in output else {"error": output}
    else:
        response = output if isinstance(output, dict) and "error" not in output else {"output": output}
    return types.FunctionResponse(id=call_id or None, name=portable_tool_name(part.name), response=response)


def _map_media(part: MediaPart) -> types.Part:
    if part.url.startswith("data:"):
        header, _, payload = part.url[len("data:") :].partition(",")
        mime, _, encoding = header.partition(";")
        try:
            data = base64.b64decode(payload, validate=True) if encoding == "base64" else unquote_to_bytes(payload)
        except ValueError as exc:  # binascii.Error is a ValueError
            raise ModelBadRequest(f"media part has an invalid data URL: {exc}") from exc
        return types.Part(inline_data=types.Blob(mime_type=part.content_type or mime or None, data=data))
    return types.Part(file_data=types.FileData(file_uri=part.url, mime_type=part.content_type))


def _map_tool_definition(tool: ToolDefinition) -> types.FunctionDeclaration:
    return types.FunctionDeclaration(
        name=tool.name, description=tool.description, parameters_json_schema=tool.input_schema
    )


def _map_config(request: ModelRequest) -> types.GenerateContentConfig:
    """The request's system prompt, tools and generation options as one SDK config."""
    config = request.config
    refuse_reserved(config, ("system_instruction", "tools", "automatic_function_calling"))
    refuse_unsendable(config, sdk_kinds=(type, GenericAlias))  # schema classes: the SDK translates them
    shared = SharedConfig.read(config).named(max_tokens="max_output_tokens")
    options = {key: value for key, value in config.items() if key not in SHARED_KEYS} | shared
    tools = [types.Tool(function_declarations=[_map_tool_definition(t) for t in request.tools])]
    try:
        return types.GenerateContentConfig(
            system_instruction=request.system or None,
            tools=tools if request.tools else None,
            # The runtime runs the tools (and pauses them); the SDK must never call anything.
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
            **options,
        )
    except (pydantic.ValidationError, TypeError) as exc:
        raise ModelBadRequest(f"invalid Gemini config: {exc}", config=sorted(options)) from exc


# -- response ---------------------------------------------------------------------------------

# Refuses a streamed request's 200 that is no event stream, as every adapter does.
_read = ReplyReader(PROVIDER)


class _Collector:
    """Builds the model message from Gemini's parts, in order, reporting deltas when streaming."""

    def __init__(self, on_chunk: ChunkSink | None) -> None:
        self.on_chunk = on_chunk
        self.parts: list[Part] = []
        self.calls = 0
        self.finish_reason: types.FinishReason | None = None
        self.finish_message: str | None = None
        self.block_reason: types.BlockedReason | None = None
        self.usage: types.GenerateContentResponseUsageMetadata | None = None
        self.events = 0

    def add(self, response: types.GenerateContentResponse) -> None:
        if self.on_chunk is not None and not self.events:  # a stream: its first event says what the body is
            headers = response.sdk_http_response.headers if response.sdk_http_response is not None else None
            _read.require_event_stream(headers)
        self.events += 1
        if response.usage_metadata is not None:
            self.usage = response.usage_metadata
        if response.prompt_feedback is not None and response.prompt_feedback.block_reason is not None:
            self.block_reason = response.prompt_feedback.block_reason
        if not response.candidates:
            return
        candidate = response.candidates[0]
        if candidate.finish_reason is not None:
            self.finish_reason = candidate.finish_reason
            self.finish_message = candidate.finish_message
        parts = candidate.content.parts if candidate.content is not None else None
        for part in parts or []:
            self._add_part(part)

    def _add_part(self, part: types.Part) -> None:
        if part.thought:
            return
        if part.function_call is not None:
            call = part.function_call
            args = call.args if call.args is not None else {}
            self.parts.append(
                ToolRequestPart(
                    name=call.name or "", input=args, call_id=call.id, provider_metadata=_kept_signature(part)
                )
            )
            if self.on_chunk is not None:
                self.on_chunk(ToolCallDelta(self.calls, call.name, call.id, json.dumps(args)))
            self.calls += 1
        elif part.text or part.thought_signature:
            self._add_text(part.text or "", _kept_signature(part))

    def _add_text(self, text: str, signature: dict[str, Any] | None) -> None:
        """Text joins the text before it, a stream's pieces becoming one part; a part carrying a
        signature (on an empty text too, as a stream's last part may be) stays a part of its own
        with it, to go back as it came: Google asks that signed parts be neither merged nor split."""
        last = self.parts[-1] if self.parts else None
        if isinstance(last, TextPart) and last.provider_metadata is None and signature is None:
            last.text += text
        else:
            self.parts.append(TextPart(text, provider_metadata=signature))
        if self.on_chunk is not None and text:
            self.on_chunk(TextDelta(text))

    def result(self, *, streamed: bool) -> ModelResponse:
        """The complete response.

        Raises ``ModelOutputError`` when Gemini produced an unusable call or no candidate at all,
        or a stream had not one event (a body that is no event stream), and ``ModelUnavailable``
        when a stream ended before Gemini said it had finished.
        """
        if streamed and not self.events:
            raise _read.no_event_stream()
        if self.finish_reason in _UNUSABLE_CALL:
            unusable = self.finish_reason.value
            detail = f": {self.finish_message}" if self.finish_message else ""
            error = ModelOutputError(
                f"Gemini produced an unusable function call ({unusable}){detail}",
                provider=PROVIDER,
                finish_reason=unusable,
                finish_message=self.finish_message,
            )
            error.retryable = True  # sampling again usually yields a well-formed call
            raise error
        if self.block_reason is None and self.finish_reason is None:
            if streamed:
                raise ModelUnavailable(f"{PROVIDER}: the stream ended before a finish reason", provider=PROVIDER)
            if not self.parts:
                raise ModelOutputError(
                    f"{PROVIDER}: Gemini returned no candidate and no block reason", provider=PROVIDER
                )
        reason: ModelFinishReason = (
            "blocked" if self.block_reason is not None else _map_finish_reason(self.finish_reason)
        )
        return ModelResponse(Message("model", self.parts), reason, _map_usage(self.usage))


def _process_response(response: types.GenerateContentResponse) -> ModelResponse:
    collector = _Collector(None)
    collector.add(response)
    return collector.result(streamed=False)


async def _process_streamed_response(
    stream: AsyncIterator[types.GenerateContentResponse], on_chunk: ChunkSink
) -> ModelResponse:
    collector = _Collector(on_chunk)
    try:
        async for response in stream:
            collector.add(response)
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
    return collector.result(streamed=True)


def _map_finish_reason(reason: types.FinishReason | None) -> ModelFinishReason:
    if reason is None or reason == types.FinishReason.STOP:
        return "stop"
    if reason == types.FinishReason.MAX_TOKENS:
        return "length"
    if reason in _BLOCKED:
        return "blocked"
    return "other"


def _map_usage(usage: types.GenerateContentResponseUsageMetadata | None) -> Usage | None:
    if usage is None:
        return None
    output = None
    if usage.candidates_token_count is not None or usage.thoughts_token_count is not None:
        output = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
    return Usage(input_tokens=usage.prompt_token_count, output_tokens=output)


# -- errors -----------------------------------------------------------------------------------


@contextmanager
def _map_errors() -> Iterator[None]:
    """Translate the SDK's and its HTTP stack's exceptions into ``ModelError`` subclasses."""
    try:
        yield
    except genai_errors.APIError as exc:
        raise _status_error(exc) from exc
    except (genai_errors.UnknownApiResponseError, json.JSONDecodeError) as exc:
        # a 200 whose body is no JSON (a proxy's login page): as for every provider, not retried.
        # The SDK's message quotes the whole body; the body stays in ``__cause__``.
        raise ModelOutputError(f"{PROVIDER}: unreadable response: not JSON", provider=PROVIDER) from exc
    except pydantic.ValidationError as exc:
        raise ModelOutputError(f"{PROVIDER}: a reply the SDK could not read: {exc}", provider=PROVIDER) from exc
    except Exception as exc:  # google-genai lets its HTTP stack's errors through
        error = transport_error(PROVIDER, exc)
        if error is None:
            raise
        raise error from exc


def _status_error(exc: genai_errors.APIError) -> ModelError:
    refused_key = "API_KEY_INVALID" in _error_reasons(exc)
    return status_error(
        PROVIDER,
        exc.code,
        str(exc.message or exc.details),
        kind=ModelAuthError if refused_key else None,
        retry_after=_retry_after(exc),
        error_type=exc.status,
    )


def _error_details(exc: genai_errors.APIError) -> list[dict[str, Any]]:
    body = exc.details if isinstance(exc.details, dict) else {}
    error = body.get("error", body)
    found = error.get("details") if isinstance(error, dict) else None
    return [d for d in found if isinstance(d, dict)] if isinstance(found, list) else []


def _error_reasons(exc: genai_errors.APIError) -> set[str]:
    return {str(d["reason"]) for d in _error_details(exc) if "reason" in d}


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def _retry_after(exc: genai_errors.APIError) -> float | None:
    """Seconds to wait: the Retry-After header (seconds or a date), else ``RetryInfo.retryDelay``."""
    found = retry_after(getattr(exc.response, "headers", None))
    if found is not None:
        return found
    for detail in _error_details(exc):
        match = _DURATION.match(str(detail.get("retryDelay", "")))
        if match:
            return float(match[1])
    return None
