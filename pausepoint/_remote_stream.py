"""How ``pausepoint.client`` reads a turn's event stream (``event: chunk`` / ``response`` /
``error``), and what it keeps of one so that a stream that broke after chunks came can be
completed: the keyed request that completes it is answered with the whole response, not
streamed, so the consumer is given only what the broken stream had not given it — an
``interrupt`` chunk for each open pause it did not mark, and a ``turn_end`` unless one came.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from .session._response import AgentResponse
from .turn._streaming import CHUNK, Emit, InterruptChunk, TurnEndChunk

__all__ = ["StreamSeen", "sse_events", "sse_lines"]


class StreamSeen:
    """The chunks of a turn's stream handed to ``emit`` so far (through ``chunk``), as much of
    them as completing the turn after a break needs (``completed``)."""

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self._marked: set[str] = set()  # the refs of the interrupt chunks emitted
        #: a chunk came: the caller saw part of the turn, so it is not streamed to them again
        self.received = False
        #: the stream's ``turn_end`` chunk, once it came: it holds the turn's whole response
        self.turn_end: TurnEndChunk | None = None

    def chunk(self, data: Any) -> None:
        """Hand on the chunk ``data`` (an ``event: chunk``'s JSON), noting what completing needs."""
        item = CHUNK.validate_python(data)
        self.received = True
        if isinstance(item, InterruptChunk):
            self._marked.add(item.interrupt.ref)
        elif isinstance(item, TurnEndChunk):
            self.turn_end = item
        self._emit(item)

    def completed(self, response: AgentResponse) -> AgentResponse:
        """The turn's ``response``, which a keyed request brought after the stream broke before
        its ``turn_end``, once the chunks the broken stream owed are emitted: an ``interrupt``
        chunk for each open pause it had not marked — so that a consumer drawing pauses from
        those chunks sees every one before the turn ends — then the ``turn_end``. (The text,
        requests and results a break cut off are not made up again: the history holds them.)"""
        for pause in response.interrupts:
            if pause.ref not in self._marked:
                self._emit(InterruptChunk(pause, pause.ref))
        self._emit(TurnEndChunk(response))
        return response


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, Any]]:
    """``(event name, JSON data)`` for each event of a server-sent event stream's ``lines``."""
    name, data = "message", list[str]()
    async for line in lines:
        if not line:
            if data:
                yield name, json.loads("\n".join(data))
            name, data = "message", list[str]()
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


async def sse_lines(text: AsyncIterator[str]) -> AsyncIterator[str]:
    """The lines of an event stream, split where the SSE format ends a line (CR LF, LF or CR)
    and nowhere else: httpx's ``aiter_lines`` also splits at U+2028, U+2029 and U+0085, which
    a JSON string may hold as they are."""
    pending = ""
    async for piece in text:
        pending += piece
        # A CR at the very end may be the first half of a CR LF: keep it for the next piece.
        cut = len(pending) - 1 if pending.endswith("\r") else len(pending)
        *done, rest = pending[:cut].replace("\r\n", "\n").replace("\r", "\n").split("\n")
        pending = rest + pending[cut:]
        for line in done:
            yield line
    if pending:
        yield pending.rstrip("\r")
