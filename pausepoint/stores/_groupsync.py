"""``GroupSync``: many writers waiting for stable storage share one ``fsync``, run off the event loop.

A writer commits (its data is in the file, in the operating system's hands), then awaits
``wait()``: it returns once an ``fsync`` that *started after* the call has finished. Writers that
arrive while an ``fsync`` runs wait for the next one, which covers all of them at once (a group
commit). The ``fsync`` runs in one worker thread, so the event loop serves other requests
meanwhile. Waiters may sit in several event loops; the worker wakes each in its own.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

__all__ = ["GroupSync"]


class GroupSync:
    """Group ``fsync``: ``await wait()`` after a write, to know it is on stable storage.

    One daemon thread per instance, started on first use and stopped by ``close()``.
    """

    def __init__(self, sync: Callable[[], None], name: str = "pausepoint-fsync") -> None:
        self._sync = sync
        self._name = name
        self._cond = threading.Condition()
        self._requested = 0  # tickets handed out, in order
        self._waiters: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._thread: threading.Thread | None = None
        self._closed = False

    async def wait(self) -> None:
        """Return once an ``fsync`` begun after this call has completed; raise its ``OSError``."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._cond:
            self._requested += 1
            self._waiters.append((self._requested, loop, future))
            if self._thread is None:
                self._closed = False
                self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify()
        await future

    def close(self) -> None:
        """Stop the worker once the waiters it has are served (a later ``wait`` starts another)."""
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _work(self) -> None:
        """The worker: sync rounds while anyone waits; each round covers every ticket taken before it."""
        while True:
            with self._cond:
                while not self._waiters and not self._closed:
                    self._cond.wait()
                if not self._waiters:
                    self._thread = None
                    return
                covered = self._requested
            error: OSError | None = None
            try:
                self._sync()
            except OSError as exc:
                error = exc
            with self._cond:
                done = [w for w in self._waiters if w[0] <= covered]
                self._waiters = [w for w in self._waiters if w[0] > covered]
            for _, loop, future in done:
                if not loop.is_closed():
                    loop.call_soon_threadsafe(_settle, future, error)


def _settle(future: asyncio.Future[None], error: OSError | None) -> None:
    if future.done():  # the waiter was cancelled: nobody to tell
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
