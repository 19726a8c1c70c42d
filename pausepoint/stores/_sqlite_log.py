"""Sessions and their logs in ``SqliteSessionStore``, as statements on its connection: the
conditional append, reads, summaries, listings and deletion.

A session is a row of ``pausepoint_sessions`` (its summary, its version, and its number ``n``);
its records are rows of ``pausepoint_records`` under the key ``(n << VERSION_BITS) + version``,
so a session's log is one run of the table (``_sqlite_schema``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from ..errors import StoreError, VersionConflict
from ._base import Event, LogEntry, LogSlice, SessionSummary, version_conflict
from ._sqlite_checkpoints import drop, files_of
from ._sqlite_outbox import add_events
from ._sqlite_rows import SummaryRow, blob, transaction, us
from ._sqlite_schema import MAX_SESSION_NUMBER, MAX_VERSION, VERSION_BITS

__all__ = ["SUMMARY_COLUMNS", "append", "check_capacity", "delete", "get_summary", "list_sessions", "read"]

SUMMARY_COLUMNS = "id, agent, owner, version, created_us, updated_us, pending, next_expiry_us, turn, tenant"


def check_capacity(session_id: str, new_version: int) -> None:
    """Raise ``StoreError`` for an append that would take a session past the records it may hold."""
    if new_version > MAX_VERSION:
        raise StoreError(
            f"session {session_id!r} would hold {new_version} records; a SQLite store keeps at most "
            f"{MAX_VERSION:,} a session"
        )


def append(
    conn: sqlite3.Connection,
    expected_version: int,
    row: SummaryRow,
    entries: Sequence[LogEntry],
    events: Sequence[Event],
    path: str,
    known: int | None = None,
) -> int:
    """The conditional append, in one write transaction: the session's version is checked and
    moved to ``row``'s under the write lock, then its records and events are added. ``known``
    is the session's number as an earlier append found it, if any (see ``_advance``). Returns
    the session's number.

    Raises ``VersionConflict`` if the session is not at ``expected_version``."""
    with transaction(conn) as cur:
        n = _create(cur, row, path) if expected_version == 0 else _advance(cur, expected_version, row, known)
        first = n << VERSION_BITS
        cur.executemany(
            "INSERT INTO pausepoint_records (key, kind, data) VALUES (?, ?, ?)",
            [(first + e.version, e.kind, blob(e.data)) for e in entries],
        )
        add_events(cur, events, row.updated_us)
    return n


def _create(cur: sqlite3.Cursor, row: SummaryRow, path: str) -> int:
    """Add the session's row; the number it was given."""
    try:
        n = cur.execute(
            f"INSERT INTO pausepoint_sessions ({SUMMARY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row
        ).lastrowid
    except sqlite3.IntegrityError:
        raise _conflict(cur, row.id, 0) from None
    if n is None or n > MAX_SESSION_NUMBER:
        raise StoreError(
            f"{path} has numbered {MAX_SESSION_NUMBER:,} sessions, the most a SQLite file numbers: start another file"
        )
    return n


_ADVANCE = (
    "UPDATE pausepoint_sessions SET agent = ?, owner = ?, version = ?, created_us = ?, "
    "updated_us = ?, pending = ?, next_expiry_us = ?, turn = ?, tenant = ? WHERE n = ?"
)


def _advance(cur: sqlite3.Cursor, expected_version: int, row: SummaryRow, known: int | None) -> int:
    """Move the session's row from ``expected_version`` to ``row``; the session's number.

    With the number an earlier append found (``known``), one statement does it when the row
    numbered so is still the session's and at ``expected_version``; otherwise (the session was
    deleted, made anew or moved on meanwhile) the row is looked up by the session's id."""
    if known is not None:
        moved = cur.execute(_ADVANCE + " AND id = ? AND version = ?", (*row[1:], known, row.id, expected_version))
        if moved.rowcount == 1:
            return known
    found = cur.execute("SELECT n, version FROM pausepoint_sessions WHERE id = ?", (row.id,)).fetchone()
    if found is None or found[1] != expected_version:
        raise version_conflict(row.id, expected_version, found[1] if found else 0)
    n: int = found[0]
    cur.execute(_ADVANCE, (*row[1:], n))
    return n


def _conflict(cur: sqlite3.Cursor, session_id: str, expected_version: int) -> VersionConflict:
    row = cur.execute("SELECT version FROM pausepoint_sessions WHERE id = ?", (session_id,)).fetchone()
    return version_conflict(session_id, expected_version, row[0] if row else 0)


def read(conn: sqlite3.Connection, session_id: str, after_version: int) -> LogSlice | None:
    # One statement, so the session's version and its records come from one snapshot.
    rows = conn.execute(
        "SELECT s.version, r.key, r.kind, r.data FROM pausepoint_sessions AS s "
        "LEFT JOIN pausepoint_records AS r ON r.key > (s.n << ?1) + ?2 AND r.key <= (s.n << ?1) + ?3 "
        "WHERE s.id = ?4 ORDER BY r.key",
        (VERSION_BITS, max(after_version, 0), MAX_VERSION, session_id),
    ).fetchall()
    if not rows:
        return None
    entries = [LogEntry(key & MAX_VERSION, k, bytes(d)) for _, key, k, d in rows if key is not None]
    return LogSlice(rows[0][0], entries)


def get_summary(conn: sqlite3.Connection, session_id: str) -> SessionSummary | None:
    row = conn.execute(f"SELECT {SUMMARY_COLUMNS} FROM pausepoint_sessions WHERE id = ?", (session_id,)).fetchone()
    return None if row is None else SummaryRow(*row).summary()


def list_sessions(
    conn: sqlite3.Connection,
    owner: str | None,
    agent: str | None,
    has_pending: bool | None,
    expiring_before: datetime | None,
    limit: int,
    offset: int,
    tenant: str | None = None,
) -> list[SessionSummary]:
    where: list[str] = []
    args: list[object] = []
    if owner is not None:
        where.append("owner = ?")
        args.append(owner)
    if tenant is not None:
        where.append("tenant = ?")
        args.append(tenant)
    if agent is not None:
        where.append("agent = ?")
        args.append(agent)
    if has_pending is not None:
        where.append("pending > 0" if has_pending else "pending = 0")
    if expiring_before is not None:
        where.append("next_expiry_us < ?")
        args.append(us(expiring_before))
    sql = f"SELECT {SUMMARY_COLUMNS} FROM pausepoint_sessions"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY updated_us DESC, id DESC LIMIT ? OFFSET ?"
    args += [limit, offset]
    return [SummaryRow(*r).summary() for r in conn.execute(sql, args).fetchall()]


def delete(conn: sqlite3.Connection, session_id: str) -> tuple[bool, list[str]]:
    """Delete the session, its log and its checkpoint, in one transaction: whether it existed,
    and the checkpoint files its rows named (for the store to remove)."""
    with transaction(conn):
        named = files_of(conn, session_id)
        numbered = conn.execute("SELECT n FROM pausepoint_sessions WHERE id = ?", (session_id,)).fetchone()
        if numbered is not None:
            conn.execute(
                "DELETE FROM pausepoint_records WHERE key BETWEEN ?1 AND ?1 + ?2",
                (numbered[0] << VERSION_BITS, MAX_VERSION),
            )
        drop(conn, session_id)
        gone = conn.execute("DELETE FROM pausepoint_sessions WHERE id = ?", (session_id,)).rowcount
    return gone > 0, named
