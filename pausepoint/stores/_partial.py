"""A checkpoint base given in part (``Checkpoint.fetch``), for the stores across a network.

A cold load of a long session needs the base's head (its values, and the sums that check the
rest a chunk at a time) and the few items its turn reads: on an approval session of 1,000
cycles, none of the 67 chunks of its 4.4 MB of items. So ``PostgresSessionStore`` and ``RedisSessionStore`` read
the first ``PREFIX_BYTES`` of a base with the rest of the checkpoint, and give the base as a
view of its whole length (``PartialBase``) that the runtime fills in a range at a time, before
it first reads it.

The runtime reads a base's items in synchronous code, so a range is fetched synchronously: on a
private event loop in a thread of its own (``BlockingLoop``), with its own connection, while the
caller's thread waits, as it would for a page of a mapped file (SQLite's bases). Nothing on that
loop ever waits for the caller's, so the wait always ends: with the bytes, a ``StoreError``, or
after ``FETCH_TIMEOUT`` seconds.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import mmap
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..errors import StoreError

__all__ = ["FETCH_TIMEOUT", "PREFIX_BYTES", "BlockingLoop", "PartialBase"]

T = TypeVar("T")

# The bytes of a base read with the rest of the checkpoint: the head of a base of up to about
# 500 MB (8 bytes of chunk sums a 64 KiB; a longer one's head takes one fetch more).
PREFIX_BYTES = 64 * 1024
FETCH_TIMEOUT = 30.0


class BlockingLoop:
    """An event loop in a daemon thread, to run a store's coroutines from synchronous code.

    ``run`` blocks the calling thread until the coroutine ends there; coroutines from several
    threads run one at a time, as they share ``resource``, made on that loop on first use (a
    connection of its own) and closed by ``aclose``.
    """

    def __init__(self, name: str, make: Callable[[], Awaitable[Any]], close: Callable[[Any], Awaitable[None]]) -> None:
        self._name = name
        self._make = make
        self._close = close
        self._loop: asyncio.AbstractEventLoop | None = None
        self._resource: Any = None
        self._lock = threading.Lock()
        self._turn = asyncio.Lock()  # used on the loop only

    def run(self, work: Callable[[Any], Awaitable[T]]) -> T:
        """``await work(resource)`` on the loop; its result, or what it raised."""
        future = asyncio.run_coroutine_threadsafe(self._call(work), self._started())
        try:
            return future.result(FETCH_TIMEOUT)
        except concurrent.futures.TimeoutError as exc:
            future.cancel()
            raise StoreError(f"fetching part of a checkpoint took more than {FETCH_TIMEOUT:.0f} s") from exc

    async def _call(self, work: Callable[[Any], Awaitable[T]]) -> T:
        async with self._turn:
            if self._resource is None:
                self._resource = await self._make()
            return await work(self._resource)

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                self._turn = asyncio.Lock()
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name=self._name, daemon=True).start()
                self._loop = loop
            return self._loop

    async def aclose(self) -> None:
        """Close the resource and stop the loop (a later ``run`` starts them again)."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is None:
            return

        async def finish() -> None:
            resource, self._resource = self._resource, None
            if resource is not None:
                await self._close(resource)

        try:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(finish(), loop))
        finally:
            loop.call_soon_threadsafe(loop.stop)


class PartialBase:
    """A base of ``length`` bytes of which ``prefix`` (its first bytes) is read: ``view`` is
    the whole of it, read-only, and ``fetch(start, stop)`` puts bytes ``start`` to ``stop - 1``
    in it with ``read(start, stop)`` (blocking), which returns them (fewer when the base is no
    longer there). The bytes not read yet take no memory (an anonymous map)."""

    __slots__ = ("_buffer", "_have", "_read", "view")

    def __init__(self, length: int, prefix: bytes, read: Callable[[int, int], bytes]) -> None:
        self._buffer = mmap.mmap(-1, length)
        self._buffer[: len(prefix)] = prefix
        self._have = len(prefix)  # bytes 0 to _have - 1 are there (and any range fetched since)
        self._read = read
        self.view = memoryview(self._buffer).toreadonly()

    def fetch(self, start: int, stop: int) -> None:
        if stop <= self._have:
            return
        start = max(start, self._have)
        data = self._read(start, stop)
        if len(data) != stop - start:
            raise StoreError(
                f"bytes {start} to {stop} of a session checkpoint are no longer in the store "
                "(a newer one replaced it long ago, or the session was deleted)"
            )
        self._buffer[start:stop] = data
        if start == self._have:
            self._have = stop
