"""The session store contract: an append-only log per session with a conditional append.

A store never interprets records: it keeps opaque JSON ``data`` with its ``kind`` and version,
plus a small ``SessionSummary`` the runtime computes at each append, so listings (an approval
inbox, an owner's sessions, the sessions whose pauses expire soon) need no JSON parsing.
Every backend passes the conformance suite in ``tests/stores``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from ..errors import PayloadTooLarge

__all__ = [
    "DEFAULT_MAX_RECORD_BYTES",
    "LogEntry",
    "LogSlice",
    "SessionStore",
    "SessionSummary",
    "check_entries",
]

DEFAULT_MAX_RECORD_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One record of a session's log: its 1-based position, its kind, its JSON."""

    version: int
    kind: str
    data: bytes


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """What listings need to know about a session, written atomically with each append."""

    session_id: str
    agent: str
    owner: str | None
    version: int
    created_at: datetime
    updated_at: datetime
    pending: int = 0
    next_expiry: datetime | None = None
    turn: int = 0


@dataclass(frozen=True, slots=True)
class LogSlice:
    """The entries after some version, and the session's version when they were read."""

    version: int
    entries: list[LogEntry]


@runtime_checkable
class SessionStore(Protocol):
    """An append-only log per session. Implementations must make ``append`` atomic."""

    max_record_bytes: int

    async def append(
        self, session_id: str, expected_version: int, entries: Sequence[LogEntry], summary: SessionSummary
    ) -> int:
        """Append ``entries`` if the session is at ``expected_version`` (0: it must not exist yet).

        Entries carry versions ``expected_version + 1`` onwards. Returns the new version.
        Raises ``VersionConflict`` (nothing written) when the session is at another version,
        ``PayloadTooLarge`` when an entry exceeds ``max_record_bytes``.
        """
        ...

    async def read(
        self, session_id: str, after_version: int = 0, kinds: Collection[str] | None = None
    ) -> LogSlice | None:
        """The entries after ``after_version`` (only of ``kinds`` when given); None if no such session."""
        ...

    async def get_summary(self, session_id: str) -> SessionSummary | None:
        """The session's summary, or None."""
        ...

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
        """Summaries matching every given filter, most recently updated first."""
        ...

    async def delete(self, session_id: str) -> bool:
        """Remove a session and its log; True if it existed."""
        ...

    async def close(self) -> None:
        """Release connections. The store may not be used afterwards."""
        ...


def check_entries(expected_version: int, entries: Sequence[LogEntry], max_record_bytes: int) -> None:
    """Shared argument checks for ``append``: consecutive versions, sizes within the limit."""
    if not entries:
        raise ValueError("append needs at least one entry")
    for offset, entry in enumerate(entries, start=1):
        if entry.version != expected_version + offset:
            raise ValueError(f"entry versions must follow {expected_version} consecutively")
        if len(entry.data) > max_record_bytes:
            raise PayloadTooLarge(
                f"a {entry.kind!r} record of {len(entry.data)} bytes exceeds the store's limit of "
                f"{max_record_bytes} bytes",
                size=len(entry.data),
                limit=max_record_bytes,
            )
