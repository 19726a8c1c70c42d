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

uvicorn's protocol for httptools (the ``server`` extra's parser) is extended in ``_guarded``; without
httptools, uvicorn's h11 protocol bounds the head by ``h11_max_incomplete_event_size``.
"""

from __future__ import annotations

__all__ = ["BODY_SECONDS", "CHUNK_FRAMING", "HEAD_BYTES", "HEAD_SECONDS", "REFUSALS"]

HEAD_BYTES = 64 * 1024
HEAD_SECONDS = 10.0
BODY_SECONDS = 60.0

#: the most a chunk's framing takes: its size in hex with extensions trimmed, and two line ends
CHUNK_FRAMING = 32

#: what a refused head is told before its connection closes
REFUSALS = {
    431: b"HTTP/1.1 431 Request Header Fields Too Large\r\n",
    408: b"HTTP/1.1 408 Request Timeout\r\n",
}
