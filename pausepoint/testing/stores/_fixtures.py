"""What the suite's tests are made of: the ``store`` fixture, summaries and entries to write, and
the moments they are stamped with."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest

from ...stores import LogEntry, SessionStore, SessionSummary

__all__ = ["DEFAULT_MAX_RECORD_BYTES", "T0", "OpenStore", "at", "entries", "ids", "put", "store", "summary"]

OpenStore = Callable[..., Awaitable[SessionStore]]

DEFAULT_MAX_RECORD_BYTES = 1024 * 1024  # the documented default of every store

T0 = datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def summary(
    session_id: str,
    version: int,
    *,
    agent: str = "bankingAgent",
    owner: str | None = "alice",
    updated: float = 0,
    pending: int = 0,
    expiry: float | None = None,
    turn: int = 1,
    tenant: str | None = None,
) -> SessionSummary:
    return SessionSummary(
        session_id=session_id,
        agent=agent,
        owner=owner,
        version=version,
        created_at=T0,
        updated_at=at(updated),
        pending=pending,
        next_expiry=None if expiry is None else at(expiry),
        turn=turn,
        tenant=tenant,
    )


def entries(after: int, count: int, kind: str = "message") -> list[LogEntry]:
    return [LogEntry(after + i, kind, b'{"n": %d}' % (after + i)) for i in range(1, count + 1)]


async def put(store: SessionStore, s: SessionSummary, count: int = 1) -> None:
    """Create session ``s.session_id`` with ``count`` entries and summary ``s``."""
    await store.append(s.session_id, 0, entries(0, count), s)


def ids(summaries: list[SessionSummary]) -> list[str]:
    return [s.session_id for s in summaries]


@pytest.fixture
async def store(open_store: OpenStore) -> AsyncIterator[SessionStore]:
    """A store on the test's place, closed at the end."""
    made = await open_store()
    yield made
    await made.close()
