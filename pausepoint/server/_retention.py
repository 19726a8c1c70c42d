"""Pruning the stores' event log while the server runs, so that a server serving for months
keeps a bounded outbox.

Every append writes its events, and one delivery per webhook that wants each (the outbox): the
feed replays them to a client reconnecting with ``Last-Event-ID``, the sender delivers them.
Nothing else reads them — a session's history and audit trail are its records, kept whole — so
with ``create_app(keep_events=timedelta(days=30))`` (``[retention] events_days``) the events
older than that go, with their settled deliveries, through each store's ``prune_events``: an
event with a delivery still pending or failed is kept until it is delivered (or its failed
delivery is sent again and delivered). Without it, every event is kept.

"Older" is by the app's clock (``Pausepoint(clock=...)``), which dated the events. ``keep_events``
may be up to ``MAX_KEEP`` (36500 days, as ``[retention] events_days``), more than the 10**9
seconds other durations take: it is only ever taken from now, never added to it; a cutoff before
the calendar's first day (a clock near ``datetime.min``) prunes nothing, where an overflow would
end the pruning for good. A pass runs when the server starts and then every tenth of
``keep_events`` (at least every second, at most every hour); every server process may prune:
deleting what another process deleted deletes nothing. A store that fails is logged and tried
again at the next pass.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

from ..errors import DefinitionError
from ..runtime._app import Pausepoint
from ._feed import stores_of
from ._watch import stopped

__all__ = ["KEEP_SAID", "MAX_KEEP", "EventRetention"]

log = logging.getLogger("pausepoint.server")

_LEAST_SPACING = 1.0  # seconds between two passes, however short the retention
_MOST_SPACING = 3600.0

#: the longest ``keep_events``: a century (``[retention] events_days`` takes as many days)
MAX_KEEP = timedelta(days=36_500)
KEEP_SAID = "a timedelta from a microsecond to 36500 days (about 100 years)"


class EventRetention:
    def __init__(self, ai: Pausepoint, keep: timedelta | None) -> None:
        if keep is not None and not (isinstance(keep, timedelta) and timedelta(0) < keep <= MAX_KEEP):
            raise DefinitionError(f"keep_events must be {KEEP_SAID} (or None: keep every event), not {keep!r}")
        self._ai = ai
        self.keep = keep
        self._task: asyncio.Task[None] | None = None

    @property
    def spacing(self) -> float:
        """Seconds between two passes."""
        assert self.keep is not None
        return min(max(self.keep.total_seconds() / 10, _LEAST_SPACING), _MOST_SPACING)

    def ensure_running(self) -> None:
        """Start pruning in the running loop, unless events are kept or it runs already."""
        if self.keep is None or (self._task is not None and not self._task.done()):
            return
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        task, self._task = self._task, None
        await stopped(task)

    async def prune(self) -> int:
        """One pass over every store: the events pruned (a failing store's counted as none)."""
        before = self._cutoff()
        if before is None:
            return 0
        pruned = 0
        for store in stores_of(self._ai):
            try:
                pruned += await store.prune_events(before)
            except Exception:
                log.exception("pruning %s's events failed; trying again in %gs", type(store).__name__, self.spacing)
        if pruned:
            log.info("pruned %d events from before %s", pruned, before.isoformat())
        return pruned

    def _cutoff(self) -> datetime | None:
        """The moment before which events may go: ``keep`` before now, by the app's clock; None
        when that moment is before the calendar's first day (no event is that old)."""
        assert self.keep is not None
        try:
            return self._ai.clock() - self.keep
        except OverflowError:  # datetime.min is near: every event is younger than the retention
            return None

    async def _run(self) -> None:
        while True:
            await self.prune()
            await asyncio.sleep(self.spacing)
