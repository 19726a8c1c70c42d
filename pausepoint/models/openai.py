"""OpenAI and every OpenAI-compatible server, through the official ``openai`` SDK (Chat Completions).

    from pausepoint.models.openai import OpenAI              # pip install 'pausepoint[openai]'

    ai = Pausepoint(plugins=[OpenAI()])                       # openai/<model>, key from OPENAI_API_KEY
    ai = Pausepoint(plugins=[OpenAI.ollama()])                # ollama/<model> on http://localhost:11434/v1
    ai = Pausepoint(plugins=[OpenAI.compatible("vllm", "http://localhost:8000/v1")])   # vllm/<model>

What is mapped, both ways, on ``POST /chat/completions``:

- the system prompt → a leading ``system`` message; user text and media → ``user`` messages (media
  as ``image_url`` parts, other ``data:`` URLs as ``file`` parts);
- model messages → ``assistant`` messages with ``tool_calls`` (``function.arguments`` as a JSON
  string; a malformed string the model sent earlier goes back verbatim);
- tool messages → one ``tool`` message per result, ``tool_call_id`` = the provider's call id (or the
  runtime ref when the call came from elsewhere, or an earlier call has that id: ``CallIds``);
  error results are marked ``Error:`` in the text, as the API has no error flag;
- tool definitions → ``{"type": "function", "function": {name, description, parameters}}``;
- responses, JSON or SSE (``stream: true`` with ``stream_options.include_usage``) → text (content
  as a string, or as a list of parts whose text parts are read), tool requests (parallel calls
  kept in order; malformed argument strings kept as the raw string, for the runtime to report back
  as invalid input; arguments sent as an object, whole or in a stream, read as its JSON), usage,
  and the finish reason: ``stop`` and ``tool_calls`` → stop, ``length`` → length,
  ``content_filter`` or a refusal → blocked. Every field is read through ``ReplyReader``: a 200
  of the wrong shape is a ``ModelOutputError`` naming the field;
- ``ModelRequest.config``: ``temperature``, ``top_p``, ``seed`` as they are; ``max_output_tokens``
  (or ``max_tokens``) → ``max_completion_tokens`` (``max_tokens`` on compatible servers);
  ``stop_sequences`` → ``stop`` (the shared keys checked as on every provider:
  ``_portable.SharedConfig``); ``top_k`` only to compatible servers (OpenAI rejects it); any
  other key is sent in the request body unchanged (e.g. ``reasoning_effort``); a value JSON cannot
  carry is a ``ModelBadRequest`` before sending (``_http.refuse_unsendable``);
- SDK errors → ``pausepoint.errors`` in ``_map_errors``; retries follow the plugin's ``RetryPolicy``
  (the SDK's own retries are turned off so that there is one policy). A stream is retried only
  while nothing of it has been reported; a 200 to it that is no event stream is a
  ``ModelOutputError`` (``ReplyReader.require_event_stream``), not retried.
"""

from __future__ import annotations

import json
import mimetypes
import os
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pydantic_core

from .._extras import missing_extra
from ..content._messages import MediaPart, Message, Part, TextPart, ToolRequestPart, ToolResponsePart
from ..errors import ModelAuthError, ModelBadRequest, ModelError, ModelOutputError, ModelTimeout, ModelUnavailable
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
    tool_output_text,
)
from ._portable import SHARED_KEYS, CallIds, SharedConfig, portable_tool_name
from ._retry import RetryPolicy, call_with_retries, stream_with_retries

try:
    import openai
    from openai import AsyncOpenAI, not_given, omit
    from openai.types import CompletionUsage
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionAssistantMessageParam,
        ChatCompletionChunk,
        ChatCompletionContentPartParam,
        ChatCompletionFunctionToolParam,
        ChatCompletionMessage,
        ChatCompletionMessageCustomToolCall,
        ChatCompletionMessageFunctionToolCall,
        ChatCompletionMessageFunctionToolCallParam,
        ChatCompletionMessageParam,
        ChatCompletionUserMessageParam,
    )
    from openai.types.chat.chat_completion import Choice
    from openai.types.chat.chat_completion_chunk import Choice as ChunkChoice
    from openai.types.chat.chat_completion_chunk import ChoiceDelta, ChoiceDeltaToolCall, ChoiceDeltaToolCallFunction
    from openai.types.chat.chat_completion_message_function_tool_call import Function
    from openai.types.shared_params import FunctionDefinition
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise missing_extra("openai", "openai") from exc

__all__ = ["OLLAMA_BASE_URL", "OpenAI", "OpenAIModel"]

OLLAMA_BASE_URL = "http://localhost:11434/v1"

# Compatible servers take any key (or one they were started with); never send OPENAI_API_KEY there.
_NO_KEY = "no-key"

# Keys of the request body that the adapter owns; config may not override them.
_RESERVED = frozenset({"model", "messages", "tools", "stream", "stream_options"})


class OpenAI:
    """A plugin serving ``<prefix>/<model>`` (``openai/gpt-4o-mini`` by default) over Chat Completions.

    ``api_key`` falls back to ``OPENAI_API_KEY`` (and ``base_url`` to ``OPENAI_BASE_URL``, then
    OpenAI's API). ``timeout`` is seconds per request (``None``: the SDK's default, 10 minutes).
    ``client`` is an existing ``openai.AsyncOpenAI`` to use instead (its own retries are turned off).
    ``stream_usage`` asks for token usage at the end of streams; turn it off for a server that
    rejects ``stream_options``. A missing key is reported as ``ModelAuthError`` on the first call.

    The SDK client is made on first use, one per event loop, since its connections belong to the
    loop that opened them.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
        client: AsyncOpenAI | None = None,
        prefix: str = "openai",
        default_headers: Mapping[str, str] | None = None,
        stream_usage: bool = True,
    ) -> None:
        self.prefix = prefix
        self.retry = retry if retry is not None else RetryPolicy()
        self.stream_usage = stream_usage
        # What differs on compatible servers (set by ``compatible()``): the name of the output
        # limit, and config keys OpenAI rejects that other servers take (``top_k``).
        self.output_limit_field = "max_completion_tokens"
        self.unsupported_config: frozenset[str] = frozenset({"top_k"})
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._base_url = base_url
        self._timeout = timeout
        self._headers = dict(default_headers or {})
        given = client.with_options(max_retries=0) if client is not None else None
        self._clients = LoopClients(self._make_client, _close_client, given)

    @classmethod
    def compatible(
        cls,
        prefix: str,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
        default_headers: Mapping[str, str] | None = None,
        stream_usage: bool = True,
    ) -> OpenAI:
        """A plugin for an OpenAI-compatible server (vLLM, llama.cpp server, LM Studio, …) serving
        ``<prefix>/<model>`` at ``base_url`` (ending in ``/v1``). ``api_key`` only if the server
        wants one; ``OPENAI_API_KEY`` is never sent to it. ``max_output_tokens`` is sent as
        ``max_tokens``, which these servers understand."""
        plugin = cls(
            api_key=api_key if api_key is not None else _NO_KEY,
            base_url=base_url,
            timeout=timeout,
            retry=retry,
            prefix=prefix,
            default_headers=default_headers,
            stream_usage=stream_usage,
        )
        plugin.output_limit_field = "max_tokens"
        plugin.unsupported_config = frozenset()
        return plugin

    @classmethod
    def ollama(
        cls, base_url: str = OLLAMA_BASE_URL, *, timeout: float | None = None, retry: RetryPolicy | None = None
    ) -> OpenAI:
        """``ollama/<model>`` (e.g. ``ollama/llama3.2``) on a local Ollama server; no key needed."""
        return cls.compatible("ollama", base_url, timeout=timeout, retry=retry)

    def resolve_model(self, name: str) -> OpenAIModel | None:
        """``<prefix>/<model>`` → that model; any other name → None."""
        head, sep, model_id = name.partition("/")
        if not sep or head != self.prefix or not model_id:
            return None
        return OpenAIModel(self, model_id)

    def client(self) -> AsyncOpenAI:
        """The SDK client for the running event loop (see ``pausepoint.models``: one per loop).

        Raises ``ModelAuthError`` without a key.
        """
        return self._clients.get()

    async def aclose(self) -> None:
        """Close the connections of the clients this plugin made (a given client is the caller's)."""
        await self._clients.aclose()

    def _make_client(self) -> AsyncOpenAI:
        if not self._api_key:
            raise ModelAuthError(f"{self.prefix}: no API key: pass OpenAI(api_key=...) or set OPENAI_API_KEY")
        return AsyncOpenAI(
            api_key=self._api_key,
            base_url=self._base_url,
            timeout=self._timeout if self._timeout is not None else not_given,
            max_retries=0,
            default_headers=self._headers or None,
        )


async def _close_client(client: AsyncOpenAI) -> None:
    await client.close()


class OpenAIModel:
    """One model of an ``OpenAI`` plugin; ``name`` is ``<prefix>/<model>``."""

    def __init__(self, plugin: OpenAI, model_id: str) -> None:
        self.plugin = plugin
        self.model_id = model_id
        self.name = f"{plugin.prefix}/{model_id}"

    def prepare(self) -> None:
        """Check, before any call, what a call needs: raises ``ModelAuthError`` without an API key
        (a client is made; it opens no connection until used)."""
        self.plugin._clients.prepare()

    async def generate(self, request: ModelRequest, on_chunk: ChunkSink | None = None) -> ModelResponse:
        """One Chat Completions call, streamed when ``on_chunk`` is given, retried as the plugin's
        ``RetryPolicy`` allows (a stream only until its first chunk was reported).

        Raises ``ModelError`` subclasses (see ``_map_errors``); ``ModelBadRequest`` before sending
        when the request holds what the API cannot take.
        """
        messages = _map_system(request.system) + _map_messages(request.messages)
        tools = [_map_tool_definition(tool) for tool in request.tools]
        body = _map_config(request.config, self.plugin.output_limit_field, self.plugin.unsupported_config)
        label = self.plugin.prefix

        async def complete() -> ModelResponse:
            with _map_errors(label):
                completion = await self.plugin.client().chat.completions.create(
                    model=self.model_id, messages=messages, tools=tools or omit, extra_body=body
                )
            if not isinstance(completion, ChatCompletion):  # a body that is no JSON (an HTML login page)
                raise ModelOutputError(f"{label}: unreadable response: not a chat completion", provider=label)
            return _process_response(completion, label)

        async def stream(sink: ChunkSink) -> ModelResponse:
            with _map_errors(label):
                events = await self.plugin.client().chat.completions.create(
                    model=self.model_id,
                    messages=messages,
                    tools=tools or omit,
                    stream=True,
                    stream_options={"include_usage": True} if self.plugin.stream_usage else omit,
                    extra_body=body,
                )
                async with events:
                    ReplyReader(label).require_event_stream(events.response.headers)
                    return await _process_streamed_response(events, sink, label)

        if on_chunk is None:
            return await call_with_retries(complete, self.plugin.retry)
        return await stream_with_retries(stream, on_chunk, self.plugin.retry)


# -- requests -------------------------------------------------------------------------------------


def _map_system(system: str | None) -> list[ChatCompletionMessageParam]:
    """The system prompt as the leading message (none without one)."""
    return [{"role": "system", "content": system}] if system else []


def _map_messages(messages: Sequence[Message]) -> list[ChatCompletionMessageParam]:
    """The conversation as Chat Completions messages, each call id used once (``CallIds``)."""
    ids = CallIds(messages)
    out: list[ChatCompletionMessageParam] = []
    for message in messages:
        if message.role == "user":
            out.append(_user_message(message.parts))
        elif message.role == "model":
            out.append(_assistant_message(message, ids))
        else:
            for part in message.tool_responses:
                out.append(
                    {"role": "tool", "tool_call_id": ids.sent_id(part), "content": tool_output_text(part, _json)}
                )
            others = [p for p in message.parts if not isinstance(p, ToolResponsePart)]
            if others:
                out.append(_user_message(others))
    return out


def _user_message(parts: Sequence[Part]) -> ChatCompletionUserMessageParam:
    """Plain text stays a string (what every compatible server accepts); media makes a part list."""
    if all(isinstance(p, TextPart) for p in parts):
        return {"role": "user", "content": "".join(p.text for p in parts if isinstance(p, TextPart))}
    content: list[ChatCompletionContentPartParam] = []
    for part in parts:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, MediaPart):
            content.append(_media(part))
    return {"role": "user", "content": content}


def _media(part: MediaPart) -> ChatCompletionContentPartParam:
    content_type = part.content_type or (part.url[5:].split(";", 1)[0] if part.url.startswith("data:") else None)
    if content_type is None or content_type.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": part.url}}
    if part.url.startswith("data:"):
        filename = "attachment" + (mimetypes.guess_extension(content_type) or "")
        return {"type": "file", "file": {"file_data": part.url, "filename": filename}}
    raise ModelBadRequest(
        f"Chat Completions takes images by URL, other media only inline as data: URLs (got {content_type})",
        url=part.url,
    )


def _assistant_message(message: Message, ids: CallIds) -> ChatCompletionAssistantMessageParam:
    calls: list[ChatCompletionMessageFunctionToolCallParam] = [
        {
            "id": ids.sent_id(part),
            "type": "function",
            "function": {"name": portable_tool_name(part.name), "arguments": _arguments(part.input)},
        }
        for part in message.tool_requests
    ]
    if not calls:  # even an empty answer (e.g. a filtered one) needs content
        return {"role": "assistant", "content": message.text}
    return {"role": "assistant", "content": message.text or None, "tool_calls": calls}


def _arguments(value: Any) -> str:
    """Tool input as the arguments string: a string input is the model's own malformed text, resent as it was."""
    return value if isinstance(value, str) else _json(value)


def _json(value: Any) -> str:
    return pydantic_core.to_json(value, fallback=str).decode()


def _map_tool_definition(tool: ToolDefinition) -> ChatCompletionFunctionToolParam:
    function: FunctionDefinition = {"name": tool.name, "parameters": tool.input_schema}
    if tool.description:
        function["description"] = tool.description
    return {"type": "function", "function": function}


def _map_config(config: Mapping[str, Any], output_limit_field: str, unsupported: frozenset[str]) -> dict[str, Any]:
    """The request's config as extra request-body fields (see the module docstring).

    The keys agents share are checked and translated as on every provider (``SharedConfig``), so
    an agent runs unchanged on any; ``unsupported`` ones are left out; the rest go as given.
    """
    refuse_reserved(config, _RESERVED)
    refuse_unsendable(config)
    shared = SharedConfig.read(config)
    given = {key: value for key, value in config.items() if value is not None and key not in SHARED_KEYS}
    return {key: value for key, value in given.items() if key not in unsupported} | shared.named(
        max_tokens=output_limit_field, stop_sequences="stop"
    )


# -- responses ------------------------------------------------------------------------------------


def _process_response(completion: ChatCompletion, provider: str) -> ModelResponse:
    """A complete (non-streamed) completion as a ``ModelResponse``.

    Every field is read through ``ReplyReader``: a body of the wrong shape is a
    ``ModelOutputError`` naming the field, never an exception of the adapter's own.
    """
    read = ReplyReader(provider)
    choices = read.items(completion.choices, "choices", required=True)
    if not choices:
        raise ModelOutputError(f"{provider}: the completion has no choices", provider=provider)
    choice = read.instance(choices[0], Choice, "choices[0]")
    message = read.instance(choice.message, ChatCompletionMessage, "choices[0].message")
    refusal = read.text(message.refusal, "choices[0].message.refusal")
    parts: list[Part] = []
    text = _content_text(read, message.content, "choices[0].message.content") + refusal
    if text:
        parts.append(TextPart(text))
    for i, call in enumerate(read.items(message.tool_calls, "choices[0].message.tool_calls")):
        parts += _tool_call(read, call, f"choices[0].message.tool_calls[{i}]")
    finish = read.optional_text(choice.finish_reason, "choices[0].finish_reason")
    reason = "blocked" if refusal else _map_finish_reason(finish)
    return ModelResponse(Message("model", parts), reason, _map_usage(read, completion.usage))


def _content_text(read: ReplyReader, content: object, field: str) -> str:
    """A message's (or a delta's) content: a string, or, as some compatible servers send it, a
    list of content parts, whose ``text`` parts are read (others, e.g. a reasoning model's
    thinking, are not part of the answer)."""
    if not isinstance(content, list):
        return read.text(content, field)
    texts: list[str] = []
    for i, part in enumerate(content):
        piece = read.mapping(part, f"{field}[{i}]")
        if piece.get("type") == "text":
            texts.append(read.text(piece.get("text"), f"{field}[{i}].text"))
    return "".join(texts)


def _tool_call(read: ReplyReader, call: object, field: str) -> list[ToolRequestPart]:
    """A function call of the reply as a tool request; a call of another kind (a custom tool's) is none."""
    if isinstance(call, ChatCompletionMessageCustomToolCall):
        return []
    call = read.instance(call, ChatCompletionMessageFunctionToolCall, field)
    function = read.instance(call.function, Function, f"{field}.function")
    name = read.text(function.name, f"{field}.function.name")
    arguments = _arguments_read(read, function.arguments, f"{field}.function.arguments")
    return [_tool_request(name, arguments, read.optional_text(call.id, f"{field}.id"))]


def _arguments_read(read: ReplyReader, value: object, field: str) -> str | dict[str, Any]:
    """A call's arguments: the JSON string the API sends, or an object (a few compatible servers)."""
    return value if isinstance(value, dict) else read.text(value, field)


def _arguments_text(read: ReplyReader, value: object, field: str) -> str:
    """A streamed call's arguments as text: a piece of the JSON string, or the JSON text of an
    object a compatible server sent whole."""
    arguments = _arguments_read(read, value, field)
    return arguments if isinstance(arguments, str) else _json(arguments)


@dataclass(slots=True)
class _StreamedCall:
    call_id: str | None = None
    name: str = ""
    arguments: str = ""


class _StreamedReply:
    """A reply assembled from stream chunks, reporting text and tool-call deltas as they come.

    Calls are numbered in order of appearance. A delta whose ``index`` is already taken by a call
    with another id starts a new call (some compatible servers give every call index 0). Chunks
    are read through ``ReplyReader``, as whole replies are.
    """

    def __init__(self, on_chunk: ChunkSink, provider: str) -> None:
        self.on_chunk = on_chunk
        self.provider = provider
        self.read = ReplyReader(provider)
        self.text: list[str] = []
        self.refused = False
        self.calls: list[_StreamedCall] = []
        self.slots: dict[int | None, int] = {}
        self.finish: str | None = None
        self.usage: object = None
        self.chunks = 0

    def add(self, chunk: ChatCompletionChunk) -> None:
        read = self.read
        self.chunks += 1
        if chunk.usage is not None:
            self.usage = chunk.usage
        for i, item in enumerate(read.items(chunk.choices, "choices")):
            choice = read.instance(item, ChunkChoice, f"choices[{i}]")
            if choice.index != 0:
                continue
            self.finish = read.optional_text(choice.finish_reason, "finish_reason") or self.finish
            # some compatible servers send ``"delta": null`` in a chunk that only finishes
            delta = read.optional_instance(choice.delta, ChoiceDelta, "delta")
            if delta is not None:
                self._add_delta(delta)

    def _add_delta(self, delta: ChoiceDelta) -> None:
        content = _content_text(self.read, delta.content, "delta.content")
        for piece, is_refusal in ((content, False), (self.read.text(delta.refusal, "delta.refusal"), True)):
            if piece:
                self.refused = self.refused or is_refusal
                self.text.append(piece)
                self.on_chunk(TextDelta(piece))
        for i, item in enumerate(self.read.items(delta.tool_calls, "delta.tool_calls")):
            self._add_call_delta(self.read.instance(item, ChoiceDeltaToolCall, f"delta.tool_calls[{i}]"))

    def _add_call_delta(self, delta: ChoiceDeltaToolCall) -> None:
        read = self.read
        index = read.optional_instance(delta.index, int, "delta.tool_calls.index")
        delta_id = read.optional_text(delta.id, "delta.tool_calls.id")
        function = read.optional_instance(delta.function, ChoiceDeltaToolCallFunction, "delta.tool_calls.function")
        slot = self.slots.get(index)
        known = None if slot is None else self.calls[slot].call_id
        if slot is None or (delta_id and known and delta_id != known):
            slot = self.slots[index] = len(self.calls)
            self.calls.append(_StreamedCall())
        call = self.calls[slot]
        given_name = read.optional_text(function.name, "delta.tool_calls.function.name") if function else None
        name = given_name if not call.name else None
        arguments = _arguments_text(read, function.arguments, "delta.tool_calls.function.arguments") if function else ""
        new_id = delta_id if delta_id and not call.call_id else None
        call.call_id = call.call_id or delta_id
        call.name = call.name or name or ""
        call.arguments += arguments
        if name or arguments or new_id:
            self.on_chunk(ToolCallDelta(slot, name=name, call_id=new_id, arguments_delta=arguments))

    def result(self) -> ModelResponse:
        """The whole reply. Raises ``ModelOutputError`` for a stream without a single chunk (a body
        that is no event stream), ``ModelUnavailable`` for one that ended without a finish reason."""
        if not self.chunks:
            raise self.read.no_event_stream()
        if self.finish is None:
            # cut short (retried when nothing of it was reported yet, as any stream that fails)
            what = "before the model finished its answer" if self.text or self.calls else "without an answer"
            raise ModelUnavailable(f"{self.provider}: the stream ended {what}", provider=self.provider)
        parts: list[Part] = [TextPart("".join(self.text))] if self.text else []
        parts += [_tool_request(call.name, call.arguments, call.call_id) for call in self.calls]
        reason = "blocked" if self.refused else _map_finish_reason(self.finish)
        return ModelResponse(Message("model", parts), reason, _map_usage(self.read, self.usage))


async def _process_streamed_response(
    chunks: AsyncIterator[ChatCompletionChunk], on_chunk: ChunkSink, provider: str
) -> ModelResponse:
    """Read a stream to its end, reporting text and tool-call deltas as they come (``_StreamedReply``)."""
    reply = _StreamedReply(on_chunk, provider)
    async for chunk in chunks:
        reply.add(chunk)
    return reply.result()


def _tool_request(name: str, arguments: str | dict[str, Any], call_id: str | None) -> ToolRequestPart:
    """A tool request; arguments that are not valid JSON stay the raw string (``ReplyReader.arguments``)."""
    value = arguments if isinstance(arguments, dict) else ReplyReader.arguments(arguments)
    return ToolRequestPart(name, value, call_id=call_id)


def _map_usage(read: ReplyReader, usage: object) -> Usage | None:
    found = read.optional_instance(usage, CompletionUsage, "usage")
    if found is None:
        return None
    return Usage(input_tokens=read.count(found.prompt_tokens), output_tokens=read.count(found.completion_tokens))


def _map_finish_reason(reason: str | None) -> ModelFinishReason:
    if reason in ("stop", "tool_calls", "function_call"):
        return "stop"
    if reason == "length":
        return "length"
    if reason == "content_filter":
        return "blocked"
    return "other"


# -- errors ---------------------------------------------------------------------------------------


@contextmanager
def _map_errors(provider: str) -> Iterator[None]:
    """Translate the SDK's exceptions into ``pausepoint.errors``, chained ``from`` the original.

    An error status maps as every provider's does (``pausepoint.models._http``; an exhausted
    quota is a 429 that is not retried); timeouts → ModelTimeout; no connection →
    ModelUnavailable; an error event inside a stream → ModelUnavailable; an unreadable body →
    ModelOutputError.
    """
    try:
        yield
    except openai.APITimeoutError as exc:
        raise ModelTimeout(f"{provider}: no answer in time", provider=provider) from exc
    except openai.APIConnectionError as exc:
        raise ModelUnavailable(f"{provider}: {exc.message}", provider=provider) from exc
    except openai.APIStatusError as exc:
        raise _status_error(provider, exc) from exc
    except openai.APIResponseValidationError as exc:
        raise ModelOutputError(f"{provider}: unexpected response: {exc.message}", provider=provider) from exc
    except openai.APIError as exc:
        raise ModelUnavailable(f"{provider}: {exc.message}", provider=provider, error_type=exc.code) from exc
    except json.JSONDecodeError as exc:
        raise ModelOutputError(f"{provider}: unreadable response: {exc}", provider=provider) from exc
    except openai.OpenAIError as exc:
        raise ModelError(f"{provider}: {exc}", provider=provider) from exc
    except Exception as exc:
        error = transport_error(provider, exc)
        if error is None:
            raise
        raise error from exc


def _status_error(provider: str, exc: openai.APIStatusError) -> ModelError:
    body = exc.body if isinstance(exc.body, dict) else {}
    detail = str(body.get("message") or exc.message)
    error = status_error(
        provider,
        exc.status_code,
        detail,
        retry_after=retry_after(exc.response.headers),
        error_type=exc.code or exc.type,
        request_id=exc.request_id,
    )
    if exc.code == "insufficient_quota":
        error.retryable = False  # billing, not load: waiting will not help
    return error
