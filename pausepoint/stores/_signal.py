"""``Signal``: how a store wakes the readers of its event stream in this process.

A store fires its signal after each append that wrote events (and when another process tells it
of one: PostgreSQL ``LISTEN``, Redis pub/sub, SQLite's ``data_version``). Waiters note the
signal's generation *before* they look at the stream, then wait for it to change, so an event
written between the look and the wait still wakes them. Safe to fire from any thread; waiters
may sit in several event loops.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

__all__ = ["Signal", "wait_after"]


class Signal:
    def __init__(self) -> None:
        self.generation = 0
        self._lock = threading.Lock()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = set()

    def fire(self) -> None:
        with self._lock:
            self.generation += 1
            waiters, self._waiters = self._waiters, set()
        for loop, future in waiters:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_wake, future)

    async def wait(self, generation: int, max_wait: float) -> None:
        """Until the generation is no longer ``generation``, or ``max_wait`` seconds."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        waiter = (loop, future)
        with self._lock:
            if self.generation != generation:
                return
            self._waiters.add(waiter)
        try:
            await asyncio.wait_for(future, max(max_wait, 0.0))
        except TimeoutError:
            pass
        finally:
            with self._lock:
                self._waiters.discard(waiter)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def wait_after(signal: Signal, after: int, max_wait: float, head: Callable[[], Awaitable[int]]) -> None:
    """``wait_for_events`` on a signal: return at once if the stream is past ``after`` already."""
    generation = signal.generation
    if await head() > after:
        return
    await signal.wait(generation, max_wait)
