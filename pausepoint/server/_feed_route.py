"""The feed's route, ``GET /v1/feed``: the app's ``Feed`` (``_feed``) as server-sent events,
for the sessions the caller may see.

Each event has an id; a client that reconnects with ``Last-Event-ID`` gets exactly the events
it missed (a 400 for an id this feed never sent). A comment line every 15 s keeps an idle
connection open through proxies.

The caller's credentials are checked again before an event is sent (at most once a second) and
at each keep-alive: once they are no longer accepted — a token that expired, was revoked, or whose
key the provider dropped — the stream ends with an ``error`` event (the 401's body), and nothing
more is sent on it. A store that fails while the stream is open ends it the same way (the 503's
body, ``store_error``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..errors import Unauthenticated
from ._errors import error_body, feed_shutting_down
from ._params import last_event_id
from ._routes import Operation, header, schema_ref
from ._service import service_of
from ._turns import SSE_HEADERS, event

__all__ = ["FEED", "feed"]

_KEEP_ALIVE = 15.0
_RECHECK = 1.0  # seconds: how long a check of the caller's credentials holds for the events after it

FEED: Operation[Any] = Operation(
    "Server-sent events of the sessions the caller may see, named 'pause', 'answer' (an expiry too: "
    "its data's type is 'expiry'), 'turn_end', 'approval', 'decision', 'grant', 'escalation' — each "
    "with an id: reconnect with Last-Event-ID to get exactly the events missed",
    params=[header("Last-Event-ID", {"type": "string"})],
    responses={
        "200": {"description": "an event stream", "content": {"text/event-stream": {}}},
        "400": {
            "description": "a Last-Event-ID this feed never sent",
            "content": {"application/json": {"schema": schema_ref("Error")}},
        },
    },
)


async def feed(request: Request) -> Response:
    service = service_of(request)
    principal = await service.principal(request)
    positions = await service.feed.start(last_event_id(request))
    if request.method == "HEAD":  # the stream's head alone: nothing to follow
        return Response(media_type="text/event-stream", headers=SSE_HEADERS)
    followed = service.feed.follow(positions, lambda s: service.policy.can_view(principal, s))

    loop = asyncio.get_running_loop()
    checked = loop.time()

    async def refused() -> bytes | None:
        """The error event ending the stream, once the caller's credentials are refused."""
        nonlocal checked
        try:
            await service.principal(request)
        except Unauthenticated as exc:
            return event("error", error_body(exc))
        checked = loop.time()
        return None

    async def events() -> AsyncIterator[bytes]:
        yield b": connected\n\n"
        pending: asyncio.Future[Any] | None = None
        try:
            while True:
                pending = pending or asyncio.ensure_future(anext(followed))
                done, _ = await asyncio.wait([pending], timeout=_KEEP_ALIVE)
                if (not done or loop.time() - checked >= _RECHECK) and (ended := await refused()) is not None:
                    yield ended
                    return
                if not done:
                    yield b": keep-alive\n\n"
                    continue
                event_id, frame = pending.result()
                pending = None
                yield b"id: " + event_id.encode() + b"\n" + frame
        except Exception as exc:
            # The store failed (a database restarted, say): the stream ends with the error a
            # reply would have been (503 store_error), as a turn's stream does; the client
            # reconnects with the last id it got and misses nothing.
            yield event("error", error_body(exc))
        except asyncio.CancelledError:
            # The server is stopping past its grace period: the stream ends with the error a
            # reply would have been (503 shutting_down), as a turn's stream does (``_turns``),
            # saying how a feed goes on.
            yield event("error", error_body(feed_shutting_down()))
        finally:
            if pending is not None:
                pending.cancel()
                with contextlib.suppress(BaseException):
                    await pending
            await followed.aclose()

    return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)
