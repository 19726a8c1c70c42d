"""Anthropic's Messages API (``/v1/messages``) through the official ``anthropic`` SDK.

    from pausepoint.models.anthropic import Anthropic      # pip install 'pausepoint[anthropic]'
    ai = Pausepoint(plugins=[Anthropic()])                 # ANTHROPIC_API_KEY; model 'anthropic/<model>'

What maps to what:

- ``ModelRequest.system`` → the top-level ``system``; ``config['max_tokens']`` (or
  ``max_output_tokens``; default 1024, the API requires one), ``stop_sequences``,
  ``temperature``, ``top_p`` (checked as on every provider: ``_portable.SharedConfig``) and
  ``top_k`` → the request fields of those names (the last three as extra body fields: the
  SDK's ``create`` no longer lists them). Any other config key is sent
  in the body as given: the API refuses what it does not know (``ModelBadRequest``). A value JSON
  cannot carry is a ``ModelBadRequest`` before sending (``_http.refuse_unsendable``).
- ``user`` messages → ``user`` text and image blocks; ``model`` messages → ``assistant`` text
  and ``tool_use`` blocks (``id`` = the call's ``call_id or ref``); ``tool`` messages → a
  ``user`` message of ``tool_result`` blocks (``tool_use_id``, content as text, ``is_error``).
  An id the API would refuse (it takes ``^[a-zA-Z0-9_-]+$``; another provider's may be
  ``functions.lookup:0``) goes as ``toolu_`` and a hash of it, on the call and on its result;
  an id an earlier call of the request has goes as the call's ref (``_portable.CallIds``).
  Consecutive messages of one role are merged, as the API requires user/assistant to alternate
  (a tool-result message followed by a new user text becomes one user message).
- A tool input that is not a JSON object (a malformed argument string the model produced, kept
  raw so the runtime reports it as invalid input) is sent back as ``{"_raw_arguments": <text>}``:
  ``tool_use.input`` must be an object on this wire.
- ``ToolDefinition`` → ``{name, description, input_schema}``.
- Responses: ``text`` blocks → ``TextPart``; ``tool_use`` blocks → ``ToolRequestPart`` with the
  block ``id`` as ``call_id``; ``thinking`` and ``redacted_thinking`` blocks (extended thinking)
  are kept, unchanged, in the ``provider_metadata`` of the part after them and sent back before
  it, as the API requires of an assistant turn whose tool results follow; other block kinds
  (server tools) are dropped. Streams
  (``message_start``, ``content_block_start/delta/stop``, ``message_delta``, ``message_stop``,
  ``error``) report ``TextDelta`` and ``ToolCallDelta`` as they arrive.
- Stop reasons: ``end_turn``/``tool_use``/``stop_sequence`` → stop; ``max_tokens`` and
  ``model_context_window_exceeded`` → length; ``refusal`` → blocked; anything else → other.
- Usage: input tokens (including cache reads and writes) and output tokens.
- Errors (``_map_errors``): an error status maps as every provider's does
  (``pausepoint.models._http``: 401/403 auth, 429 rate limited with Retry-After, 408/504
  timeout, 409/5xx — 529 overloaded included — unavailable, other 4xx bad request); timeouts
  and failed connections → ``ModelTimeout`` / ``ModelUnavailable``; an unparseable response, or
  one of the wrong shape (every field is read through ``ReplyReader``) → ``ModelOutputError``.
  An ``error`` event inside a stream maps by its error type as the status of that type would;
  a 200 to a streamed request that is no event stream is a ``ModelOutputError``, not retried.
  The SDK's own retries are off: ``RetryPolicy`` retries, and a stream only until its first
  chunk has been reported.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pydantic

from .._extras import missing_extra
from ..content._messages import MediaPart, Message, Part, TextPart, ToolRequestPart, ToolResponsePart
from ..errors import ModelAuthError, ModelBadRequest, ModelError, ModelOutputError, ModelTimeout, ModelUnavailable
from ._clients import LoopClients
from ._http import (
    ReplyReader,
    error_kind,
    refuse_reserved,
    refuse_unsendable,
    retry_after,
    status_error,
    transport_error,
)
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
    import anthropic as sdk
    from anthropic.types import Message as SdkMessage
    from anthropic.types import RawMessageStreamEvent
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("anthropic", "anthropic") from exc

__all__ = ["Anthropic", "AnthropicModel"]

PROVIDER = "anthropic"
DEFAULT_MAX_TOKENS = 1024
#: keys of the request body the adapter sets; config may not override them
_RESERVED = frozenset({"model", "messages", "system", "tools", "stream"})
#: a tool input that is not a JSON object is sent back under this key
RAW_ARGUMENTS_KEY = "_raw_arguments"
#: the call ids the API takes (``tool_use.id``, ``tool_result.tool_use_id``)
_CALL_ID = re.compile(r"[a-zA-Z0-9_-]+")

_FINISH_REASONS: dict[str, ModelFinishReason] = {
    "end_turn": "stop",
    "tool_use": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "blocked",
}


class Anthropic:
    """Plugin serving ``anthropic/<model>`` names, e.g. ``anthropic/claude-sonnet-4-5``.

    ``api_key`` defaults to ``ANTHROPIC_API_KEY`` (without either, the SDK's own credential
    lookup applies: ``ANTHROPIC_AUTH_TOKEN``, profiles). ``timeout`` is seconds per request;
    ``retry`` governs retries of rate limits, server errors and timeouts. ``client`` reuses an
    existing ``anthropic.AsyncAnthropic`` (``api_key``, ``base_url`` and ``timeout`` then come from
    it). Either way the SDK's own retries are turned off and ``retry`` governs retries instead.
    Raises ``ModelAuthError`` if the SDK finds a credentials profile it cannot load.

    The SDK client is made one per event loop (see ``pausepoint.models``); ``aclose()`` closes them.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = 120.0,
        retry: RetryPolicy | None = None,
        client: sdk.AsyncAnthropic | None = None,
    ) -> None:
        self.prefix = PROVIDER
        self.retry = retry if retry is not None else RetryPolicy()
        self._api_key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
        self._base_url = base_url
        self._timeout = timeout
        given = client.with_options(max_retries=0) if client is not None else None
        self._clients = LoopClients(self._make_client, _close_client, given)
        self._clients.prepare()  # the SDK loads (and may fail to load) a credentials profile here

    def resolve_model(self, name: str) -> AnthropicModel | None:
        """The model for ``anthropic/<model>``; None for any other name."""
        head, sep, model_id = name.partition("/")
        if not sep or head != self.prefix or not model_id:
            return None
        return AnthropicModel(self, model_id)

    def client(self) -> sdk.AsyncAnthropic:
        """The SDK client for the running event loop. Raises ``ModelAuthError`` without credentials."""
        return _require_credentials(self._clients.get())

    async def aclose(self) -> None:
        """Close the connections of the clients this plugin made (a given client is the caller's)."""
        await self._clients.aclose()

    def _make_client(self) -> sdk.AsyncAnthropic:
        with _map_errors():  # the SDK may load (and fail to load) a credentials profile here
            return sdk.AsyncAnthropic(
                api_key=self._api_key, base_url=self._base_url, timeout=self._timeout, max_retries=0
            )


async def _close_client(client: sdk.AsyncAnthropic) -> None:
    await client.close()


def _require_credentials(client: sdk.AsyncAnthropic) -> sdk.AsyncAnthropic:
    if client.api_key is None and client.auth_token is None and client.credentials is None:
        raise ModelAuthError("no Anthropic API key: set ANTHROPIC_API_KEY or pass Anthropic(api_key=...)")
    return client


class AnthropicModel:
    """One model of an ``Anthropic`` plugin; ``name`` is ``anthropic/<model_id>``
    (``model_id`` is the API's, e.g. ``claude-sonnet-4-5``)."""

    def __init__(self, plugin: Anthropic, model_id: str) -> None:
        self.plugin = plugin
        self.model_id = model_id
        self.name = f"{plugin.prefix}/{model_id}"

    def prepare(self) -> None:
        """Check, before any call, what a call needs: raises ``ModelAuthError`` without an API key
        (a client is made; it opens no connection until used)."""
        _require_credentials(self.plugin._clients.prepare())

    async def generate(self, request: ModelRequest, on_chunk: ChunkSink | None = None) -> ModelResponse:
        """One Messages API call (streamed when ``on_chunk`` is given), retried per the policy.

        Raises a ``ModelError`` subclass (see the module docstring). A streamed call is retried
        only while no chunk has been reported; after that its failure is raised as is.
        """
        client = self.plugin.client()
        params = _request_params(self.model_id, request)

        async def complete() -> ModelResponse:
            with _map_errors():
                message = await client.messages.create(**params, stream=False)
            if not isinstance(message, SdkMessage):  # a body that is no JSON (an HTML login page)
                raise ModelOutputError(f"{PROVIDER}: unusable response: not a message", provider=PROVIDER)
            return _process_response(message)

        async def stream(sink: ChunkSink) -> ModelResponse:
            with _map_errors():
                events = await client.messages.create(**params, stream=True)
                async with events:
                    _read.require_event_stream(events.response.headers)
                    return await _process_streamed_response(events, sink)

        if on_chunk is None:
            return await call_with_retries(complete, self.plugin.retry)
        return await stream_with_retries(stream, on_chunk, self.plugin.retry)


# -- requests ------------------------------------------------------------------------------------


def _request_params(model: str, request: ModelRequest) -> dict[str, Any]:
    config = request.config
    refuse_reserved(config, _RESERVED)
    refuse_unsendable(config)
    shared = SharedConfig.read(config).named()
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": shared.pop("max_tokens", DEFAULT_MAX_TOKENS),
        "messages": _map_messages(request.messages),
    }
    if request.system:
        params["system"] = request.system
    if request.tools:
        params["tools"] = [_map_tool_definition(tool) for tool in request.tools]
    if "stop_sequences" in shared:
        params["stop_sequences"] = shared.pop("stop_sequences")
    # Sampling keys (temperature, top_p, top_k) and any key of Anthropic's own go in the body,
    # through ``extra_body``: the API decides what it takes.
    extra = {key: value for key, value in config.items() if key not in SHARED_KEYS and value is not None} | shared
    if extra:
        params["extra_body"] = extra
    return params


def _map_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Anthropic messages for pausepoint's: roles alternate, empty messages are left out."""
    ids = CallIds(messages, _wire_call_id)
    mapped: list[dict[str, Any]] = []
    for message in messages:
        role = "assistant" if message.role == "model" else "user"
        blocks: list[dict[str, Any]] = []
        for part in message.parts:
            if isinstance(part, TextPart | ToolRequestPart) and part.provider_metadata:
                blocks.extend(part.provider_metadata.get(_THINKING) or ())  # as they came, before the part
            block = _map_part(part, ids)
            if block is not None:
                blocks.append(block)
        if not blocks:
            continue
        if mapped and mapped[-1]["role"] == role:
            mapped[-1]["content"].extend(blocks)
        else:
            mapped.append({"role": role, "content": blocks})
    return mapped


def _map_part(part: Part, ids: CallIds) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        # the API refuses empty text blocks
        return {"type": "text", "text": part.text} if part.text else None
    if isinstance(part, MediaPart):
        return _map_media(part)
    if isinstance(part, ToolRequestPart):
        name = portable_tool_name(part.name)
        return {"type": "tool_use", "id": ids.sent_id(part), "name": name, "input": _tool_input(part.input)}
    assert isinstance(part, ToolResponsePart)
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": ids.sent_id(part),
        "content": part.output if isinstance(part.output, str) else json.dumps(part.output, default=str),
    }
    if part.is_error:
        block["is_error"] = True
    return block


def _wire_call_id(call_id: str) -> str:
    """``call_id`` as the API takes it (``^[a-zA-Z0-9_-]+$``): kept when it is so; else (an id
    another provider wrote, ``functions.lookup:0``) ``toolu_`` and a hash of it, the same for the
    call and its result, and another for every other id."""
    if _CALL_ID.fullmatch(call_id):
        return call_id
    return "toolu_" + hashlib.sha256(call_id.encode()).hexdigest()[:32]


def _map_media(part: MediaPart) -> dict[str, Any]:
    """An image block, or for a PDF a document block, from a URL or a base64 data URL; the type
    is the part's ``content_type``, else the data URL's own. Anything else the API takes no block
    for: ``ModelBadRequest`` before the request is sent."""
    data_url = part.url.startswith("data:")
    header, _, data = part.url[len("data:") :].partition(",") if data_url else ("", "", "")
    media_type = part.content_type or header.split(";", 1)[0] or None
    if media_type is not None and media_type != "application/pdf" and not media_type.startswith("image/"):
        raise ModelBadRequest(
            f"{PROVIDER}: a {media_type} part cannot be sent (images and PDFs only)", provider=PROVIDER
        )
    kind = "document" if media_type == "application/pdf" else "image"
    if data_url:
        if not header.endswith(";base64"):
            raise ModelBadRequest(f"{PROVIDER}: a data URL must be base64 to be sent", provider=PROVIDER)
        source = {"type": "base64", "media_type": media_type or "application/octet-stream", "data": data}
        return {"type": kind, "source": source}
    return {"type": kind, "source": {"type": "url", "url": part.url}}


def _tool_input(value: Any) -> dict[str, Any]:
    """``tool_use.input`` must be an object: other values (raw, malformed arguments) are wrapped."""
    if isinstance(value, dict):
        return value
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return {RAW_ARGUMENTS_KEY: value}
        return parsed if isinstance(parsed, dict) else {RAW_ARGUMENTS_KEY: value}
    return {RAW_ARGUMENTS_KEY: json.dumps(value, default=str)}


def _map_tool_definition(tool: ToolDefinition) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}


# -- responses -----------------------------------------------------------------------------------


# Where a part keeps the thinking blocks that came before it (``provider_metadata``).
_THINKING = "anthropic_thinking"

# Reads every field of a reply and of stream events: the SDK builds them from any JSON, so a body
# of the wrong shape is a ``ModelOutputError`` naming the field, never an error of the adapter's own.
_read = ReplyReader(PROVIDER)


def _kept(thinking: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The ``provider_metadata`` of the part after ``thinking`` (None when there was none)."""
    return {_THINKING: list(thinking)} if thinking else None


@dataclass(slots=True)
class _Block:
    """A content block of a reply, or one being assembled from stream events."""

    kind: str
    text: str = ""
    call_id: str | None = None
    name: str = ""
    tool_index: int = 0
    start_input: Any = None  # a tool_use block's ``input`` (None: none given)
    arguments: list[str] = field(default_factory=list)
    signature: str = ""  # a thinking block's
    data: str = ""  # a redacted thinking block's

    def thinking(self) -> dict[str, Any] | None:
        """The thinking block this is, as the API must get it back (None: no thinking block)."""
        if self.kind == "thinking":
            return {"type": "thinking", "thinking": self.text, "signature": self.signature}
        if self.kind == "redacted_thinking":
            return {"type": "redacted_thinking", "data": self.data}
        return None

    def part(self, thinking: list[dict[str, Any]]) -> Part | None:
        if self.kind == "text":
            return TextPart(self.text, provider_metadata=_kept(thinking)) if self.text else None
        if self.kind == "tool_use":
            return ToolRequestPart(
                self.name,
                _parse_arguments("".join(self.arguments), self.start_input),
                call_id=self.call_id,
                provider_metadata=_kept(thinking),
            )
        return None


def _read_block(value: object, where: str) -> _Block:
    """A content block of a reply (or of a stream's ``content_block_start``), every field checked.
    A kind the adapter does not read (server tools) is kept as a kind alone, to be dropped."""
    block = _read.instance(value, pydantic.BaseModel, where)
    kind = _read.instance(getattr(block, "type", None), str, f"{where}.type")

    def text(name: str) -> str:
        return _read.text(getattr(block, name, None), f"{where}.{name}")

    if kind in ("text", "thinking"):
        return _Block(kind, text=text(kind), signature=text("signature") if kind == "thinking" else "")
    if kind == "redacted_thinking":
        return _Block(kind, data=text("data"))
    if kind == "tool_use":
        # ``input`` is the model's, of any JSON type: the runtime checks it against the tool's schema
        call_id = _read.optional_text(getattr(block, "id", None), f"{where}.id")
        return _Block(kind, call_id=call_id, name=text("name"), start_input=getattr(block, "input", None))
    return _Block(kind)


def _process_response(message: SdkMessage) -> ModelResponse:
    """A whole (non-streamed) reply as a ``ModelResponse``; raises ``ModelOutputError`` for a
    body that is no message (see ``_read``)."""
    content = _read.items(message.content, "content", required=True)
    blocks = [_read_block(block, f"content[{i}]") for i, block in enumerate(content)]
    return _response(blocks, _read.optional_text(message.stop_reason, "stop_reason"), _counts(message.usage))


def _response(blocks: Sequence[_Block], stop_reason: str | None, counts: Sequence[int | None]) -> ModelResponse:
    """The reply of ``blocks`` (in order): thinking blocks go with the part after them."""
    parts: list[Part] = []
    thinking: list[dict[str, Any]] = []  # the thinking blocks since the last part
    for block in blocks:
        kept = block.thinking()
        if kept is not None:
            thinking.append(kept)
        elif (part := block.part(thinking)) is not None:
            parts.append(part)
            thinking = []
    input_tokens, cache_writes, cache_reads, output_tokens = counts
    return ModelResponse(
        Message("model", parts),
        _map_finish_reason(stop_reason),
        _map_usage(input_tokens, cache_writes, cache_reads, output_tokens),
    )


class _StreamedMessage:
    """A message assembled from a raw event stream, reporting deltas as they arrive; every event
    is read through ``_read``, as whole replies are."""

    def __init__(self, on_chunk: ChunkSink) -> None:
        self.on_chunk = on_chunk
        self.blocks: dict[int, _Block] = {}
        self.tool_calls = 0
        self.stop_reason: str | None = None
        self.counts: list[int | None] = [None, None, None, None]  # input, cache writes, cache reads, output
        self.stopped = False
        self.events = 0

    def add(self, event: RawMessageStreamEvent) -> None:
        self.events += 1
        if event.type == "message_start":
            self.counts = list(_counts(getattr(event.message, "usage", None)))
        elif event.type == "content_block_start":
            self._start(_read.instance(event.index, int, "index"), _read_block(event.content_block, "content_block"))
        elif event.type == "content_block_delta":
            self._add_delta(_read.instance(event.index, int, "index"), event.delta)
        elif event.type == "message_delta":
            stop_reason = _read.optional_text(getattr(event.delta, "stop_reason", None), "delta.stop_reason")
            self.stop_reason = stop_reason or self.stop_reason
            # message_delta counts are cumulative; they supersede message_start's
            for i, value in enumerate(_counts(event.usage)):
                if value is not None:
                    self.counts[i] = value
        elif event.type == "message_stop":
            self.stopped = True

    def _start(self, index: int, block: _Block) -> None:
        self.blocks[index] = block
        if block.kind == "text" and block.text:
            self.on_chunk(TextDelta(block.text))
        elif block.kind == "tool_use":
            block.tool_index = self.tool_calls
            self.tool_calls += 1
            self.on_chunk(ToolCallDelta(block.tool_index, block.name, block.call_id, ""))

    def _add_delta(self, index: int, delta: object) -> None:
        block = self.blocks.get(index) or _Block("unknown")
        kind = _read.optional_text(getattr(delta, "type", None), "delta.type")

        def text(name: str) -> str:
            return _read.text(getattr(delta, name, None), f"delta.{name}")

        if kind == "text_delta" and block.kind == "text":
            piece = text("text")
            block.text += piece
            self.on_chunk(TextDelta(piece))
        elif kind == "thinking_delta" and block.kind == "thinking":
            block.text += text("thinking")
        elif kind == "signature_delta" and block.kind == "thinking":
            block.signature += text("signature")
        elif kind == "input_json_delta" and block.kind == "tool_use":
            piece = text("partial_json")
            block.arguments.append(piece)
            if piece:
                self.on_chunk(ToolCallDelta(block.tool_index, None, None, piece))

    def result(self) -> ModelResponse:
        """The whole message. Raises ``ModelOutputError`` for a stream without a single event (a body
        that is no event stream), ``ModelUnavailable`` for one that ended before ``message_stop``."""
        if not self.events:
            raise _read.no_event_stream()
        if not self.stopped:
            raise ModelUnavailable(f"{PROVIDER}: the stream ended before message_stop", provider=PROVIDER)
        return _response([block for _, block in sorted(self.blocks.items())], self.stop_reason, self.counts)


async def _process_streamed_response(
    stream: AsyncIterator[RawMessageStreamEvent], on_chunk: ChunkSink
) -> ModelResponse:
    """Assemble the message from a raw event stream (``_StreamedMessage``)."""
    message = _StreamedMessage(on_chunk)
    async for event in stream:
        message.add(event)
    return message.result()


def _parse_arguments(text: str, start_input: Any) -> Any:
    """A call's input: its streamed arguments, else the block's own ``input`` (none: empty);
    invalid JSON is kept as the raw string (``ReplyReader.arguments``)."""
    if not text.strip() and start_input is not None:
        return start_input
    return ReplyReader.arguments(text)


def _counts(usage: object) -> tuple[int | None, int | None, int | None, int | None]:
    """Input tokens, cache writes, cache reads and output tokens of a reply's ``usage``; None for
    each one it lacks (a gateway may strip ``usage`` altogether)."""
    names = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
    found = [_read.count(getattr(usage, name, None)) for name in names]
    return found[0], found[1], found[2], found[3]


def _map_usage(
    input_tokens: int | None, cache_writes: int | None, cache_reads: int | None, output_tokens: int | None
) -> Usage:
    """Input tokens include cache writes and reads (the API counts them apart)."""
    counted = [n for n in (input_tokens, cache_writes, cache_reads) if n is not None]
    return Usage(input_tokens=sum(counted) if counted else None, output_tokens=output_tokens)


def _map_finish_reason(stop_reason: str | None) -> ModelFinishReason:
    return _FINISH_REASONS.get(stop_reason or "", "other")


# -- errors --------------------------------------------------------------------------------------

#: the status each error type of the body (``error.type``) stands for: ``error`` events inside a
#: 200 stream carry only the type
_ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


@contextmanager
def _map_errors() -> Iterator[None]:
    """Translate the SDK's (and its HTTP client's) exceptions into ``ModelError`` subclasses."""
    try:
        yield
    except sdk.APIStatusError as exc:
        raise _status_error(exc) from exc
    except sdk.APITimeoutError as exc:
        raise ModelTimeout(f"{PROVIDER}: no answer in time", provider=PROVIDER) from exc
    except sdk.APIConnectionError as exc:
        raise ModelUnavailable(f"{PROVIDER}: the connection failed: {exc.message}", provider=PROVIDER) from exc
    except sdk.APIResponseValidationError as exc:
        raise ModelOutputError(f"{PROVIDER}: unusable response: {exc.message}", provider=PROVIDER) from exc
    except sdk.CredentialsError as exc:
        raise ModelAuthError(f"{PROVIDER}: credentials could not be loaded: {exc}", provider=PROVIDER) from exc
    except sdk.AnthropicError as exc:
        raise ModelError(f"{PROVIDER}: the call failed: {exc}", provider=PROVIDER) from exc
    except json.JSONDecodeError as exc:  # a 200 whose body is no JSON
        raise ModelOutputError(f"{PROVIDER}: unusable response: {exc}", provider=PROVIDER) from exc
    except Exception as exc:  # while reading a stream, the SDK lets its HTTP client's errors through
        error = transport_error(PROVIDER, exc)
        if error is None:
            raise
        raise error from exc


def _status_error(exc: sdk.APIStatusError) -> ModelError:
    detail = exc.api_message or exc.message
    info: dict[str, Any] = {"error_type": exc.type, "request_id": exc.request_id}
    if exc.status_code < 400:  # an ``error`` event in a stream whose response status was 200
        status = _ERROR_TYPE_STATUS.get(exc.type or "")
        kind = error_kind(status) if status is not None else ModelUnavailable  # a failure the stream reported
        where = f"{exc.type} in the stream"
        return status_error(PROVIDER, exc.status_code, detail, kind=kind, where=where, **info)
    return status_error(PROVIDER, exc.status_code, detail, retry_after=retry_after(exc.response.headers), **info)
