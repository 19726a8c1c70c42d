"""One watch of a store's event stream for every reader in this process.

A reader of events (each feed connection) waits for new ones with ``wait``. Asking the store
for each reader cost a poll (SQLite's change counter every 50 ms) or a subscription per reader:
500 idle feeds took a sixth of a core. A ``StoreWatch`` asks the store once, for everyone
waiting, and wakes them all when an event may have come. Woken together, the readers read from
the same position: ``read`` asks the store once for all of them (1,500 feeds made every event
1,500 queries, and every turn on the server 30 times slower).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable

from ..stores import Event, SessionStore

__all__ = ["StoreWatch", "first_of", "stopped"]

log = logging.getLogger("pausepoint.server")

_PAGES = 16  # pages kept for readers behind the newest (a reconnect replaying what it missed)


class StoreWatch:
    """Waits on ``store``'s event stream (``wait_for_events``) for every caller of ``wait`` at
    once; stops asking the store while nobody waits."""

    def __init__(self, store: SessionStore, interval: float) -> None:
        self.store = store
        self.interval = interval  # the longest one wait on the store lasts
        self._seen = -1  # the newest event position the watch knows of (-1: none asked yet)
        self._news: asyncio.Future[None] | None = None  # done once an event after _seen may exist
        self._watching: asyncio.Task[None] | None = None
        self._waiting = 0
        # The latest pages read, by the position they were read after: (the newest position
        # known when the read began, the read) — shared while no newer event is known.
        self._pages: dict[int, tuple[int, asyncio.Task[list[Event]]]] = {}

    async def wait(self, after: int, max_wait: float) -> None:
        """Return once an event after position ``after`` may exist, or after ``max_wait`` seconds
        (as ``SessionStore.wait_for_events``; ``read_events`` tells which)."""
        if self._seen > after:
            return  # known already: the caller has not read it yet
        loop = asyncio.get_running_loop()
        if self._news is None or self._news.done() or self._news.get_loop() is not loop:
            self._news = loop.create_future()
        news = self._news
        if self._watching is None or self._watching.done() or self._watching.get_loop() is not loop:
            self._watching = loop.create_task(self._watch(after))
        self._waiting += 1
        try:
            await asyncio.wait([news], timeout=max_wait)
        finally:
            self._waiting -= 1

    async def read(self, after: int, limit: int) -> list[Event]:
        """``store.read_events(after, limit)``, asked once for every reader asking the same while
        no event newer than the read may have shown it is known (a full page stays good). The
        read is no reader's own: one that leaves (its client gone) stops nobody else's."""
        loop = asyncio.get_running_loop()
        page = self._pages.get(after)
        if page is None or page[1].get_loop() is not loop or not _still_good(page, self._seen, limit):
            read = loop.create_task(self.store.read_events(after, limit))
            read.add_done_callback(functools.partial(self._forget_failed, after))
            page = self._pages[after] = (self._seen, read)
            while len(self._pages) > _PAGES:
                del self._pages[next(iter(self._pages))]
        return list(await asyncio.shield(page[1]))

    def _forget_failed(self, after: int, read: asyncio.Task[list[Event]]) -> None:
        """A read that failed is asked again by the next reader (each of the waiting ones has it raised)."""
        if (read.cancelled() or read.exception() is not None) and self._pages.get(after, (0, None))[1] is read:
            del self._pages[after]

    async def _watch(self, after: int) -> None:
        seen = max(self._seen, after)
        while self._waiting:
            try:
                await self.store.wait_for_events(seen, self.interval)
                newest = await self.store.last_event()
            except Exception:  # a store hiccup: the readers' own reads report it; ask again later
                await asyncio.sleep(self.interval)
                continue
            if newest > seen:
                seen = self._seen = newest
                news, self._news = self._news, None
                if news is not None and not news.done():
                    news.set_result(None)


def _still_good(page: tuple[int, asyncio.Task[list[Event]]], known: int, limit: int) -> bool:
    """Whether a page read (under way, or read when ``page[0]`` was the newest position known) still
    answers a reader now that ``known`` is: it is full, or no newer event has been heard of."""
    seen_then, read = page
    if not read.done():
        return True
    if read.cancelled() or read.exception() is not None:
        return False
    return len(read.result()) >= limit or known <= seen_then


async def first_of(waits: list[Awaitable[None]], max_wait: float | None = None) -> None:
    """Wait until the first of ``waits`` ends (or ``max_wait`` seconds), then stop the others."""
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, timeout=max_wait, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def stopped(*tasks: asyncio.Task[None] | None) -> None:
    """Cancel the background ``tasks`` (None: none there) and wait until each has ended. One
    that had ended with an error is logged, not raised: what is stopped after it still is."""
    running = [task for task in tasks if task is not None]
    for task in running:
        task.cancel()
    for task in running:
        try:
            await task
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("a background task of the server had failed")
