"""``InMemorySessionStore``: the log in a dict, for tests and single-process experiments."""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ..errors import VersionConflict
from ._base import DEFAULT_MAX_RECORD_BYTES, LogEntry, LogSlice, SessionSummary, check_entries

__all__ = ["InMemorySessionStore"]


@dataclass(slots=True)
class _Session:
    summary: SessionSummary
    entries: list[LogEntry] = field(default_factory=list)


class InMemorySessionStore:
    """Keeps every session in this process's memory; lost when the process exits.

    Entries are kept as the same encoded JSON a durable store would hold, so size limits and
    isolation from the caller's objects behave as on the other backends.
    """

    def __init__(self, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> None:
        self.max_record_bytes = max_record_bytes
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()

    async def append(
        self, session_id: str, expected_version: int, entries: Sequence[LogEntry], summary: SessionSummary
    ) -> int:
        check_entries(expected_version, entries, self.max_record_bytes)
        with self._lock:
            session = self._sessions.get(session_id)
            current = session.summary.version if session else 0
            if current != expected_version:
                raise VersionConflict(
                    f"session {session_id!r} is at version {current}, not {expected_version}",
                    session_id=session_id,
                    expected=expected_version,
                    actual=current,
                )
            if session is None:
                session = self._sessions[session_id] = _Session(summary)
            session.entries.extend(entries)
            session.summary = summary
            return len(session.entries)

    async def read(
        self, session_id: str, after_version: int = 0, kinds: Collection[str] | None = None
    ) -> LogSlice | None:
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            entries = session.entries[after_version:]
            if kinds is not None:
                entries = [e for e in entries if e.kind in kinds]
            return LogSlice(len(session.entries), entries)

    async def get_summary(self, session_id: str) -> SessionSummary | None:
        session = self._sessions.get(session_id)
        return session.summary if session else None

    async def list_sessions(
        self,
        *,
        owner: str | None = None,
        agent: str | None = None,
        has_pending: bool | None = None,
        expiring_before: datetime | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[SessionSummary]:
        with self._lock:
            summaries = [s.summary for s in self._sessions.values()]
        matching = [
            s
            for s in summaries
            if (owner is None or s.owner == owner)
            and (agent is None or s.agent == agent)
            and (has_pending is None or (s.pending > 0) == has_pending)
            and (expiring_before is None or (s.next_expiry is not None and s.next_expiry < expiring_before))
        ]
        matching.sort(key=lambda s: (s.updated_at, s.session_id), reverse=True)
        return matching[offset : offset + limit]

    async def delete(self, session_id: str) -> bool:
        with self._lock:
            return self._sessions.pop(session_id, None) is not None

    async def close(self) -> None:
        return None
