"""The connection ``pausepoint serve`` serves with httptools: uvicorn's protocol, with the limits
``_http_guard`` says (importing it needs httptools: ``_http_guard.guarded_protocol`` asks)."""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from . import _http_guard as limits  # read at each use: a test shortens them

__all__ = ["GuardedProtocol"]


class GuardedProtocol(HttpToolsProtocol):
    """One connection, with the head and body limits of ``_http_guard``'s docstring."""

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._head_bytes: int | None = 0  # bytes received since the head began; None: not reading a head
        self._head_size = 0  # the head's request target and headers, as the parser hands them over
        self._deadline: asyncio.TimerHandle | None = None
        self._arm(limits.HEAD_SECONDS, 408)

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
        if self._head_bytes is not None and self._head_bytes > limits.HEAD_BYTES:
            self._refuse(431)
        elif not reading_head and self._head_bytes is None:
            # a body's bytes beside its data: its chunks' framing and its trailers (never kept)
            self._after_head += len(data)
            if self._after_head - self._body_bytes > limits.HEAD_BYTES + limits.CHUNK_FRAMING * self._chunks:
                self._refuse(None)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._deadline is None:  # a request kept alive: its head has its own time
            self._arm(limits.HEAD_SECONDS, 408)

    def on_url(self, url: bytes) -> None:
        self._head_size += len(url)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._head_bytes is None:  # after the head: a chunked body's trailer field, dropped
            return
        self._head_size += len(name) + len(value) + 4  # ": " and the line's end
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self._head_size > limits.HEAD_BYTES:  # whole in the read that took it past the limit
            self._refuse(431)
            return
        self._head_bytes = None
        self._after_head, self._body_bytes, self._chunks = 0, 0, 0
        self._disarm()
        self._arm(limits.BODY_SECONDS, None)
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
            self.transport.write(limits.REFUSALS[status] + b"content-length: 0\r\nconnection: close\r\n\r\n")
        self.transport.close()
