"""Running a turn for an HTTP request: a JSON reply, or a stream of server-sent events.

A streamed turn's first chunk is awaited before the response starts, so a refusal (a bad
answer, pending pauses, ...) is still a 4xx with a JSON body rather than a 200 stream holding
an error. Once streaming, a client that goes away does not stop the turn: it finishes and is
recorded (see ``pausepoint.turn._streaming``). A turn answered with one JSON body makes no chunks
at all (``call``), but it too runs in a task of its own, so that nothing that cancels the
request — a client going away, a server shutting down — cuts it short.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..session._json import RESPONSE, dump
from ..session._response import AgentResponse
from ..turn._streaming import CHUNK, TurnChunk, TurnStream
from ._errors import dumps, error_body, error_response, shutting_down, sse_json

__all__ = ["SSE_HEADERS", "event", "run_turn", "wants_stream"]

#: the headers of every event stream: never cached, nor held back by a proxy (nginx buffers otherwise)
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def wants_stream(request: Request) -> bool:
    """Whether the request asks for server-sent events: ``Accept`` names ``text/event-stream``
    (in any case) with a weight above 0 and no lower than JSON's, or the query says
    ``stream=true``."""
    accept = request.headers.get("accept", "")
    if "event-stream" in accept.lower() and _prefers_events(accept):
        return True
    # Most requests have no query string: parse one only when it may name ``stream`` (spelt out,
    # or percent-encoded).
    raw = request.scope["query_string"]
    return (b"stream" in raw or b"%" in raw) and request.query_params.get("stream") == "true"


def _prefers_events(accept: str) -> bool:
    """Whether an ``Accept`` header takes ``text/event-stream`` at least as gladly as JSON
    (RFC 9110: types are case-insensitive, ``q`` weighs each range, ``q=0`` says "not this one";
    JSON is taken by ``application/json``, ``application/*`` and ``*/*``)."""
    events = json = 0.0
    for media_range in accept.split(","):
        kind, *params = (piece.strip() for piece in media_range.split(";"))
        weights = [p.split("=", 1)[1].strip() for p in params if p.lower().startswith("q=") and "=" in p]
        try:
            weight = float(weights[0]) if weights else 1.0
        except ValueError:  # a weight that is no number: as if none were given
            weight = 1.0
        kind = kind.lower()
        if kind == "text/event-stream":
            events = max(events, weight)
        elif kind in ("application/json", "application/*", "*/*"):
            json = max(json, weight)
    return events > 0 and events >= json


def event(name: str, data: Any) -> bytes:
    return f"event: {name}\ndata: ".encode() + sse_json(data) + b"\n\n"


async def run_turn(
    request: Request,
    turn: Callable[[bool], Any],
    *,
    keep_alive: set[asyncio.Task[Any]],
    on_done: Callable[[], None],
    reply: Callable[[AgentResponse], Any] | None = None,
    chunk: Callable[[TurnChunk], Any] | None = None,
    frame: Callable[[str, Any], bytes] | None = None,
) -> Response:
    """Run a turn; reply with ``reply(response)`` as JSON, or stream it. ``turn(streamed)``
    starts it: a ``TurnStream`` when ``streamed``, else the awaitable ``AgentResponse`` (a
    chat's ``send_stream`` / ``send``, ``resume_stream`` / ``resume``). ``keep_alive`` holds the
    turn's task until it ends (the agent's).

    ``chunk`` translates a chunk (None: skip it) and ``frame(kind, value)`` writes an event of
    kind ``chunk``/``response``/``error``; the defaults are the REST API's snake_case events.
    """
    reply = reply or (lambda r: dump(RESPONSE, r))
    chunk = chunk or (lambda c: dump(CHUNK, c))
    frame = frame or (lambda kind, value: event(kind, error_body(value) if kind == "error" else value))

    def done(future: Any) -> None:
        if not future.cancelled():
            future.exception()  # retrieved here; the reply reports it
        on_done()

    if not wants_stream(request):
        task: asyncio.Task[AgentResponse] = asyncio.ensure_future(turn(False))
        keep_alive.add(task)
        task.add_done_callback(keep_alive.discard)
        task.add_done_callback(done)
        try:
            response = await asyncio.shield(task)
        except Exception as exc:
            return error_response(exc)
        return Response(dumps(reply(response)), media_type="application/json")
    try:
        stream: TurnStream = turn(True)
    except Exception as exc:
        return error_response(exc)
    stream.response.add_done_callback(done)
    iterator = stream.__aiter__()
    try:
        first = await _first_said(iterator, chunk)
    except Exception as exc:
        return error_response(exc)
    return StreamingResponse(
        _events(stream, first, iterator, reply, chunk, frame), media_type="text/event-stream", headers=SSE_HEADERS
    )


async def _first_said(chunks: AsyncIterator[TurnChunk], chunk: Callable[[TurnChunk], Any]) -> Any:
    """The first of ``chunks`` that ``chunk`` translates into something the client is told
    (None: the turn ended first). Until then nothing is sent, so a turn that fails before
    telling the client anything is refused with its status — on the Genkit wire, which carries
    no tool-call deltas or progress, too (it answered 200 with the error as its only event)."""
    async for item in chunks:
        translated = chunk(item)
        if translated is not None:
            return translated
    return None


async def _events(
    stream: TurnStream,
    first: Any,
    rest: AsyncIterator[TurnChunk],
    reply: Callable[[AgentResponse], Any],
    chunk: Callable[[TurnChunk], Any],
    frame: Callable[[str, Any], bytes],
) -> AsyncIterator[bytes]:
    try:
        if first is not None:
            yield frame("chunk", first)
            async for item in rest:
                translated = chunk(item)
                if translated is not None:
                    yield frame("chunk", translated)
        yield frame("response", reply(await stream))
    except Exception as exc:
        yield frame("error", exc)
    except asyncio.CancelledError:
        # The server is stopping past its grace period: the stream ends with the error a reply
        # would have been (503 shutting_down), and the request ends there (the turn, a task of
        # its own, may still end before the process).
        yield frame("error", shutting_down())
