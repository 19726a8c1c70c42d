"""Settling expired pauses while the server runs, so an inbox never shows a pause nobody can answer.

Each agent's ``settle_expired()`` resolves the pauses whose time-to-live has passed, by the
agent's expiry policy (the model sees a denial by default, and the turn goes on) — every
``interval`` seconds, and as soon as the next pause due within that interval runs out (a step of
an escalation too), so reads show a pause nobody can answer any more for milliseconds, not for
up to ``interval``. A pause any process records meanwhile is seen through the stores' event
streams (as the feed sees it), and the next wake is worked out again (at most every
``_SPACING`` seconds). Every server process may sweep: settling is a conditional append like any
answer, so a pause is settled once. The sweep starts with the app's lifespan, or with its first
request when the app is mounted somewhere that does not run sub-app lifespans.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import timedelta

from ..errors import DefinitionError
from ..runtime._app import Pausepoint
from ..stores import SessionStore
from ._feed import stores_of
from ._watch import first_of, stopped

__all__ = ["ExpirySweep"]

log = logging.getLogger("pausepoint.server")

_SPACING = 0.25  # seconds: the least time between two looks at what is due, however busy the stores


class ExpirySweep:
    def __init__(self, ai: Pausepoint, *, interval: float | None, settled: Callable[[str, str], None]) -> None:
        if interval is not None and (
            isinstance(interval, bool) or not isinstance(interval, int | float) or not 0.01 <= interval <= 86_400
        ):
            raise DefinitionError(
                f"expiry_interval must be seconds from 0.01 to 86400 (a day), or None for no sweep, not {interval!r}"
            )
        self._ai = ai
        self._interval = interval
        self._settled = settled  # (agent, session id): tells the feed
        self._task: asyncio.Task[None] | None = None

    def ensure_running(self) -> None:
        """Start sweeping in the running loop, unless sweeping is off or already under way."""
        if self._interval is None or (self._task is not None and not self._task.done()):
            return
        self._task = asyncio.get_running_loop().create_task(self._run(self._interval))

    async def close(self) -> None:
        task, self._task = self._task, None
        await stopped(task)

    async def sweep(self) -> bool:
        """One pass over every agent's sessions with pauses due; False when a session's could not
        be settled (logged): the others are, whatever one session or agent does."""
        settled_all = True
        now = self._ai.clock()
        for agent in self._ai.agents.values():
            for summary in await agent.list_sessions(expiring_before=now, limit=100):
                try:
                    response = await agent.chat(summary.session_id).settle_expired()
                except Exception:
                    log.exception(
                        "settling the expired pauses of %s's session %s failed", agent.name, summary.session_id
                    )
                    settled_all = False
                    continue
                if response is not None:
                    self._settled(agent.name, response.session_id)
        return settled_all

    async def next_due(self, interval: float) -> float:
        """Seconds until the first pause due within ``interval`` runs out (``interval`` if none)."""
        now = self._ai.clock()
        soon = now + timedelta(seconds=interval)
        wait = interval
        for agent in self._ai.agents.values():
            for summary in await agent.list_sessions(expiring_before=soon):
                if summary.next_expiry is not None:
                    wait = min(wait, (summary.next_expiry - now).total_seconds())
        return max(wait, 0.0)

    async def _run(self, interval: float) -> None:
        stores = stores_of(self._ai)
        positions: list[int] | None = None  # read once a store answers (it may be starting still)
        while True:
            wait = interval
            try:
                if positions is None:
                    positions = [await store.last_event() for store in stores]
                if await self.sweep():  # else what failed is due still: try again after interval
                    wait = await self.next_due(interval)
                positions = await _until_written(stores, positions, wait + 0.001)  # just past: run out by then
            except Exception:  # a store hiccup must not end the sweeping for good
                log.exception("settling expired pauses failed; trying again in %ss", interval)
                await asyncio.sleep(interval)


async def _until_written(stores: list[SessionStore], positions: list[int], seconds: float) -> list[int]:
    """Wait ``seconds``, or until a process writes an event to one of ``stores`` (a pause that may
    run out sooner), but at least ``_SPACING`` seconds (unless ``seconds`` is less); the
    positions of their newest events then."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    pairs = zip(stores, positions, strict=True)
    await first_of([store.wait_for_events(at, seconds) for store, at in pairs], seconds)
    left = min(seconds, _SPACING) - (loop.time() - started)
    if left > 0:
        await asyncio.sleep(left)
    return [await store.last_event() for store in stores]
