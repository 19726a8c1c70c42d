"""Deliveries to a webhook nobody sends any more: settled failed, never ``pending`` for ever.

A sender claims the deliveries of the webhooks its app has (``WebhookSender``). A webhook removed
from the configuration leaves its deliveries in the outbox: those failed, and those still
pending (new, or waiting out a backoff). Nothing would ever claim the pending ones: they would
read ``pending`` with no attempt for ever, and keep their events from being pruned. So every
sender also keeps, for each of its app's stores, a ``RemovedWebhooks``: it learns the names the
outbox holds that no agent on that store has, and settles a pending delivery to such a name
failed once it has been due ``removed_after`` seconds (10 minutes unless said): during a rolling
deploy that adds a webhook, the old processes do not know it while the new ones send its
deliveries as they fall due. The failed delivery's ``last_error`` names the webhook; it is
listed with ``state=failed``, and a retry is refused while no webhook of that name is
configured (``_ops.retry``, 409 ``unknown_webhook``).

The names are learned from the newest deliveries, whatever their state: the first pass reads
``_FIRST_PAGES`` pages of them, each later one the newest ``_PAGE`` (written since, by a process
of the old configuration). A listing by state is no index read in every store (Redis reads its
whole outbox for the pending ones); the newest deliveries are, and a claim by name is. A name
learned is claimed every pass, wherever its deliveries are.

Which webhooks an app sends from a store is ``webhooks_by_stream``: by event stream, as the
feed counts stores (two store objects on one SQLite file share one outbox).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from datetime import datetime, timedelta

from ..runtime._app import Pausepoint
from ..stores import SessionStore
from ..stores._base import event_stream

__all__ = ["REMOVED_AFTER", "RemovedWebhooks", "removed_webhook_error", "webhooks_by_stream"]

log = logging.getLogger("pausepoint.webhooks")

#: seconds a delivery to a webhook the app does not have stays due before it is failed
REMOVED_AFTER = 600.0
_FIRST_PAGES, _FIRST_PAGE = 20, 500  # the newest deliveries read by a sender's first pass
_PAGE = 100  # ... and by every later one


def webhooks_by_stream(ai: Pausepoint) -> dict[Hashable, frozenset[str]]:
    """The names of the webhooks ``ai``'s agents send, by the event stream of their store (every
    agent's stream is there, with no names when its agents have no webhooks)."""
    found: dict[Hashable, set[str]] = {}
    for agent in ai.agents.values():
        found.setdefault(event_stream(agent.store), set()).update(w.name for w in agent.webhooks)
    return {stream: frozenset(names) for stream, names in found.items()}


def removed_webhook_error(name: str) -> str:
    """The ``last_error`` of a delivery failed because its webhook is not configured."""
    return (
        f"no webhook named {name!r} is configured (removed from the configuration?): nothing sends this "
        "delivery; configure the webhook again, then retry it"
    )


class RemovedWebhooks:
    """Fails the deliveries of one store to webhooks its app does not have (``known``: those it
    has), once due for ``removed_after``. ``lease`` and ``batch`` are the sender's."""

    def __init__(
        self,
        store: SessionStore,
        known: frozenset[str],
        clock: Callable[[], datetime],
        *,
        removed_after: timedelta,
        lease: timedelta,
        batch: int,
    ) -> None:
        self.store = store
        self.known = known
        self.clock = clock
        self.removed_after = removed_after
        self.lease = lease
        self.batch = batch
        self.unknown: set[str] = set()  # names met in the outbox that the app does not have
        self._pages = _FIRST_PAGES  # pages of the newest deliveries the next pass reads

    async def sweep(self) -> int:
        """One pass: learn the unknown names of the newest deliveries, then fail every delivery
        to an unknown name that is overdue. Returns how many were failed."""
        await self._look()
        return await self._fail_overdue() if self.unknown else 0

    async def _look(self) -> None:
        """Note the unknown names of the newest deliveries (``_FIRST_PAGES`` pages the first
        time, one of ``_PAGE`` after)."""
        size = _PAGE if self._pages == 1 else _FIRST_PAGE
        for page in range(self._pages):
            found = await self.store.list_deliveries(limit=size, offset=page * size)
            self.unknown.update(d.target for d in found if d.target not in self.known)
            if len(found) < size:
                break
        self._pages = 1

    async def _fail_overdue(self) -> int:
        """Claim the deliveries to unknown names due for ``removed_after`` (a claim "at" that long
        ago takes those due then; its lease still ends ``lease`` from now), and settle them failed."""
        failed: dict[str, int] = {}
        while True:
            now = self.clock()
            claimed = await self.store.claim_deliveries(
                sorted(self.unknown), now - self.removed_after, self.removed_after + self.lease, self.batch
            )
            for delivery in claimed:
                if await self.store.settle_delivery(delivery, now, error=removed_webhook_error(delivery.target)):
                    failed[delivery.target] = failed.get(delivery.target, 0) + 1
            if len(claimed) < self.batch:
                break
        for name, count in sorted(failed.items()):
            log.error(
                "webhook %s is not configured here: %d deliveries to it failed (see GET "
                "/v1/ops/deliveries?state=failed&webhook=%s)",
                name,
                count,
                name,
            )
        return sum(failed.values())
