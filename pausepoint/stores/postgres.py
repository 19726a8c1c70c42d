"""``PostgresSessionStore``: sessions in PostgreSQL, shared by every process of a deployment.

Built on asyncpg: it speaks asyncio natively (no thread hop per call), uses PostgreSQL's binary
protocol (``bytea`` records and timestamps travel without text encoding) and caches prepared
statements per connection, so each of the store's few, repeated statements is parsed once.

The conditional append is a single statement: a data-modifying ``WITH`` whose first part moves
the session row from the expected version to the new one (or inserts it, for version 0) and
whose second part inserts the records only if the first part matched a row. One statement is
one transaction, so it writes everything or nothing; two writers racing for the same version
serialise on the session row's lock, and the loser's ``WHERE version = expected`` no longer
matches once the winner commits. Every asyncpg error is translated to ``StoreError`` in
``_translated``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Collection, Sequence
from datetime import datetime
from typing import Any

from .._extras import missing_extra
from ..errors import SchemaVersionError, StoreError, VersionConflict
from ._base import DEFAULT_MAX_RECORD_BYTES, LogEntry, LogSlice, SessionSummary, check_entries

try:
    import asyncpg
    from asyncpg.pool import PoolConnectionProxy
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("asyncpg", "postgres") from exc

__all__ = ["PostgresSessionStore"]

SCHEMA_VERSION = 1

# ``{s}`` is the quoted schema name, substituted once per store; values always go through $n.
# Identifiers use the "C" collation so that ordering by id matches the other backends (bytewise).
# Every append rewrites updated_at, and each index holding it is one more write per append, so
# only the listings the runtime makes get one: by agent (every agent's listing), by owner, the
# inbox of pending sessions, and expiring pauses. An unfiltered listing sorts.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS {s}.pausepoint_sessions (
    id text COLLATE "C" PRIMARY KEY,
    agent text COLLATE "C" NOT NULL,
    owner text COLLATE "C",
    version bigint NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    pending integer NOT NULL,
    next_expiry timestamptz,
    turn integer NOT NULL
);
CREATE INDEX IF NOT EXISTS pausepoint_sessions_owner ON {s}.pausepoint_sessions (owner, updated_at, id)
    WHERE owner IS NOT NULL;
CREATE INDEX IF NOT EXISTS pausepoint_sessions_agent ON {s}.pausepoint_sessions (agent, updated_at, id);
CREATE INDEX IF NOT EXISTS pausepoint_sessions_pending ON {s}.pausepoint_sessions (updated_at, id)
    WHERE pending > 0;
CREATE INDEX IF NOT EXISTS pausepoint_sessions_expiry ON {s}.pausepoint_sessions (next_expiry)
    WHERE next_expiry IS NOT NULL;
CREATE TABLE IF NOT EXISTS {s}.pausepoint_records (
    session_id text COLLATE "C" NOT NULL,
    version bigint NOT NULL,
    kind text NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (session_id, version)
);
"""

_META = "CREATE TABLE IF NOT EXISTS {s}.pausepoint_meta (key text PRIMARY KEY, value text NOT NULL)"

# The records part of both appends (their parameters $10..$12): the entries are joined with
# ``claimed``, so none is inserted when the version check matched no row.
_WRITE_RECORDS = """
written AS (
    INSERT INTO {s}.pausepoint_records (session_id, version, kind, data)
    SELECT claimed.id, r.version, r.kind, r.data
    FROM claimed, unnest($10::bigint[], $11::text[], $12::bytea[]) AS r (version, kind, data)
)
SELECT count(*) FROM claimed
"""

_APPEND_NEW = (
    """
WITH claimed AS (
    INSERT INTO {s}.pausepoint_sessions
        (id, agent, owner, version, created_at, updated_at, pending, next_expiry, turn)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
    ON CONFLICT (id) DO NOTHING
    RETURNING id
),"""
    + _WRITE_RECORDS
)

_APPEND_NEXT = (
    """
WITH claimed AS (
    UPDATE {s}.pausepoint_sessions
    SET agent = $2, owner = $3, version = $4, created_at = $5, updated_at = $6, pending = $7,
        next_expiry = $8, turn = $9
    WHERE id = $1 AND version = $13
    RETURNING id
),"""
    + _WRITE_RECORDS
)

# One statement, one snapshot: the version and the entries are read consistently. The LEFT JOIN
# yields one row (with NULL record columns) for a session that has no entries after the version.
_READ = """
SELECT s.version AS head, r.version, r.kind, r.data
FROM {s}.pausepoint_sessions AS s
LEFT JOIN {s}.pausepoint_records AS r ON r.session_id = s.id AND r.version > $2 {kinds}
WHERE s.id = $1
ORDER BY r.version
"""

_SUMMARY_COLUMNS = "id, agent, owner, version, created_at, updated_at, pending, next_expiry, turn"


def _quote_identifier(name: str) -> str:
    if not name or "\x00" in name or len(name.encode()) > 63:
        raise ValueError(f"{name!r} is not a usable PostgreSQL schema name")
    return '"' + name.replace('"', '""') + '"'


def _summary(row: asyncpg.Record) -> SessionSummary:
    return SessionSummary(
        session_id=row["id"],
        agent=row["agent"],
        owner=row["owner"],
        version=row["version"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        pending=row["pending"],
        next_expiry=row["next_expiry"],
        turn=row["turn"],
    )


class PostgresSessionStore:
    """Sessions in PostgreSQL tables (``pausepoint_sessions``, ``pausepoint_records``).

    ``connection`` is a ``postgresql://`` URL (the store makes, and on ``close`` closes, its
    own pool of ``min_size``..``max_size`` connections) or an existing ``asyncpg.Pool`` (which
    stays the caller's to close). ``schema`` names the PostgreSQL schema holding the tables;
    it is created if missing. Tables are created on first use; a database holding a newer or
    unknown pausepoint schema raises ``SchemaVersionError`` then. Any database failure raises
    ``StoreError`` with the asyncpg error as its cause.
    """

    def __init__(
        self,
        connection: str | asyncpg.Pool,
        *,
        schema: str = "public",
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        min_size: int = 1,
        max_size: int = 10,
    ) -> None:
        if isinstance(connection, str):
            self._dsn: str | None = connection
            self._pool: asyncpg.Pool | None = None
        else:
            self._dsn = None
            self._pool = connection
        self._owns_pool = self._dsn is not None
        self._pool_sizes = (min_size, max_size)
        self.schema = schema
        self.max_record_bytes = max_record_bytes
        quoted = _quote_identifier(schema)
        self._sql = {
            "append_new": _APPEND_NEW.format(s=quoted),
            "append_next": _APPEND_NEXT.format(s=quoted),
            "read": _READ.format(s=quoted, kinds=""),
            "read_kinds": _READ.format(s=quoted, kinds="AND r.kind = ANY($3::text[])"),
            "version": f"SELECT version FROM {quoted}.pausepoint_sessions WHERE id = $1",
            "summary": f"SELECT {_SUMMARY_COLUMNS} FROM {quoted}.pausepoint_sessions WHERE id = $1",
            "list": f"SELECT {_SUMMARY_COLUMNS} FROM {quoted}.pausepoint_sessions",
            "delete_session": f"DELETE FROM {quoted}.pausepoint_sessions WHERE id = $1",
            "delete_records": f"DELETE FROM {quoted}.pausepoint_records WHERE session_id = $1",
            "schema": _SCHEMA.format(s=quoted),
            "meta": _META.format(s=quoted),
            "get_version": f"SELECT value FROM {quoted}.pausepoint_meta WHERE key = 'schema_version'",
            "set_version": f"INSERT INTO {quoted}.pausepoint_meta (key, value) VALUES ('schema_version', $1)",
            "create_schema": f"CREATE SCHEMA IF NOT EXISTS {quoted}",
        }
        self._ready = False
        self._ready_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"<PostgresSessionStore schema={self.schema!r}>"

    # -- connection and schema ----------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _translated(self, action: str) -> AsyncIterator[None]:
        """The one place asyncpg's errors become ``StoreError`` (pausepoint's own pass through)."""
        try:
            yield
        except (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError) as exc:
            raise StoreError(f"PostgreSQL failed while {action}: {exc}", schema=self.schema) from exc

    async def _ready_pool(self) -> asyncpg.Pool:
        """The pool, once the schema is known to be there and of our version."""
        if self._ready and self._pool is not None:
            return self._pool
        async with self._ready_lock:
            if self._pool is None:
                if self._dsn is None:
                    raise StoreError("the store is closed")
                min_size, max_size = self._pool_sizes
                async with self._translated("connecting"):
                    self._pool = await asyncpg.create_pool(self._dsn, min_size=min_size, max_size=max_size)
            if not self._ready:
                async with self._translated("creating the schema"), self._pool.acquire() as conn:
                    await self._create_schema(conn)
                self._ready = True
            return self._pool

    async def _create_schema(self, conn: PoolConnectionProxy[asyncpg.Record]) -> None:
        sql = self._sql
        async with conn.transaction():
            # Processes starting together take turns; the later ones find the tables made.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('pausepoint schema ' || $1))", self.schema)
            # Only ask for CREATE SCHEMA (a database privilege) when the schema is missing.
            if not await conn.fetchval("SELECT true FROM pg_namespace WHERE nspname = $1", self.schema):
                await conn.execute(sql["create_schema"])
            await conn.execute(sql["meta"])
            found = await conn.fetchval(sql["get_version"])
            if found is None:
                await conn.execute(sql["schema"])
                await conn.execute(sql["set_version"], str(SCHEMA_VERSION))
            elif found != str(SCHEMA_VERSION):
                raise SchemaVersionError(
                    f"PostgreSQL schema {self.schema!r} holds pausepoint schema version {found!r}; this "
                    f"version of pausepoint uses version {SCHEMA_VERSION}",
                    found=found,
                    expected=SCHEMA_VERSION,
                )

    # -- the contract -------------------------------------------------------------------------

    async def append(
        self, session_id: str, expected_version: int, entries: Sequence[LogEntry], summary: SessionSummary
    ) -> int:
        check_entries(expected_version, entries, self.max_record_bytes)
        new_version = expected_version + len(entries)
        args: list[Any] = [
            session_id,
            summary.agent,
            summary.owner,
            new_version,
            summary.created_at,
            summary.updated_at,
            summary.pending,
            summary.next_expiry,
            summary.turn,
            [e.version for e in entries],
            [e.kind for e in entries],
            [e.data for e in entries],
        ]
        if expected_version == 0:
            sql = self._sql["append_new"]
        else:
            sql = self._sql["append_next"]
            args.append(expected_version)
        pool = await self._ready_pool()
        async with self._translated(f"appending to session {session_id!r}"):
            matched = await pool.fetchval(sql, *args)
            if matched:
                return new_version
            current = await pool.fetchval(self._sql["version"], session_id)
        raise VersionConflict(
            f"session {session_id!r} is at version {current or 0}, not {expected_version}",
            session_id=session_id,
            expected=expected_version,
            actual=current or 0,
        )

    async def read(
        self, session_id: str, after_version: int = 0, kinds: Collection[str] | None = None
    ) -> LogSlice | None:
        pool = await self._ready_pool()
        async with self._translated(f"reading session {session_id!r}"):
            if kinds is None:
                rows = await pool.fetch(self._sql["read"], session_id, after_version)
            else:
                rows = await pool.fetch(self._sql["read_kinds"], session_id, after_version, list(kinds))
        if not rows:
            return None
        entries = [LogEntry(r["version"], r["kind"], r["data"]) for r in rows if r["version"] is not None]
        return LogSlice(rows[0]["head"], entries)

    async def get_summary(self, session_id: str) -> SessionSummary | None:
        pool = await self._ready_pool()
        async with self._translated(f"reading session {session_id!r}"):
            row = await pool.fetchrow(self._sql["summary"], session_id)
        return None if row is None else _summary(row)

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
        args: list[Any] = []
        if owner is not None:
            args.append(owner)
            where.append(f"owner = ${len(args)}")
        if agent is not None:
            args.append(agent)
            where.append(f"agent = ${len(args)}")
        if has_pending is not None:
            where.append("pending > 0" if has_pending else "pending = 0")
        if expiring_before is not None:
            args.append(expiring_before)
            where.append(f"next_expiry < ${len(args)}")
        sql = self._sql["list"]
        if where:
            sql += " WHERE " + " AND ".join(where)
        args += [limit, offset]
        sql += f" ORDER BY updated_at DESC, id DESC LIMIT ${len(args) - 1} OFFSET ${len(args)}"
        pool = await self._ready_pool()
        async with self._translated("listing sessions"):
            rows = await pool.fetch(sql, *args)
        return [_summary(r) for r in rows]

    async def delete(self, session_id: str) -> bool:
        pool = await self._ready_pool()
        async with self._translated(f"deleting session {session_id!r}"), pool.acquire() as conn, conn.transaction():
            # The session row first: it waits for a concurrent append to commit, so the records
            # delete that follows (a new snapshot under READ COMMITTED) sees that append's records.
            status = await conn.execute(self._sql["delete_session"], session_id)
            await conn.execute(self._sql["delete_records"], session_id)
        return bool(status != "DELETE 0")

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        self._ready = False
        self._dsn = None  # a closed store does not reconnect
        if pool is not None and self._owns_pool:
            async with self._translated("closing"):
                await pool.close()
