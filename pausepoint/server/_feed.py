"""The SSE feed: the pauses, answers and turn ends of every process, resumable by event id.

The feed follows each store's event stream (``SessionStore.read_events``), the events every
append writes in its own transaction, so it sees what any process did, in the order the store
gives, and nothing that was not written. It learns of new events through the store's
``wait_for_events``: PostgreSQL ``LISTEN/NOTIFY`` and Redis pub/sub wake it at once; SQLite is
checked every 50 ms (a change counter, no query); ``interval`` bounds every wait. The store is
asked once for every follower in the process (``_watch``), however many feeds are open.

Every SSE event carries an ``id``: the stream positions after it (one per store, dot-joined),
each sealed with its store's secret (``_feed_ids``: a position counts every tenant's events).
A client that reconnects with ``Last-Event-ID`` gets exactly the events it missed (while the
store still keeps them: see ``prune_events``); without it the feed starts from now (read the
inbox for what was already waiting)::

    id: 3f0c…   event: pause     data: {"id", "type": "pause", "agent", "session_id", "owner", "tenant", "interrupt"}
    id: 91a2…   event: answer    data: {... "type": "answer" or "expiry", "entry": AuditEntry}
    (each interrupt and entry with its ``view``, as everywhere in the REST API)
    id: 07be…   event: turn_end  data: {... "turn", "finish_reason", "open_refs", "error"}

A subscriber sees only the sessions its principal may view (with tenants: its tenant's, by the
session's tenant in its summary; an operator's, every tenant's it may view).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable, Hashable
from dataclasses import dataclass, replace

from ..errors import InvalidRequest
from ..runtime._app import Pausepoint
from ..stores import Event, SessionStore, SessionSummary
from ..stores._base import event_stream
from ..turn._events import event_body
from ._feed_ids import IdSeal, seal_of
from ._turns import event as sse_event
from ._watch import StoreWatch, first_of

__all__ = ["Feed", "stores_of"]

log = logging.getLogger("pausepoint.server")

_PAGE = 200
_SUMMARIES = 1000
_FRAMES = 1000
# The SSE event name of each kind: an expiry is an answer the policy gave (its body says which).
_NAMES = {"pause": "pause", "answer": "answer", "expiry": "answer", "turn_end": "turn_end"}


@dataclass(frozen=True, slots=True)
class _Frame:
    """An event as the feed sends it, and whose session it was when it was recorded."""

    frame: bytes
    owner: str | None
    tenant: str | None


def _as_recorded(summary: SessionSummary, made: _Frame) -> SessionSummary:
    """``summary`` with the owner and tenant the event recorded: a session deleted and made again
    under its id by someone else is another session, and each event is seen by whoever may see
    the session it was recorded in, not by the first owner this feed read (found by a probe)."""
    if (summary.owner, summary.tenant) == (made.owner, made.tenant):
        return summary
    return replace(summary, owner=made.owner, tenant=made.tenant)


class Feed:
    def __init__(self, ai: Pausepoint, *, interval: float = 1.0) -> None:
        self.ai = ai
        self.interval = interval
        self.stores = stores_of(ai)
        self._watches = [StoreWatch(store, interval) for store in self.stores]
        # Shared by every follower: how an event reads, and a session's summary (who may see it is
        # judged by its owner and tenant as each event recorded them: ``_as_recorded``).
        self._summaries: OrderedDict[tuple[int, str], SessionSummary | None] = OrderedDict()
        self._frames: OrderedDict[tuple[int, int], _Frame | None] = OrderedDict()
        self._seals: list[IdSeal] | None = None  # each store's, read once (``_feed_ids``)

    def notify(self, agent: str, session_id: str) -> None:
        """Kept for callers of the polling feed: the stores now wake the feed themselves."""

    async def start(self, last_event_id: str | None) -> list[int]:
        """The positions to follow from: after ``last_event_id``, or from now."""
        seals = await self._sealed()
        if last_event_id is None:
            return [await store.last_event() for store in self.stores]
        parts = last_event_id.strip().split(".")
        if len(parts) != len(self.stores):
            raise InvalidRequest(
                f"Last-Event-ID {last_event_id!r} holds {len(parts)} position(s); this feed follows "
                f"{len(self.stores)} store(s) now, one position each (an id from before the server's agents or "
                "stores changed is none of its ids): reconnect without it to follow from now",
                last_event_id=last_event_id,
            )
        positions = []
        for part, seal, store in zip(parts, seals, self.stores, strict=True):
            position = seal.open(part)
            # One refusal, whatever the reason (made up, from another store, from before the store
            # was reset): how it fails tells nothing of the stream
            if position is None or position > await store.last_event():
                raise InvalidRequest(
                    f"Last-Event-ID {last_event_id!r} is no id this feed has sent: reconnect without it to "
                    "follow from now",
                    last_event_id=last_event_id,
                )
            positions.append(position)
        return positions

    async def _sealed(self) -> list[IdSeal]:
        if self._seals is None:
            self._seals = [await seal_of(store) for store in self.stores]
        return self._seals

    async def follow(
        self, positions: list[int], visible: Callable[[SessionSummary], bool]
    ) -> AsyncGenerator[tuple[str, bytes], None]:
        """``(id, frame)`` for every visible event after ``positions``, as they come: its SSE
        ``event:`` and ``data:`` lines, made once for every follower."""
        positions = list(positions)
        seals = await self._sealed()
        while True:
            quiet = True
            for index, watch in enumerate(self._watches):
                events = await watch.read(positions[index], _PAGE)  # once for every follower there
                for event in events:
                    positions[index] = event.seq
                    if event.agent not in self.ai.agents:
                        continue  # another app's agent sharing the store
                    summary = await self._summary(index, event.session_id)
                    if summary is None:
                        continue  # a session deleted since: nobody's
                    made = self._frame(index, event)
                    if made is None or not visible(_as_recorded(summary, made)):
                        continue
                    yield ".".join(seal.seal(p) for seal, p in zip(seals, positions, strict=True)), made.frame
                quiet = quiet and len(events) < _PAGE
            if quiet:
                await self._wait(positions)

    def _frame(self, index: int, event: Event) -> _Frame | None:
        """The event as the feed sends it, its name and body, and whose session it was when it
        was recorded (made once for every follower); None for one this version cannot read."""
        key = (index, event.seq)
        if key in self._frames:
            return self._frames[key]
        frame: _Frame | None
        try:
            body = event_body(event, self.ai.agents[event.agent].view)
            frame = _Frame(sse_event(_NAMES.get(event.kind, event.kind), body), body["owner"], body["tenant"])
        except ValueError:  # pragma: no cover - written by a newer pausepoint
            log.warning("the feed skipped event %s, which it cannot read", event.id)
            frame = None
        self._frames[key] = frame
        if len(self._frames) > _FRAMES:
            self._frames.popitem(last=False)
        return frame

    async def _wait(self, positions: list[int]) -> None:
        # One watch of each store for every follower (``_watch``): idle feeds cost one poll.
        if len(self._watches) == 1:
            await self._watches[0].wait(positions[0], self.interval)
            return
        pairs = zip(self._watches, positions, strict=True)
        await first_of([watch.wait(position, self.interval) for watch, position in pairs])

    async def _summary(self, index: int, session_id: str) -> SessionSummary | None:
        # Who may see a session (its agent, its owner) does not change: one read per session,
        # for every follower.
        key = (index, session_id)
        cache = self._summaries
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
        summary = await self.stores[index].get_summary(session_id)
        if summary is not None:  # one gone (deleted) may be made again under its id: asked again
            cache[key] = summary
            if len(cache) > _SUMMARIES:
                cache.popitem(last=False)
        return summary

    async def close(self) -> None:
        return None


def stores_of(ai: Pausepoint) -> list[SessionStore]:
    """The app's distinct stores, in the order of its agents: one per event stream, so store
    objects on one SQLite file or PostgreSQL schema count once (``stores.event_stream``)."""
    found: dict[Hashable, SessionStore] = {}
    for agent in ai.agents.values():
        found.setdefault(event_stream(agent.store), agent.store)
    return list(found.values())
