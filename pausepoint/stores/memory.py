"""``InMemorySessionStore``: the log in a dict, for tests and single-process experiments."""

from __future__ import annotations

import bisect
import dataclasses
import operator
import secrets
import threading
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeAlias

from ._base import (
    DEFAULT_MAX_RECORD_BYTES,
    Delivery,
    DeliveryState,
    Event,
    LogEntry,
    LogSlice,
    SessionSummary,
    check_entries,
    version_conflict,
)
from ._signal import Signal, wait_after

__all__ = ["InMemorySessionStore"]


# A record, a summary and an event as the store keeps them: tuples of numbers, strings, bytes
# and times, which Python's garbage collector stops tracking. So a full collection, which
# pauses every request in flight, walks one list per session of what the store holds (kept as
# the objects it is given, a banking cycle's 12 records and 6 events would be 18 more).
_Record: TypeAlias = tuple[int, str, bytes]  # version, kind, data
_Summary: TypeAlias = tuple[Any, ...]  # SessionSummary's fields, in order
_Kept: TypeAlias = tuple[int, str, str, str, str, datetime, bytes]  # seq, id, kind, session, agent, at, data
_summary_fields = operator.attrgetter(*(f.name for f in dataclasses.fields(SessionSummary)))


class InMemorySessionStore:
    """Keeps every session in this process's memory; lost when the process exits.

    Entries are kept as the same encoded JSON a durable store would hold, so size limits and
    isolation from the caller's objects behave as on the other backends. The event stream keeps
    (at least) the latest ``keep_events`` events; deliveries keep their own. What it holds is kept
    out of the garbage collector's sight (one object per session, not one per record), so a
    server whose store grows does not pause longer at each full collection.

    It keeps no checkpoints (it is no ``CheckpointStore``): a session it holds lives in the
    process that serves it, where the agent keeps its state warm, and a new agent in the same
    process folds the log in memory. Checkpoints would only cost that warm session their writes.
    """

    def __init__(self, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES, keep_events: int = 10_000) -> None:
        self.max_record_bytes = max_record_bytes
        self.keep_events = keep_events
        self._records: dict[str, list[_Record]] = {}
        self._summaries: dict[str, _Summary] = {}
        self._lock = threading.Lock()
        self._events: list[_Kept] = []
        self._deliveries: dict[int, Delivery] = {}
        self._event_seq = 0
        self._secret = secrets.token_bytes(32)
        self._delivery_seq = 0
        self._signal = Signal()

    async def append(
        self,
        session_id: str,
        expected_version: int,
        entries: Sequence[LogEntry],
        summary: SessionSummary,
        events: Sequence[Event] = (),
        *,
        durable: bool = True,  # nothing here outlives the process: every append is as durable as any
    ) -> int:
        check_entries(expected_version, entries, self.max_record_bytes, events)
        with self._lock:
            records = self._records.get(session_id)
            current = len(records) if records is not None else 0
            if current != expected_version:
                raise version_conflict(session_id, expected_version, current)
            if records is None:
                records = self._records[session_id] = []
            records.extend((e.version, e.kind, e.data) for e in entries)
            self._summaries[session_id] = _summary_fields(summary)
            for event in events:
                self._event_seq += 1
                kept = (self._event_seq, event.id, event.kind, event.session_id, event.agent, event.at, event.data)
                self._events.append(kept)
                for target in event.targets:
                    self._delivery_seq += 1
                    number = self._delivery_seq
                    self._deliveries[number] = Delivery(
                        number, target, _event(kept), "pending", 0, summary.updated_at, summary.updated_at
                    )
            version = len(records)
            if len(self._events) > 2 * self.keep_events:  # the stream keeps the latest; trimmed in bulk
                del self._events[: len(self._events) - self.keep_events]
        if events:
            self._signal.fire()
        return version

    async def read(self, session_id: str, after_version: int = 0) -> LogSlice | None:
        with self._lock:
            records = self._records.get(session_id)
            if records is None:
                return None
            return LogSlice(len(records), [LogEntry(*record) for record in records[max(after_version, 0) :]])

    async def get_summary(self, session_id: str) -> SessionSummary | None:
        kept = self._summaries.get(session_id)
        return SessionSummary(*kept) if kept is not None else None

    async def list_sessions(
        self,
        *,
        owner: str | None = None,
        agent: str | None = None,
        has_pending: bool | None = None,
        expiring_before: datetime | None = None,
        limit: int = 100,
        offset: int = 0,
        tenant: str | None = None,
    ) -> list[SessionSummary]:
        with self._lock:
            summaries = [SessionSummary(*kept) for kept in self._summaries.values()]
        matching = [
            s
            for s in summaries
            if (owner is None or s.owner == owner)
            and (tenant is None or s.tenant == tenant)
            and (agent is None or s.agent == agent)
            and (has_pending is None or (s.pending > 0) == has_pending)
            and (expiring_before is None or (s.next_expiry is not None and s.next_expiry < expiring_before))
        ]
        matching.sort(key=lambda s: (s.updated_at, s.session_id), reverse=True)
        return matching[offset : offset + limit]

    async def delete(self, session_id: str) -> bool:
        with self._lock:
            self._summaries.pop(session_id, None)
            return self._records.pop(session_id, None) is not None

    async def close(self) -> None:
        return None

    # -- the event stream and the outbox --------------------------------------------------------

    async def read_events(self, after: int = 0, limit: int = 100) -> list[Event]:
        with self._lock:
            start = bisect.bisect_right(self._events, after, key=lambda e: e[0])
            return [_event(kept) for kept in self._events[start : start + limit]]

    async def last_event(self) -> int:
        return self._event_seq

    async def secret(self) -> bytes:
        return self._secret

    async def wait_for_events(self, after: int, max_wait: float) -> None:
        await wait_after(self._signal, after, max_wait, self.last_event)

    async def claim_deliveries(
        self, targets: Collection[str], now: datetime, lease: timedelta, limit: int = 50
    ) -> list[Delivery]:
        wanted = set(targets)
        token = secrets.token_hex(8)
        with self._lock:
            due = sorted(
                (
                    d
                    for d in self._deliveries.values()
                    if d.state == "pending" and d.target in wanted and d.due_at <= now
                ),
                key=lambda d: (d.due_at, d.id),
            )[:limit]
            claimed = [dataclasses.replace(d, due_at=now + lease, lease=token) for d in due]
            for delivery in claimed:
                self._deliveries[delivery.id] = delivery
            return claimed

    async def settle_delivery(
        self, delivery: Delivery, now: datetime, *, error: str | None = None, retry_at: datetime | None = None
    ) -> bool:
        with self._lock:
            current = self._deliveries.get(delivery.id)
            if current is None or current.state != "pending" or current.lease != delivery.lease:
                return False
            state: DeliveryState = "delivered" if error is None else ("pending" if retry_at is not None else "failed")
            self._deliveries[delivery.id] = dataclasses.replace(
                current,
                state=state,
                attempts=current.attempts + 1,
                due_at=retry_at if state == "pending" and retry_at is not None else current.due_at,
                updated_at=now,
                last_error=error,
                lease=None,
            )
            return True

    async def list_deliveries(
        self, *, state: DeliveryState | None = None, target: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[Delivery]:
        with self._lock:
            found = [
                d
                for d in reversed(self._deliveries.values())
                if (state is None or d.state == state) and (target is None or d.target == target)
            ]
        return found[offset : offset + limit]

    async def requeue_delivery(self, delivery_id: int, now: datetime) -> bool:
        with self._lock:
            current = self._deliveries.get(delivery_id)
            if current is None or current.state != "failed":
                return False
            self._deliveries[delivery_id] = dataclasses.replace(
                current, state="pending", attempts=0, due_at=now, updated_at=now, lease=None
            )
            return True

    async def prune_events(self, before: datetime) -> int:
        with self._lock:
            held = {d.event.seq for d in self._deliveries.values() if d.state != "delivered"}
            gone = {seq for seq, _, _, _, _, at, _ in self._events if at < before and seq not in held}
            self._events = [kept for kept in self._events if kept[0] not in gone]
            self._deliveries = {k: d for k, d in self._deliveries.items() if d.event.seq not in gone}
            return len(gone)


def _event(kept: _Kept) -> Event:
    seq, event_id, kind, session_id, agent, at, data = kept
    return Event(event_id, kind, session_id, agent, at, data, (), seq)
