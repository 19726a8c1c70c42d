"""``SqliteSessionStore``: the embedded durable default — one file, WAL, safe across processes.

Calls run inline on the event loop: each is a few indexed statements on a local file, cheaper
than a hop to a worker thread. The connection never waits on SQLite's busy handler (which
would block the loop); a write that finds the file locked by another process backs off with
``asyncio.sleep`` and tries again until ``busy_timeout`` seconds have passed.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime
from typing import Literal, TypeVar

from ..errors import SchemaVersionError, StoreError, VersionConflict
from ._base import DEFAULT_MAX_RECORD_BYTES, LogEntry, LogSlice, SessionSummary, check_entries

__all__ = ["SqliteSessionStore"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pausepoint_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pausepoint_sessions (
    id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    owner TEXT,
    version INTEGER NOT NULL,
    created_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL,
    pending INTEGER NOT NULL,
    next_expiry_us INTEGER,
    turn INTEGER NOT NULL
);
-- Partial indexes only: every append rewrites updated_us, and each index that holds it is
-- another page written per commit. Sessions without an owner, pauses or expiry cost none.
CREATE INDEX IF NOT EXISTS pausepoint_sessions_owner ON pausepoint_sessions (owner, updated_us)
    WHERE owner IS NOT NULL;
CREATE INDEX IF NOT EXISTS pausepoint_sessions_pending ON pausepoint_sessions (updated_us)
    WHERE pending > 0;
CREATE INDEX IF NOT EXISTS pausepoint_sessions_expiry ON pausepoint_sessions (next_expiry_us)
    WHERE next_expiry_us IS NOT NULL;
CREATE TABLE IF NOT EXISTS pausepoint_records (
    session_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    kind TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (session_id, version)
);
"""

_SUMMARY_COLUMNS = "id, agent, owner, version, created_us, updated_us, pending, next_expiry_us, turn"

T = TypeVar("T")


def _us(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


def _moment(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1_000_000, tz=UTC)


def _summary(row: tuple[object, ...]) -> SessionSummary:
    sid, agent, owner, version, created, updated, pending, expiry, turn = row
    return SessionSummary(
        session_id=str(sid),
        agent=str(agent),
        owner=owner if owner is None else str(owner),
        version=int(version),  # type: ignore[call-overload]
        created_at=_moment(int(created)),  # type: ignore[call-overload]
        updated_at=_moment(int(updated)),  # type: ignore[call-overload]
        pending=int(pending),  # type: ignore[call-overload]
        next_expiry=None if expiry is None else _moment(int(expiry)),  # type: ignore[call-overload]
        turn=int(turn),  # type: ignore[call-overload]
    )


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


class SqliteSessionStore:
    """Sessions in one SQLite file in WAL mode; several processes may share the file.

    ``synchronous`` is SQLite's durability setting: ``"NORMAL"`` (default) survives a crash of
    any process; ``"FULL"`` also survives power loss, at the cost of an fsync per commit.
    Raises ``SchemaVersionError`` on first use if the file holds a newer schema.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout: float = 30.0,
    ) -> None:
        self.path = os.fspath(path)
        self.max_record_bytes = max_record_bytes
        self._synchronous = synchronous
        self._busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None

    # -- connection ---------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=0)
        conn.execute("PRAGMA busy_timeout = 0")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        return conn

    def _create_schema(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            row = conn.execute("SELECT value FROM pausepoint_meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                conn.execute("INSERT INTO pausepoint_meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif row[0] != str(SCHEMA_VERSION):
                raise SchemaVersionError(
                    f"{self.path} holds pausepoint schema version {row[0]}; this version of pausepoint "
                    f"uses version {SCHEMA_VERSION}",
                    found=row[0],
                    expected=SCHEMA_VERSION,
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    async def _run(self, op: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``op`` on the connection, backing off asynchronously while another process writes."""
        deadline = time.monotonic() + self._busy_timeout
        delay = 0.0005
        while True:
            try:
                if self._conn is None:
                    conn = self._connect()
                    try:
                        self._create_schema(conn)
                    except BaseException:
                        conn.close()
                        raise
                    self._conn = conn
                return op(self._conn)
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise StoreError(f"SQLite error on {self.path}: {exc}") from exc
                if time.monotonic() > deadline:
                    raise StoreError(f"{self.path} stayed locked for {self._busy_timeout}s") from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.05)

    # -- the contract -------------------------------------------------------------------------

    async def append(
        self, session_id: str, expected_version: int, entries: Sequence[LogEntry], summary: SessionSummary
    ) -> int:
        check_entries(expected_version, entries, self.max_record_bytes)
        new_version = expected_version + len(entries)
        params = (
            summary.agent,
            summary.owner,
            new_version,
            _us(summary.created_at),
            _us(summary.updated_at),
            summary.pending,
            None if summary.next_expiry is None else _us(summary.next_expiry),
            summary.turn,
        )

        def op(conn: sqlite3.Connection) -> int:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if expected_version == 0:
                    try:
                        conn.execute(
                            f"INSERT INTO pausepoint_sessions ({_SUMMARY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            (session_id, *params),
                        )
                    except sqlite3.IntegrityError:
                        raise self._conflict(conn, session_id, expected_version) from None
                else:
                    # The conditional append: the version check and the bump are one statement.
                    updated = conn.execute(
                        "UPDATE pausepoint_sessions SET agent = ?, owner = ?, version = ?, created_us = ?, "
                        "updated_us = ?, pending = ?, next_expiry_us = ?, turn = ? WHERE id = ? AND version = ?",
                        (*params, session_id, expected_version),
                    ).rowcount
                    if updated != 1:
                        raise self._conflict(conn, session_id, expected_version)
                conn.executemany(
                    "INSERT INTO pausepoint_records (session_id, version, kind, data) VALUES (?, ?, ?, ?)",
                    [(session_id, e.version, e.kind, e.data) for e in entries],
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return new_version

        return await self._run(op)

    async def read(
        self, session_id: str, after_version: int = 0, kinds: Collection[str] | None = None
    ) -> LogSlice | None:
        def op(conn: sqlite3.Connection) -> LogSlice | None:
            # One statement, so the session's version and its records come from one snapshot.
            sql = (
                "SELECT s.version, r.version, r.kind, r.data FROM pausepoint_sessions AS s "
                "LEFT JOIN pausepoint_records AS r ON r.session_id = s.id AND r.version > ?"
            )
            args: list[object] = [after_version]
            if kinds is not None:
                sql += f" AND r.kind IN ({', '.join('?' * len(kinds))})"
                args.extend(kinds)
            rows = conn.execute(sql + " WHERE s.id = ? ORDER BY r.version", [*args, session_id]).fetchall()
            if not rows:
                return None
            entries = [LogEntry(v, k, bytes(d)) for _, v, k, d in rows if v is not None]
            return LogSlice(rows[0][0], entries)

        return await self._run(op)

    @staticmethod
    def _conflict(conn: sqlite3.Connection, session_id: str, expected_version: int) -> VersionConflict:
        row = conn.execute("SELECT version FROM pausepoint_sessions WHERE id = ?", (session_id,)).fetchone()
        actual = row[0] if row else 0
        return VersionConflict(
            f"session {session_id!r} is at version {actual}, not {expected_version}",
            session_id=session_id,
            expected=expected_version,
            actual=actual,
        )

    async def get_summary(self, session_id: str) -> SessionSummary | None:
        def op(conn: sqlite3.Connection) -> SessionSummary | None:
            row = conn.execute(
                f"SELECT {_SUMMARY_COLUMNS} FROM pausepoint_sessions WHERE id = ?", (session_id,)
            ).fetchone()
            return None if row is None else _summary(row)

        return await self._run(op)

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
        where: list[str] = []
        args: list[object] = []
        if owner is not None:
            where.append("owner = ?")
            args.append(owner)
        if agent is not None:
            where.append("agent = ?")
            args.append(agent)
        if has_pending is not None:
            where.append("pending > 0" if has_pending else "pending = 0")
        if expiring_before is not None:
            where.append("next_expiry_us < ?")
            args.append(_us(expiring_before))
        sql = f"SELECT {_SUMMARY_COLUMNS} FROM pausepoint_sessions"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY updated_us DESC, id DESC LIMIT ? OFFSET ?"
        args += [limit, offset]

        def op(conn: sqlite3.Connection) -> list[SessionSummary]:
            return [_summary(r) for r in conn.execute(sql, args).fetchall()]

        return await self._run(op)

    async def delete(self, session_id: str) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("DELETE FROM pausepoint_records WHERE session_id = ?", (session_id,))
                gone = conn.execute("DELETE FROM pausepoint_sessions WHERE id = ?", (session_id,)).rowcount
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return gone > 0

        return await self._run(op)

    async def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
