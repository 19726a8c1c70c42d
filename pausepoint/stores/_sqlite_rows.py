"""SQLite rows as typed tuples, and the one write-transaction helper of ``SqliteSessionStore``.

``sqlite3`` returns untyped tuples; each row shape the store reads is a ``NamedTuple`` here, so
the store converts rows to its dataclasses without casts.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, NamedTuple

from ._base import Delivery, DeliveryState, Event, SessionSummary

__all__ = ["DeliveryRow", "EventRow", "SummaryRow", "blob", "moment", "transaction", "us"]


def blob(data: bytes) -> bytearray:
    """``data`` as a statement's parameter: ``sqlite3`` binds a ``bytearray`` at once, and looks
    up an adapter for ``bytes`` first (a search that costs more than the copy)."""
    return bytearray(data)


def us(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


def moment(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1_000_000, tz=UTC)


class SummaryRow(NamedTuple):
    """A row of ``SUMMARY_COLUMNS`` (``_sqlite_log``), as SQLite returns it and an append writes it."""

    id: str
    agent: str
    owner: str | None
    version: int
    created_us: int
    updated_us: int
    pending: int
    next_expiry_us: int | None
    turn: int
    tenant: str | None

    @staticmethod
    def written(session_id: str, summary: SessionSummary, version: int) -> SummaryRow:
        """The row an append writes: ``summary`` at ``version``, for ``session_id``."""
        return SummaryRow(
            session_id,
            summary.agent,
            summary.owner,
            version,
            us(summary.created_at),
            us(summary.updated_at),
            summary.pending,
            None if summary.next_expiry is None else us(summary.next_expiry),
            summary.turn,
            summary.tenant,
        )

    def summary(self) -> SessionSummary:
        return SessionSummary(
            session_id=self.id,
            agent=self.agent,
            owner=self.owner,
            version=self.version,
            created_at=moment(self.created_us),
            updated_at=moment(self.updated_us),
            pending=self.pending,
            next_expiry=None if self.next_expiry_us is None else moment(self.next_expiry_us),
            turn=self.turn,
            tenant=self.tenant,
        )


class EventRow(NamedTuple):
    """A row of the event columns, as SQLite returns it."""

    seq: int
    id: str
    kind: str
    session_id: str
    agent: str
    at_us: int
    data: bytes

    def event(self) -> Event:
        return Event(
            id=self.id,
            kind=self.kind,
            session_id=self.session_id,
            agent=self.agent,
            at=moment(self.at_us),
            data=bytes(self.data),
            seq=self.seq,
        )


class DeliveryRow(NamedTuple):
    """A row of ``DELIVERY_COLUMNS`` (``_sqlite_outbox``; the event's columns follow the delivery's)."""

    id: int
    target: str
    state: DeliveryState
    attempts: int
    due_us: int
    updated_us: int
    last_error: str | None
    lease: str | None

    @staticmethod
    def delivery(row: Sequence[Any]) -> Delivery:
        own = DeliveryRow(*row[:8])
        return Delivery(
            id=own.id,
            target=own.target,
            event=EventRow(*row[8:]).event(),
            state=own.state,
            attempts=own.attempts,
            due_at=moment(own.due_us),
            updated_at=moment(own.updated_us),
            last_error=own.last_error,
            lease=own.lease,
        )


def transaction(conn: sqlite3.Connection) -> _Transaction:
    """One write transaction: taken at once (``IMMEDIATE``), committed, or rolled back on any
    error. It gives a cursor for its statements (``conn.execute`` makes one per statement)."""
    return _Transaction(conn.cursor())


class _Transaction:
    # A class rather than a ``contextlib.contextmanager``: entered on every append, where the
    # generator's machinery costs more than the statements' own Python.
    __slots__ = ("cursor",)

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self.cursor = cursor

    def __enter__(self) -> sqlite3.Cursor:
        self.cursor.execute("BEGIN IMMEDIATE")
        return self.cursor

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:
            try:
                self.cursor.execute("COMMIT")
                return
            except BaseException:
                self._roll_back()
                raise
        self._roll_back()

    def _roll_back(self) -> None:
        """Roll back what is left of the transaction. SQLite may have rolled it back itself (a
        full disk, an I/O error): then there is nothing to do, and the error that did it is the
        one raised, not "cannot rollback - no transaction is active"."""
        if self.cursor.connection.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self.cursor.execute("ROLLBACK")
