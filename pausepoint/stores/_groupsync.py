"""``GroupSync``: writers waiting for stable storage share one ``fsync``.

A writer commits (its data is in the file, in the operating system's hands), then awaits
``wait()``: it returns once an ``fsync`` that *started after* the call has finished. Writers that
ask while a round gathers share its ``fsync`` (a group commit). Where the ``fsync`` runs depends on
how long the recent ones took:

- **On the event loop, when the disk is fast** (recent ``fsync`` calls under ``inline_below``,
  1 ms by default: an SSD). The first writer opens a round and schedules it with ``call_soon``;
  every writer that asks before it runs (the other tasks ready on the loop) joins it; then the
  round syncs and wakes them all. The loop is held for one ``fsync``, about what a request's own
  work takes, and saves the trip to a thread and back: a worker thread's wake-up, the loop's
  wake-up from idle, and the colder caches after it (measured: 270 µs a wait through a thread
  for a 160 µs ``fsync``, and about 150 µs more CPU per wait in the code that ran after it).
- **In a worker thread, when the disk is slow** (a disk, a network file system): the loop serves
  other requests meanwhile, and writers that ask while an ``fsync`` runs wait for the next one,
  which covers all of them at once. Waiters may sit in several event loops; the worker wakes
  each in its own.

The choice follows the disk: every ``fsync``'s duration, wherever it ran, feeds a moving average.

A process forked while a worker ran (``multiprocessing``'s default on Linux) has no worker, and
perhaps a lock the worker held: each ``GroupSync`` starts again empty in the child, its next
slow round starting a worker of the child's own (a child's first durable write waited for ever).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import weakref
from collections.abc import Callable

__all__ = ["GroupSync"]

# Weight of the latest fsync in the moving average of their durations.
_WEIGHT = 0.2


class GroupSync:
    """Group ``fsync``: ``await wait()`` after a write, to know it is on stable storage.

    The worker thread, when slow ``fsync`` calls need it, starts on first use and stops on
    ``close()``.
    """

    def __init__(
        self, sync: Callable[[], None], name: str = "pausepoint-fsync", *, inline_below: float = 0.001
    ) -> None:
        self._sync = sync
        self._name = name
        self._inline_below = inline_below
        self._average = 0.0  # seconds an fsync takes, lately; the first one runs inline
        # The round gathering on each event loop (inline mode): the futures of its waiters.
        self._rounds: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
        self._cond = threading.Condition()
        self._requested = 0  # tickets handed out to the worker, in order
        self._waiters: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._thread: threading.Thread | None = None
        self._closed = False
        _ALL.add(self)

    def _start_again(self) -> None:
        """In a forked child: no worker, no waiters (the parent's), a lock no thread holds."""
        self._rounds = {}
        self._cond = threading.Condition()
        self._requested = 0
        self._waiters = []
        self._thread = None
        self._closed = False

    @property
    def inline(self) -> bool:
        """Whether the next round runs on the event loop (the recent ``fsync`` calls were fast)."""
        return self._average < self._inline_below

    async def wait(self) -> None:
        """Return once an ``fsync`` begun after this call has completed; raise its ``OSError``."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        if self.inline:
            round_ = self._rounds.get(loop)
            if round_ is None:
                round_ = self._rounds[loop] = []
                loop.call_soon(self._run_round, loop)
            round_.append(future)
        else:
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

    def _timed_sync(self) -> BaseException | None:
        """One ``fsync``, its duration fed to the average; the error it raised, if any."""
        started = time.perf_counter()
        try:
            self._sync()
        except Exception as exc:
            return exc
        finally:
            self._average += _WEIGHT * (time.perf_counter() - started - self._average)
        return None

    def _run_round(self, loop: asyncio.AbstractEventLoop) -> None:
        """The inline round: every writer that joined it asked before this ``fsync`` began."""
        waiters = self._rounds.pop(loop)
        error = self._timed_sync()
        for future in waiters:
            _settle(future, error)

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
            error = self._timed_sync()
            with self._cond:
                done = [w for w in self._waiters if w[0] <= covered]
                self._waiters = [w for w in self._waiters if w[0] > covered]
            for _, loop, future in done:
                if not loop.is_closed():
                    loop.call_soon_threadsafe(_settle, future, error)


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():  # the waiter was cancelled: nobody to tell
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


_ALL: weakref.WeakSet[GroupSync] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for group in list(_ALL):
        group._start_again()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)
