"""Settling expired pauses while the server runs, so an inbox never shows a pause nobody can answer.

Every ``interval`` seconds each agent's ``settle_expired()`` resolves the pauses whose
time-to-live has passed, by the agent's expiry policy (the model sees a denial by default, and
the turn goes on). Every server process may sweep: settling is a conditional append like any
answer, so a pause is settled once. The sweep starts with the app's lifespan, or with its first
request when the app is mounted somewhere that does not run sub-app lifespans.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from ..runtime._app import Pausepoint

__all__ = ["ExpirySweep"]

log = logging.getLogger("pausepoint.server")


class ExpirySweep:
    def __init__(self, ai: Pausepoint, *, interval: float | None, settled: Callable[[str, str], None]) -> None:
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
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def sweep(self) -> None:
        """One pass over every agent."""
        for agent in self._ai.agents.values():
            for response in await agent.settle_expired():
                self._settled(agent.name, response.session_id)

    async def _run(self, interval: float) -> None:
        while True:
            try:
                await self.sweep()
            except Exception:  # a store hiccup must not end the sweeping for good
                log.exception("settling expired pauses failed; trying again in %ss", interval)
            await asyncio.sleep(interval)
