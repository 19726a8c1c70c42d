"""Streaming a turn: the chunks a caller sees as they happen, and the stream object.

A turn started with ``send_stream`` / ``resume_stream`` runs in its own task. If the consumer
stops reading, breaks out of its loop or is cancelled, the turn still finishes in the background
and is recorded normally (nothing is half-written); ``await stream.response`` still gives its
outcome, and the next call on the same session waits for it to finish.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field, TypeAdapter

from ..errors import UsageError
from ..session._interrupts import PendingInterrupt
from ..session._response import AgentResponse

__all__ = [
    "CHUNK",
    "Emit",
    "InterruptChunk",
    "TextChunk",
    "ToolCallDeltaChunk",
    "ToolProgressChunk",
    "ToolRequestChunk",
    "ToolResultChunk",
    "TurnChunk",
    "TurnEndChunk",
    "TurnStream",
]


class _NoText:
    """A chunk that carries no answer text: its ``text`` is empty, so Genkit's ``if chunk.text:``
    reads every kind of chunk as it reads Genkit's."""

    __slots__ = ()

    @property
    def text(self) -> str:
        return ""


@dataclass(frozen=True, slots=True)
class TextChunk:
    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ToolCallDeltaChunk(_NoText):
    """A piece of a tool call while the model is still writing it."""

    index: int
    name: str | None
    arguments_delta: str
    kind: Literal["tool_call_delta"] = "tool_call_delta"


@dataclass(frozen=True, slots=True)
class ToolRequestChunk(_NoText):
    """The model asked for a tool call (complete, with the runtime's ref)."""

    ref: str
    name: str
    input: Any
    kind: Literal["tool_request"] = "tool_request"


@dataclass(frozen=True, slots=True)
class InterruptChunk(_NoText):
    """A tool call paused — sent the moment it pauses, before the turn ends.

    The call was streamed before as a ``tool_request`` with the same ref: this chunk marks it
    paused (answerable now by that ref), it is not another request. ``call_ref`` is that ref
    again (``interrupt.ref``), for readers of versions where a pause had a ref of its own.
    """

    interrupt: PendingInterrupt
    call_ref: str = ""
    kind: Literal["interrupt"] = "interrupt"


@dataclass(frozen=True, slots=True)
class ToolProgressChunk(_NoText):
    """Progress a running tool reported through ``ToolRunContext.send_progress``."""

    ref: str
    name: str
    data: Any
    kind: Literal["tool_progress"] = "tool_progress"


@dataclass(frozen=True, slots=True)
class ToolResultChunk(_NoText):
    ref: str
    name: str
    output: Any
    is_error: bool = False
    kind: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, slots=True)
class TurnEndChunk(_NoText):
    """The last chunk of a turn, with the complete response."""

    response: AgentResponse
    kind: Literal["turn_end"] = "turn_end"


TurnChunk: TypeAlias = (
    TextChunk
    | ToolCallDeltaChunk
    | ToolRequestChunk
    | InterruptChunk
    | ToolProgressChunk
    | ToolResultChunk
    | TurnEndChunk
)
Emit: TypeAlias = Callable[[TurnChunk], None]
#: a chunk's JSON (the REST API's stream), one adapter for writing and reading it back
CHUNK: TypeAdapter[TurnChunk] = TypeAdapter(Annotated[TurnChunk, Field(discriminator="kind")])

_END = object()


class TurnStream:
    """An async iterator over a turn's chunks; ``await stream.response`` gives its outcome.

    Also awaitable directly: ``await chat.send_stream(...)`` is the response. Genkit's turn
    surface is here too: ``stream.stream`` (the chunks) and ``await stream.abort()``, which,
    as in Genkit, stops listening — the chunks end for this consumer — while the turn runs on
    and is recorded (``response`` still gives its outcome). To stop a turn itself, detach it
    (``Chat.detach``) and abort that (``Chat.abort``).

    Chunks rebuild what the turn adds to the history: ``text`` and ``tool_request`` chunks form
    a model message (one ``tool_request`` per call, with the ref every surface shows),
    ``tool_result`` chunks a tool message — sent when the last call of its batch has a result,
    as the history gets it. An ``interrupt`` marks a call already streamed as paused, the moment
    it pauses; it adds nothing to the history.
    """

    def __init__(self, run: Callable[[Emit], Awaitable[AgentResponse]], keep_alive: set[asyncio.Task[Any]]) -> None:
        _check_loop()
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._listening = True
        self._task: asyncio.Task[AgentResponse] = asyncio.ensure_future(self._drive(run))
        keep_alive.add(self._task)
        self._task.add_done_callback(keep_alive.discard)

    async def _drive(self, run: Callable[[Emit], Awaitable[AgentResponse]]) -> AgentResponse:
        try:
            return await run(self._emit)
        finally:
            self._queue.put_nowait(_END)

    def _emit(self, chunk: TurnChunk) -> None:
        if self._listening and not _unkeepable(chunk):
            self._queue.put_nowait(chunk)

    @property
    def response(self) -> asyncio.Future[AgentResponse]:
        """The turn's response; awaiting it does not require reading the stream."""
        return asyncio.shield(self._task)

    @property
    def stream(self) -> TurnStream:
        """The chunks (Genkit's ``turn.stream``): iterating this object is the same."""
        return self

    async def abort(self) -> None:
        """Stop listening: the chunks end here (chunks not read yet are dropped; a read waiting
        for one returns), and the turn goes on."""
        if self._listening:
            self._listening = False
            while not self._queue.empty():
                self._queue.get_nowait()
            self._queue.put_nowait(_END)

    def __await__(self) -> Generator[Any, None, AgentResponse]:
        return self.response.__await__()

    def __aiter__(self) -> TurnStream:
        return self

    async def __anext__(self) -> TurnChunk:
        item = await self._queue.get()
        if item is _END:
            self._queue.put_nowait(_END)  # later reads end too
            if self._listening and self._task.done() and not self._task.cancelled() and self._task.exception():
                raise self._task.exception()  # type: ignore[misc]
            raise StopAsyncIteration
        chunk: TurnChunk = item
        return chunk


def _check_loop() -> None:
    """``UsageError`` where no event loop runs in this thread: the turn's task would be made for
    a loop that never runs it, and a stream read later (in ``asyncio.run``, on another loop)
    would wait for ever — refused at once instead, nothing started."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise UsageError(
            "a streamed turn runs on the event loop it is started from, and none runs here: start it "
            "in async code (a coroutine asyncio runs), or use a local chat's chat.sync, which needs none"
        ) from None


def _unkeepable(chunk: TurnChunk) -> bool:
    """Whether ``chunk`` streams a model's text no session keeps (a lone surrogate: no UTF-8, and
    JSON parsers refuse or alter it): the reply is refused once it ends (``ModelOutputError``,
    nothing of it written), and that piece is never shown on any surface."""
    text = chunk.text if isinstance(chunk, TextChunk) else getattr(chunk, "arguments_delta", None)
    if text is None or text.isascii():
        return False
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False
