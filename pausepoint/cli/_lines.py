"""Lines typed (or piped) into the terminal chat, read without blocking its event loop.

Reading stdin in a worker thread (``asyncio.to_thread(input)``) leaves Ctrl+C stuck: the loop
is cancelled, but ``asyncio.run`` then waits for the thread, which waits for Enter. So where
the input is a terminal or a pipe, the event loop itself watches the file descriptor
(``add_reader``) and a Ctrl+C at a prompt ends the chat at once. Anything else (a regular file
redirected to stdin, a ``StringIO`` in a test, a platform without ``add_reader``) is read in a
daemon thread, which is never waited for.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import threading
from collections.abc import Callable
from typing import BinaryIO, TextIO, TypeVar

__all__ = ["LineReader"]

T = TypeVar("T")


class LineReader:
    """``await readline()``: the next line of ``stream`` without its newline, or None at its end."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._fd: int | None = None
        with contextlib.suppress(AttributeError, OSError, ValueError):
            self._fd = stream.fileno()
        encoding = getattr(stream, "encoding", None) or "utf-8"
        self._decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
        # its bytes, decoded as a pipe's are (a text stream's own errors handler may differ)
        self._bytes: BinaryIO | None = getattr(stream, "buffer", None)
        self._buffer = ""
        self._ended = False

    async def readline(self) -> str | None:
        while "\n" not in self._buffer and not self._ended:
            data = await self._read()
            if data is None:
                self._ended = True
                self._buffer += self._decoder.decode(b"", final=True)
            else:
                self._buffer += data
        if not self._buffer:
            return None
        line, newline, self._buffer = self._buffer.partition("\n")
        return line if newline or line else None

    async def _read(self) -> str | None:
        """Some more text; None at the end of input."""
        if self._fd is not None:
            try:
                chunk = await _read_when_ready(self._fd)
            except (NotImplementedError, PermissionError, ValueError):
                self._fd = None  # a regular file (epoll refuses it) or no add_reader here
            else:
                return None if not chunk else self._decoder.decode(chunk)
        if self._bytes is not None:
            raw = await _in_daemon_thread(self._bytes.readline)
            return self._decoder.decode(raw) if raw else None
        line = await _in_daemon_thread(self._stream.readline)
        return line or None


async def _read_when_ready(fd: int) -> bytes:
    """``os.read(fd)`` once the loop sees ``fd`` readable (a whole line, on a terminal)."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
    return os.read(fd, 65536)


async def _in_daemon_thread(read: Callable[[], T]) -> T:
    """``read()`` in a daemon thread: cancelling the wait abandons the thread instead of joining it."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def deliver(result: T | None, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            assert result is not None
            done.set_result(result)

    def work() -> None:
        result: T | None = None
        error: BaseException | None = None
        try:
            result = read()
        except BaseException as exc:  # delivered to the waiting coroutine
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(deliver, result, error)

    threading.Thread(target=work, name="pausepoint-stdin", daemon=True).start()
    return await done
