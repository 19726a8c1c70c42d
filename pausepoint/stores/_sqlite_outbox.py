"""The event stream and the delivery outbox of ``SqliteSessionStore``, as statements on its
connection.

An event's position is its rowid (``seq``); a delivery is a row of ``pausepoint_deliveries``
naming its event. Each function runs on the store's one connection, inside ``_run``, and takes
a write transaction where it makes more than one change. The store decides what waits for
stable storage.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Sequence
from datetime import datetime

from ._base import Delivery, DeliveryState, Event
from ._sqlite_rows import DeliveryRow, EventRow, blob, transaction, us

__all__ = [
    "DELIVERIES",
    "DELIVERY_COLUMNS",
    "add_events",
    "claim",
    "data_version",
    "last_event",
    "list_deliveries",
    "prune",
    "read_events",
    "requeue",
    "secret",
    "settle",
]

DELIVERY_COLUMNS = (
    "d.id, d.target, d.state, d.attempts, d.due_us, d.updated_us, d.last_error, d.lease, "
    "e.seq, e.id, e.kind, e.session_id, e.agent, e.at_us, e.data"
)
DELIVERIES = (
    f"SELECT {DELIVERY_COLUMNS} FROM pausepoint_deliveries AS d JOIN pausepoint_events AS e ON e.seq = d.event_seq"
)


def add_events(cur: sqlite3.Cursor, events: Sequence[Event], due_us: int) -> None:
    """Add ``events`` to the stream and a pending delivery, due at ``due_us``, for each of their
    targets; part of an append's transaction."""
    for event in events:
        seq = cur.execute(
            "INSERT INTO pausepoint_events (id, kind, session_id, agent, at_us, data) VALUES (?, ?, ?, ?, ?, ?)",
            (event.id, event.kind, event.session_id, event.agent, us(event.at), blob(event.data)),
        ).lastrowid
        if event.targets:
            cur.executemany(
                "INSERT INTO pausepoint_deliveries (event_seq, target, state, attempts, due_us, "
                "updated_us) VALUES (?, ?, 'pending', 0, ?, ?)",
                [(seq, target, due_us, due_us) for target in event.targets],
            )


def read_events(conn: sqlite3.Connection, after: int, limit: int) -> list[Event]:
    rows = conn.execute(
        "SELECT seq, id, kind, session_id, agent, at_us, data FROM pausepoint_events WHERE seq > ? "
        "ORDER BY seq LIMIT ?",
        (after, limit),
    ).fetchall()
    return [EventRow(*r).event() for r in rows]


def last_event(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT max(seq) FROM pausepoint_events").fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


def secret(conn: sqlite3.Connection) -> bytes:
    """The file's secret (``StoreSecret``), made by the first process that asks for it."""
    conn.execute("INSERT OR IGNORE INTO pausepoint_meta VALUES ('secret', ?)", (secrets.token_hex(32),))
    row = conn.execute("SELECT value FROM pausepoint_meta WHERE key = 'secret'").fetchone()
    return bytes.fromhex(row[0])


def data_version(conn: sqlite3.Connection) -> int:
    """A number that changes when another connection commits to the file: cheap to poll, no I/O."""
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def claim(
    conn: sqlite3.Connection, targets: Sequence[str], now: datetime, lease_end: datetime, limit: int, token: str
) -> list[Delivery]:
    """Lease up to ``limit`` deliveries due at ``now`` to ``targets`` until ``lease_end``, under
    ``token``; the deliveries leased."""
    marks = ", ".join("?" * len(targets))
    with transaction(conn):
        conn.execute(
            "UPDATE pausepoint_deliveries SET due_us = ?, lease = ? WHERE id IN (SELECT id FROM "
            f"pausepoint_deliveries WHERE state = 'pending' AND target IN ({marks}) AND due_us <= ? "
            "ORDER BY due_us, id LIMIT ?)",
            (us(lease_end), token, *targets, us(now), limit),
        )
        rows = conn.execute(DELIVERIES + " WHERE d.lease = ? ORDER BY d.id", (token,)).fetchall()
    return [DeliveryRow.delivery(r) for r in rows]


def settle(
    conn: sqlite3.Connection, delivery: Delivery, state: str, due_us: int | None, now: datetime, error: str | None
) -> bool:
    """Settle a delivery still leased under its token; whether it was."""
    return (
        conn.execute(
            "UPDATE pausepoint_deliveries SET state = ?, attempts = attempts + 1, "
            "due_us = coalesce(?, due_us), updated_us = ?, last_error = ?, lease = NULL "
            "WHERE id = ? AND lease = ? AND state = 'pending'",
            (state, due_us, us(now), error, delivery.id, delivery.lease),
        ).rowcount
        == 1
    )


def list_deliveries(
    conn: sqlite3.Connection, state: DeliveryState | None, target: str | None, limit: int, offset: int
) -> list[Delivery]:
    where: list[str] = []
    args: list[object] = []
    if state is not None:
        where.append("d.state = ?")
        args.append(state)
    if target is not None:
        where.append("d.target = ?")
        args.append(target)
    sql = DELIVERIES + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY d.id DESC LIMIT ? OFFSET ?"
    return [DeliveryRow.delivery(r) for r in conn.execute(sql, (*args, limit, offset)).fetchall()]


def requeue(conn: sqlite3.Connection, delivery_id: int, now: datetime) -> bool:
    """Make a failed delivery pending again, due at ``now``; whether it was failed."""
    return (
        conn.execute(
            "UPDATE pausepoint_deliveries SET state = 'pending', attempts = 0, due_us = ?, updated_us = ?, "
            "lease = NULL WHERE id = ? AND state = 'failed'",
            (us(now), us(now), delivery_id),
        ).rowcount
        == 1
    )


def prune(conn: sqlite3.Connection, before: datetime) -> int:
    """Delete the events older than ``before`` that no undelivered delivery names, with their
    delivered deliveries, keeping the latest event (so a position is never handed out twice);
    how many events went."""
    # Set-based: each subquery is read once into a temporary index (NOT IN / IN), where a
    # correlated NOT EXISTS scanned the deliveries (no index by event) once per event.
    with transaction(conn):
        conn.execute(
            "DELETE FROM pausepoint_deliveries WHERE state = 'delivered' AND event_seq IN "
            "(SELECT seq FROM pausepoint_events WHERE at_us < ?)",
            (us(before),),
        )
        gone = conn.execute(
            "DELETE FROM pausepoint_events WHERE at_us < ? "
            "AND seq NOT IN (SELECT event_seq FROM pausepoint_deliveries) "
            "AND seq < (SELECT max(seq) FROM pausepoint_events)",
            (us(before),),
        ).rowcount
    return int(gone)
