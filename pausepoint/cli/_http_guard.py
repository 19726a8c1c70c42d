"""What ``pausepoint serve`` asks of a connection before the app sees a request: a bounded head,
sent in time, and a body that keeps coming — so that a client with no token cannot hold the
server's memory or its connections (uvicorn alone bounds neither: its keep-alive timeout runs
only between requests).

- **The head** (request line and headers) is at most ``HEAD_BYTES``: more is answered ``431``
  and the connection closed, before the headers are kept.
- **It must arrive** within ``HEAD_SECONDS`` of the connection opening, or of the request's
  first byte on a connection kept alive: a connection that sends nothing, or trickles its
  headers, is closed (``408``).
- **The body** must have come whole within ``BODY_SECONDS`` of the head (at 1 MiB, the API's
  largest, that is 17 KB/s): a body trickled byte by byte is cut off, and the app sees the
  client gone.
- **A chunked body's trailer fields** are dropped (RFC 9110 lets a server discard them): they
  never join the request's headers — a trailer is no place for credentials, an encoding or an
  idempotency key, which a proxy in front checked in the head. What a body sends besides its
  data (its chunks' framing, its trailers) is bounded as a head is: past ``HEAD_BYTES`` (and a
  few bytes a chunk), the connection is closed before it is kept.

uvicorn's protocol for httptools (the ``server`` extra's parser) is extended here; without
httptools, uvicorn's h11 protocol bounds the head by ``h11_max_incomplete_event_size``.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["BODY_SECONDS", "HEAD_BYTES", "HEAD_SECONDS", "guarded_protocol"]

HEAD_BYTES = 64 * 1024
HEAD_SECONDS = 10.0
BODY_SECONDS = 60.0

# The most a chunk's framing takes: its size in hex with extensions trimmed, and two line ends.
_CHUNK_FRAMING = 32

_REPLIES = {
    431: b"HTTP/1.1 431 Request Header Fields Too Large\r\n",
    408: b"HTTP/1.1 408 Request Timeout\r\n",
}


def guarded_protocol() -> type[asyncio.Protocol] | None:
    """uvicorn's httptools protocol with the limits above, or None without httptools."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # no httptools: uvicorn's h11 (bounded by h11_max_incomplete_event_size)
        return None

    class GuardedProtocol(HttpToolsProtocol):
        """One connection, with the head and body limits of the module's docstring."""

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._head_bytes: int | None = 0  # bytes received since the head began; None: not reading a head
            self._head_size = 0  # the head's request target and headers, as the parser hands them over
            self._deadline: asyncio.TimerHandle | None = None
            self._arm(HEAD_SECONDS, 408)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            reading_head = False
            if self._head_bytes is not None:
                self._head_bytes += len(data)
                reading_head = True
            super().data_received(data)
            if self.transport.is_closing():
                return
            if self._head_bytes is not None and self._head_bytes > HEAD_BYTES:
                self._refuse(431)
            elif not reading_head and self._head_bytes is None:
                # a body's bytes beside its data: its chunks' framing and its trailers (never kept)
                self._after_head += len(data)
                if self._after_head - self._body_bytes > HEAD_BYTES + _CHUNK_FRAMING * self._chunks:
                    self._refuse(None)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._deadline is None:  # a request kept alive: its head has its own time
                self._arm(HEAD_SECONDS, 408)

        def on_url(self, url: bytes) -> None:
            self._head_size += len(url)
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            if self._head_bytes is None:  # after the head: a chunked body's trailer field, dropped
                return
            self._head_size += len(name) + len(value) + 4  # ": " and the line's end
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            if self._head_size > HEAD_BYTES:  # whole in the read that took it past the limit
                self._refuse(431)
                return
            self._head_bytes = None
            self._after_head, self._body_bytes, self._chunks = 0, 0, 0
            self._disarm()
            self._arm(BODY_SECONDS, None)
            super().on_headers_complete()

        def on_chunk_header(self) -> None:
            self._chunks += 1

        def on_body(self, body: bytes) -> None:
            self._body_bytes += len(body)
            if not self.transport.is_closing():  # a refused head's body goes nowhere
                super().on_body(body)

        def on_message_complete(self) -> None:
            self._disarm()
            self._head_bytes, self._head_size = 0, 0  # the next head: after the body, read or not (a 413)
            if not self.transport.is_closing():
                super().on_message_complete()

        def _arm(self, seconds: float, status: int | None) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(seconds, self._refuse, status)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _refuse(self, status: int | None) -> None:
            """Close the connection; with ``status``, say why first (a head refused or late)."""
            self._deadline = None
            if self.transport.is_closing():
                return
            if status is not None and (self.cycle is None or self.cycle.response_complete):
                self.transport.write(_REPLIES[status] + b"content-length: 0\r\nconnection: close\r\n\r\n")
            self.transport.close()

    return GuardedProtocol
