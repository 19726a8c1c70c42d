"""What a model is to pausepoint: one async call from a request to a response, optionally streaming.

Provider adapters (``pausepoint.models.*``), ``define_model`` functions and the scripted test
model all implement ``Model``. A streaming model reports deltas through ``on_chunk`` while it
works and still returns the complete response.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from ..content._intake import paired
from ..content._messages import Message, ToolResponsePart

__all__ = [
    "ChunkSink",
    "FunctionModel",
    "Model",
    "ModelChunk",
    "ModelFinishReason",
    "ModelRequest",
    "ModelResponse",
    "PairedText",
    "Plugin",
    "TextDelta",
    "ToolCallDelta",
    "ToolDefinition",
    "Usage",
    "tool_output_text",
]

ModelFinishReason: TypeAlias = Literal["stop", "length", "blocked", "other"]


@dataclass(slots=True)
class ToolDefinition:
    """A tool as a model sees it: name, description and JSON schemas."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None


@dataclass(slots=True)
class ModelRequest:
    """What a model is asked. ``messages`` is a read-only view of the conversation so far."""

    messages: Sequence[Message]
    system: str | None = None
    tools: list[ToolDefinition] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Usage:
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass(slots=True)
class ModelResponse:
    """The model's complete message. Tool request parts may leave ``ref`` empty."""

    message: Message
    finish_reason: ModelFinishReason = "stop"
    usage: Usage | None = None


@dataclass(slots=True)
class TextDelta:
    text: str
    kind: Literal["text"] = "text"


@dataclass(slots=True)
class ToolCallDelta:
    """A piece of a tool call as the model streams it: arguments arrive as JSON text deltas."""

    index: int
    name: str | None = None
    call_id: str | None = None
    arguments_delta: str = ""
    kind: Literal["tool_call_delta"] = "tool_call_delta"


ModelChunk: TypeAlias = TextDelta | ToolCallDelta
ChunkSink: TypeAlias = Callable[[ModelChunk], None]


class PairedText:
    """A ``ChunkSink`` that passes the chunks on with no surrogate pair cut in two: a text delta
    ending in a high surrogate (a stream cut by UTF-16 code units, as some gateways do) keeps it
    for the next delta, so each character streams whole, as the reply records it."""

    __slots__ = ("_held", "_sink")

    def __init__(self, sink: ChunkSink) -> None:
        self._sink = sink
        self._held = ""

    def __call__(self, chunk: ModelChunk) -> None:
        if isinstance(chunk, TextDelta):
            text = self._held + chunk.text
            self._held = text[-1] if text and "\ud800" <= text[-1] <= "\udbff" else ""
            text = paired(text[: len(text) - len(self._held)])
            if text:
                self._sink(TextDelta(text))
            return
        self._sink(chunk)


@runtime_checkable
class Model(Protocol):
    """A model: ``name`` for display and ``generate`` for one model call."""

    name: str

    async def generate(self, request: ModelRequest, on_chunk: ChunkSink | None = None) -> ModelResponse:
        """Answer ``request``. When ``on_chunk`` is given, report deltas through it as they come.

        Raises ``pausepoint.errors.ModelError`` (or a subclass) when the model fails.
        """
        ...


@runtime_checkable
class Plugin(Protocol):
    """Resolves ``provider/model`` names to models (``pausepoint.models`` holds the providers).

    A plugin that holds resources (connections, a loaded model) also defines ``async def
    aclose(self) -> None``; ``Pausepoint.aclose()`` calls it. It is optional, so that a plugin
    that only resolves names needs nothing else.
    """

    def resolve_model(self, name: str) -> Model | None:
        """The model called ``name``, or None when this plugin does not serve it."""
        ...


ModelFunction: TypeAlias = Callable[..., "ModelResponse | Awaitable[ModelResponse]"]


class FunctionModel:
    """A model backed by a function ``fn(request)`` or ``fn(request, on_chunk)``, sync or async.

    This is what ``Pausepoint.define_model`` registers.
    """

    def __init__(self, name: str, fn: ModelFunction) -> None:
        self.name = name
        self._fn = fn
        self._streams = len(inspect.signature(fn).parameters) >= 2

    async def generate(self, request: ModelRequest, on_chunk: ChunkSink | None = None) -> ModelResponse:
        result = self._fn(request, on_chunk) if self._streams else self._fn(request)
        if inspect.isawaitable(result):
            result = await result
        if not isinstance(result, ModelResponse):
            raise TypeError(f"model function {self.name!r} returned {type(result).__name__}, not ModelResponse")
        return result


def tool_output_text(part: ToolResponsePart, dumps: Callable[[Any], str]) -> str:
    """A tool's result as the text of a tool message, as OpenAI's chat API takes one: the output
    itself (a string as it is, anything else as ``dumps`` writes it), with ``Error: `` before a
    failed call's."""
    text = part.output if isinstance(part.output, str) else dumps(part.output)
    return f"Error: {text}" if part.is_error else text
