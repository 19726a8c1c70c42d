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

Events ride in the same statement (further parts of the ``WITH``, joined with ``claimed`` like
the records), with their deliveries, and a ``pg_notify`` that PostgreSQL sends at commit to
every process listening (``wait_for_events`` keeps one ``LISTEN`` connection per store). An
event's position is its transaction id times 65,536 + its place in the append: concurrent
transactions commit in any order, so readers take only events of transactions older than every
transaction still running (``pg_snapshot_xmin``); any event committed later has a greater
position, and a reader following positions misses none. (A transaction left open elsewhere in
the database holds the stream back until it ends.)

Durability: an append made with ``durable=False`` (see ``stores._base``) commits with
``synchronous_commit = off`` for its own transaction: it is visible at once, but PostgreSQL does
not wait for its WAL record to reach the disk (a crash of the database server or of its machine
within a fraction of a second may lose it). The WAL is flushed in order, so the session's next
durable append, which waits for its own flush as the server's ``synchronous_commit`` says (on by
default), makes it durable too.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import secrets
from collections.abc import AsyncIterator, Collection, Sequence
from datetime import datetime, timedelta
from typing import Any

from .._extras import missing_extra
from ..errors import SchemaVersionError, StoreError
from ._base import (
    DEFAULT_MAX_RECORD_BYTES,
    PARTIAL_BASE_KEPT,
    REPLACED_BASES_KEPT,
    Checkpoint,
    Delivery,
    DeliveryState,
    Event,
    LogEntry,
    LogSlice,
    SessionSummary,
    check_entries,
    check_replaces,
    version_conflict,
)
from ._partial import PREFIX_BYTES, BlockingLoop, PartialBase
from ._signal import Signal

try:
    import asyncpg
    from asyncpg.pool import PoolConnectionProxy
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("asyncpg", "postgres") from exc

__all__ = ["PostgresSessionStore"]

# While events of a transaction still running are held back, readers look again this often.
_HELD_BACK_POLL = 0.02

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

# Version 2. The deliveries' partial index holds only what is still to be sent.
_OUTBOX = """
CREATE TABLE IF NOT EXISTS {s}.pausepoint_events (
    pos bigint PRIMARY KEY,
    id text COLLATE "C" NOT NULL,
    kind text NOT NULL,
    session_id text COLLATE "C" NOT NULL,
    agent text COLLATE "C" NOT NULL,
    at timestamptz NOT NULL,
    data bytea NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.pausepoint_deliveries (
    id bigserial PRIMARY KEY,
    event_pos bigint NOT NULL,
    target text COLLATE "C" NOT NULL,
    state text NOT NULL,
    attempts integer NOT NULL,
    due_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    last_error text,
    lease text
);
CREATE INDEX IF NOT EXISTS pausepoint_deliveries_due ON {s}.pausepoint_deliveries (target, due_at)
    WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS pausepoint_deliveries_state ON {s}.pausepoint_deliveries (state, id);
CREATE INDEX IF NOT EXISTS pausepoint_deliveries_event ON {s}.pausepoint_deliveries (event_pos);
"""

# Version 3: one checkpoint per session (see stores._base).
_CHECKPOINTS = """
CREATE TABLE IF NOT EXISTS {s}.pausepoint_checkpoints (
    session_id text COLLATE "C" PRIMARY KEY,
    version bigint NOT NULL,
    data bytea NOT NULL
);
"""

# Version 4: checkpoint extensions, oldest first (see stores._base). pausepoint_checkpoints.version
# is the checkpoint's head: its latest extension's version, or its base's when it has none.
_EXTENSIONS = """
CREATE TABLE IF NOT EXISTS {s}.pausepoint_checkpoint_extensions (
    session_id text COLLATE "C" NOT NULL,
    version bigint NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (session_id, version)
);
"""

# Version 5: bases in a table of their own, by version, so that a process reading a base in part
# (``_partial``) still finds it after a newer one replaced it: a replaced base is deleted
# PARTIAL_BASE_KEPT seconds later (or once REPLACED_BASES_KEPT newer ones replaced it), by the
# next base written. Stored uncompressed, so that a range of it reads only the pages that hold
# it. The checkpoints of version 4 (their bases in pausepoint_checkpoints.data, without their
# version) are dropped: the next load folds the log and writes a new one.
_BASES = """
CREATE TABLE IF NOT EXISTS {s}.pausepoint_checkpoint_bases (
    session_id text COLLATE "C" NOT NULL,
    version bigint NOT NULL,
    data bytea NOT NULL,
    replaced_at timestamptz,
    PRIMARY KEY (session_id, version)
);
ALTER TABLE {s}.pausepoint_checkpoint_bases ALTER COLUMN data SET STORAGE EXTERNAL;
DELETE FROM {s}.pausepoint_checkpoint_extensions;
DELETE FROM {s}.pausepoint_checkpoints;
ALTER TABLE {s}.pausepoint_checkpoints DROP COLUMN data;
ALTER TABLE {s}.pausepoint_checkpoints ADD COLUMN base bigint NOT NULL;
"""

# The schema as a list of migrations: the script at index i takes a schema from version i to
# version i + 1, so a new schema runs them all and an older one the ones it lacks. Never edit a
# script once released: append a new one.
_MIGRATIONS = [_SCHEMA, _OUTBOX, _CHECKPOINTS, _EXTENSIONS, _BASES]
SCHEMA_VERSION = len(_MIGRATIONS)

# Positions of events whose transaction ended before every transaction still running began.
_SETTLED = "pg_snapshot_xmin(pg_current_snapshot())::text::bigint * 65536"

# A prefix length that reads a base whole (bytea values are at most 1 GB).
_WHOLE = 2**31 - 1

_META = "CREATE TABLE IF NOT EXISTS {s}.pausepoint_meta (key text PRIMARY KEY, value text NOT NULL)"

# The records part of both appends (parameters $10..$20): the entries and events are joined with
# ``claimed``, so none is inserted when the version check matched no row. Reading ``claimed``
# waits for its write, so the transaction has its id before an event's position is computed.
_WRITE_RECORDS = """
written AS (
    INSERT INTO {s}.pausepoint_records (session_id, version, kind, data)
    SELECT claimed.id, r.version, r.kind, r.data
    FROM claimed, unnest($10::bigint[], $11::text[], $12::bytea[]) AS r (version, kind, data)
),
announced AS (
    INSERT INTO {s}.pausepoint_events (pos, id, kind, session_id, agent, at, data)
    SELECT pg_current_xact_id()::text::bigint * 65536 + e.n, e.id, e.kind, claimed.id, e.agent, e.at, e.data
    FROM claimed, unnest($13::text[], $14::text[], $15::text[], $16::timestamptz[], $17::bytea[])
        WITH ORDINALITY AS e (id, kind, agent, at, data, n)
    RETURNING pos, id
),
queued AS (
    INSERT INTO {s}.pausepoint_deliveries (event_pos, target, state, attempts, due_at, updated_at)
    SELECT announced.pos, t.target, 'pending', 0, $6, $6
    FROM announced JOIN unnest($18::text[], $19::text[]) AS t (event_id, target) ON t.event_id = announced.id
),
notified AS (
    SELECT pg_notify($20, '') FROM claimed WHERE cardinality($13::text[]) > 0
)
SELECT (SELECT count(*) FROM claimed) + 0 * (SELECT count(*) FROM notified){relaxed}
"""

# An append made with durable=False commits without waiting for its WAL flush: the setting is
# local to the statement's own transaction, read by PostgreSQL when it commits.
_RELAXED = " + 0 * length(set_config('synchronous_commit', 'off', true))"

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
    WHERE id = $1 AND version = $21
    RETURNING id
),"""
    + _WRITE_RECORDS
)

# An extension, in one statement (one transaction): the head moves from $2 to $3 only if it is at
# $2, has at least $5 extensions and the log holds $3; only if it moved are its last $5
# extensions deleted and the new one inserted. Every writer of a session's extensions (this, a
# base write, a deletion) updates or deletes the head's row first, and a head's version only
# grows: so once this holds the row's lock with the head still at $2, nothing changed the
# extensions since the statement's snapshot, which its count and its delete read. Committed
# without waiting for the WAL's flush, like a checkpoint (the setting is read at commit, as for
# an append with durable=False).
_EXTEND_CHECKPOINT = """
WITH moved AS (
    UPDATE {s}.pausepoint_checkpoints SET version = $3
    WHERE session_id = $1 AND version = $2 AND $2 < $3
        AND EXISTS (SELECT 1 FROM {s}.pausepoint_sessions WHERE id = $1 AND version >= $3)
        AND (SELECT count(*) FROM {s}.pausepoint_checkpoint_extensions WHERE session_id = $1) >= $5
    RETURNING session_id
), replaced AS (
    DELETE FROM {s}.pausepoint_checkpoint_extensions
    WHERE session_id = (SELECT session_id FROM moved) AND version IN (
        SELECT version FROM {s}.pausepoint_checkpoint_extensions WHERE session_id = $1
        ORDER BY version DESC LIMIT $5
    )
)
INSERT INTO {s}.pausepoint_checkpoint_extensions (session_id, version, data)
SELECT moved.session_id, $3, $4 FROM moved
WHERE set_config('synchronous_commit', 'off', true) IS NOT NULL
"""

# One statement, one snapshot: the head, the base's version, length and first $2 bytes, then the
# extensions in order.
_READ_CHECKPOINT = """
SELECT c.version, c.base, length(b.data) AS length, substring(b.data FROM 1 FOR $2) AS prefix, ARRAY(
    SELECT e.data FROM {s}.pausepoint_checkpoint_extensions AS e WHERE e.session_id = $1 ORDER BY e.version
) AS extensions
FROM {s}.pausepoint_checkpoints AS c
JOIN {s}.pausepoint_checkpoint_bases AS b ON b.session_id = c.session_id AND b.version = c.base
WHERE c.session_id = $1
"""

# One statement, one snapshot: the version and the entries are read consistently. The LEFT JOIN
# yields one row (with NULL record columns) for a session that has no entries after the version.
_READ = """
SELECT s.version AS head, r.version, r.kind, r.data
FROM {s}.pausepoint_sessions AS s
LEFT JOIN {s}.pausepoint_records AS r ON r.session_id = s.id AND r.version > $2
WHERE s.id = $1
ORDER BY r.version
"""

_SUMMARY_COLUMNS = "id, agent, owner, version, created_at, updated_at, pending, next_expiry, turn"

_EVENT_COLUMNS = "e.pos, e.id, e.kind, e.session_id, e.agent, e.at, e.data"
_DELIVERY_COLUMNS = "d.id, d.target, d.state, d.attempts, d.due_at, d.updated_at, d.last_error, d.lease, " + ", ".join(
    f"{column} AS e_{column[2:]}" for column in _EVENT_COLUMNS.split(", ")
)

_CLAIM = """
WITH due AS (
    SELECT id FROM {s}.pausepoint_deliveries
    WHERE state = 'pending' AND target = ANY($1::text[]) AND due_at <= $2
    ORDER BY due_at, id LIMIT $3
    FOR UPDATE SKIP LOCKED
)
UPDATE {s}.pausepoint_deliveries AS d SET due_at = $4, lease = $5
FROM due, {s}.pausepoint_events AS e
WHERE d.id = due.id AND e.pos = d.event_pos
RETURNING {columns}
"""


def _quote_identifier(name: str) -> str:
    if not name or "\x00" in name or len(name.encode()) > 63:
        raise ValueError(f"{name!r} is not a usable PostgreSQL schema name")
    return '"' + name.replace('"', '""') + '"'


def _event(row: asyncpg.Record, prefix: str = "") -> Event:
    return Event(
        id=row[prefix + "id"],
        kind=row[prefix + "kind"],
        session_id=row[prefix + "session_id"],
        agent=row[prefix + "agent"],
        at=row[prefix + "at"],
        data=row[prefix + "data"],
        seq=row[prefix + "pos"],
    )


def _delivery(row: asyncpg.Record) -> Delivery:
    return Delivery(
        id=row["id"],
        target=row["target"],
        event=_event(row, "e_"),
        state=row["state"],
        attempts=row["attempts"],
        due_at=row["due_at"],
        updated_at=row["updated_at"],
        last_error=row["last_error"],
        lease=row["lease"],
    )


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
        # A channel name is at most 63 bytes, a schema name may be as long: name it by a digest.
        self._channel = "pausepoint_" + hashlib.sha256(schema.encode()).hexdigest()[:24]
        self._signal = Signal()
        self._listener: asyncpg.Connection | PoolConnectionProxy[asyncpg.Record] | None = None
        self._listen_lock = asyncio.Lock()
        self._ranges = BlockingLoop("pausepoint-postgres-ranges", self._ranges_connection, _close_connection)
        deliveries = (
            f"SELECT {_DELIVERY_COLUMNS} FROM {quoted}.pausepoint_deliveries AS d "
            f"JOIN {quoted}.pausepoint_events AS e ON e.pos = d.event_pos"
        )
        self._sql = {
            "append_new": _APPEND_NEW.format(s=quoted, relaxed=""),
            "append_next": _APPEND_NEXT.format(s=quoted, relaxed=""),
            "append_new_relaxed": _APPEND_NEW.format(s=quoted, relaxed=_RELAXED),
            "append_next_relaxed": _APPEND_NEXT.format(s=quoted, relaxed=_RELAXED),
            "read": _READ.format(s=quoted),
            "version": f"SELECT version FROM {quoted}.pausepoint_sessions WHERE id = $1",
            "summary": f"SELECT {_SUMMARY_COLUMNS} FROM {quoted}.pausepoint_sessions WHERE id = $1",
            "list": f"SELECT {_SUMMARY_COLUMNS} FROM {quoted}.pausepoint_sessions",
            "delete_session": f"DELETE FROM {quoted}.pausepoint_sessions WHERE id = $1",
            "delete_records": f"DELETE FROM {quoted}.pausepoint_records WHERE session_id = $1",
            "meta": _META.format(s=quoted),
            "get_version": f"SELECT value FROM {quoted}.pausepoint_meta WHERE key = 'schema_version'",
            "set_version": f"INSERT INTO {quoted}.pausepoint_meta (key, value) VALUES ('schema_version', $1)",
            "create_schema": f"CREATE SCHEMA IF NOT EXISTS {quoted}",
            "upgrade_version": f"UPDATE {quoted}.pausepoint_meta SET value = $1 WHERE key = 'schema_version'",
            "delete_checkpoint": f"DELETE FROM {quoted}.pausepoint_checkpoints WHERE session_id = $1",
            "delete_extensions": f"DELETE FROM {quoted}.pausepoint_checkpoint_extensions WHERE session_id = $1",
            "delete_bases": f"DELETE FROM {quoted}.pausepoint_checkpoint_bases WHERE session_id = $1",
            # The bases a new one replaced are kept a while for the processes reading them in
            # part, then deleted by a later base write.
            "retire_bases": f"WITH gone AS (DELETE FROM {quoted}.pausepoint_checkpoint_bases "
            "WHERE session_id = $1 AND replaced_at IS NOT NULL AND (replaced_at < now() - make_interval(secs => $2) "
            f"OR version NOT IN (SELECT version FROM {quoted}.pausepoint_checkpoint_bases "
            "WHERE session_id = $1 AND replaced_at IS NOT NULL ORDER BY version DESC LIMIT $3 - 1))) "
            f"UPDATE {quoted}.pausepoint_checkpoint_bases SET replaced_at = now() "
            "WHERE session_id = $1 AND replaced_at IS NULL",
            "add_base": f"INSERT INTO {quoted}.pausepoint_checkpoint_bases (session_id, version, data) "
            "VALUES ($1, $2, $3)",
            "read_base_range": f"SELECT substring(data FROM $3 FOR $4) FROM {quoted}.pausepoint_checkpoint_bases "
            "WHERE session_id = $1 AND version = $2",
            "read_checkpoint": _READ_CHECKPOINT.format(s=quoted),
            "extend_checkpoint": _EXTEND_CHECKPOINT.format(s=quoted),
            # A new base, kept only for a version the log holds, and only over an older checkpoint
            # (its head); committed without waiting for the WAL's flush (never the source of truth).
            "write_checkpoint": f"INSERT INTO {quoted}.pausepoint_checkpoints AS c (session_id, version, base) "
            f"SELECT id, $2, $2 FROM {quoted}.pausepoint_sessions WHERE id = $1 AND version >= $2 "
            "ON CONFLICT (session_id) DO UPDATE SET version = excluded.version, base = excluded.base "
            "WHERE excluded.version > c.version",
            "read_events": f"SELECT {_EVENT_COLUMNS} FROM {quoted}.pausepoint_events AS e WHERE e.pos > $1 "
            f"AND e.pos < {_SETTLED} ORDER BY e.pos LIMIT $2",
            "last_event": f"SELECT coalesce(max(pos) FILTER (WHERE pos < {_SETTLED}), 0), coalesce(max(pos), 0) "
            f"FROM {quoted}.pausepoint_events",
            "claim": _CLAIM.format(s=quoted, columns=_DELIVERY_COLUMNS),
            "settle": f"UPDATE {quoted}.pausepoint_deliveries SET state = $3, attempts = attempts + 1, "
            "due_at = coalesce($4, due_at), updated_at = $5, last_error = $6, lease = NULL "
            "WHERE id = $1 AND lease = $2 AND state = 'pending'",
            "deliveries": deliveries,
            "requeue": f"UPDATE {quoted}.pausepoint_deliveries SET state = 'pending', attempts = 0, due_at = $2, "
            "updated_at = $2, lease = NULL WHERE id = $1 AND state = 'failed'",
            "prune_deliveries": f"DELETE FROM {quoted}.pausepoint_deliveries WHERE state = 'delivered' "
            f"AND event_pos IN (SELECT pos FROM {quoted}.pausepoint_events WHERE at < $1)",
            "prune_events": f"DELETE FROM {quoted}.pausepoint_events AS e WHERE e.at < $1 AND NOT EXISTS "
            f"(SELECT 1 FROM {quoted}.pausepoint_deliveries AS d WHERE d.event_pos = e.pos)",
        }
        self._migrations = [script.format(s=quoted) for script in _MIGRATIONS]
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
                    self._pool = await asyncpg.create_pool(
                        self._dsn, min_size=min_size, max_size=max_size, reset=_keep_session
                    )
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
            done = 0 if found is None else int(found) if found.isdigit() else -1
            if found is not None and not 1 <= done <= SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"PostgreSQL schema {self.schema!r} holds pausepoint schema version {found!r}; this "
                    f"version of pausepoint uses version {SCHEMA_VERSION} (and upgrades earlier ones)",
                    found=found,
                    expected=SCHEMA_VERSION,
                )
            for script in self._migrations[done:]:
                await conn.execute(script)
            if found is None:
                await conn.execute(sql["set_version"], str(SCHEMA_VERSION))
            elif done != SCHEMA_VERSION:
                await conn.execute(sql["upgrade_version"], str(SCHEMA_VERSION))

    # -- the contract -------------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        expected_version: int,
        entries: Sequence[LogEntry],
        summary: SessionSummary,
        events: Sequence[Event] = (),
        *,
        durable: bool = True,
    ) -> int:
        check_entries(expected_version, entries, self.max_record_bytes, events)
        new_version = expected_version + len(entries)
        relaxed = "" if durable else "_relaxed"
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
            [e.id for e in events],
            [e.kind for e in events],
            [e.agent for e in events],
            [e.at for e in events],
            [e.data for e in events],
            [e.id for e in events for _ in e.targets],
            [target for e in events for target in e.targets],
            self._channel,
        ]
        if expected_version == 0:
            sql = self._sql["append_new" + relaxed]
        else:
            sql = self._sql["append_next" + relaxed]
            args.append(expected_version)
        pool = await self._ready_pool()
        async with self._translated(f"appending to session {session_id!r}"):
            matched = await pool.fetchval(sql, *args)
            if matched:
                if events:
                    self._signal.fire()
                return new_version
            current = await pool.fetchval(self._sql["version"], session_id)
        raise version_conflict(session_id, expected_version, current or 0)

    async def read(self, session_id: str, after_version: int = 0) -> LogSlice | None:
        pool = await self._ready_pool()
        async with self._translated(f"reading session {session_id!r}"):
            rows = await pool.fetch(self._sql["read"], session_id, after_version)
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
            # The checkpoint row before its extensions: it waits for a concurrent extension to
            # commit, so the extensions delete (a new snapshot) sees the one that extension added.
            await conn.execute(self._sql["delete_checkpoint"], session_id)
            await conn.execute(self._sql["delete_extensions"], session_id)
            await conn.execute(self._sql["delete_bases"], session_id)
        return bool(status != "DELETE 0")

    async def write_checkpoint(self, session_id: str, version: int, data: bytes) -> bool:
        pool = await self._ready_pool()
        action = f"writing the checkpoint of session {session_id!r}"
        async with self._translated(action), pool.acquire() as conn, conn.transaction():
            await conn.execute("SET LOCAL synchronous_commit = off")
            status = await conn.execute(self._sql["write_checkpoint"], session_id, version)
            kept = bool(status == "INSERT 0 1")
            if kept:
                # Statements of their own, after the new base took the checkpoint row's lock: their
                # snapshots hold every extension and base committed before, none can be added
                # until we commit. (One statement would see by a snapshot taken before that lock.)
                await conn.execute(self._sql["delete_extensions"], session_id)
                await conn.execute(self._sql["retire_bases"], session_id, PARTIAL_BASE_KEPT, REPLACED_BASES_KEPT)
                await conn.execute(self._sql["add_base"], session_id, version, data)
        return kept

    async def extend_checkpoint(
        self, session_id: str, after: int, version: int, data: bytes, *, replaces: int = 0
    ) -> bool:
        check_replaces(replaces)
        pool = await self._ready_pool()
        async with self._translated(f"extending the checkpoint of session {session_id!r}"):
            status = await pool.execute(self._sql["extend_checkpoint"], session_id, after, version, data, replaces)
        return bool(status == "INSERT 0 1")

    async def read_checkpoint(self, session_id: str) -> Checkpoint | None:
        # A base longer than PREFIX_BYTES is given in part (``_partial``): the runtime fetches
        # the rest of it a range at a time, as it reads it, on a connection of its own. Only a
        # store made from a URL can open one: one made from a pool reads its bases whole.
        pool = await self._ready_pool()
        prefix_bytes = PREFIX_BYTES if self._dsn is not None else _WHOLE
        async with self._translated(f"reading the checkpoint of session {session_id!r}"):
            row = await pool.fetchrow(self._sql["read_checkpoint"], session_id, prefix_bytes)
        if row is None:
            return None
        prefix, extensions = row["prefix"], tuple(row["extensions"])
        if row["length"] <= len(prefix):
            return Checkpoint(row["version"], prefix, extensions)
        partial = PartialBase(row["length"], prefix, functools.partial(self._read_range, session_id, row["base"]))
        return Checkpoint(row["version"], partial.view, extensions, partial.fetch)

    def _read_range(self, session_id: str, base: int, start: int, stop: int) -> bytes:
        """Bytes ``start`` to ``stop - 1`` of the session's base at version ``base``, blocking
        (see ``_partial``); fewer when that base is gone."""
        sql = self._sql["read_base_range"]

        async def read(conn: asyncpg.Connection) -> bytes:
            async with self._translated(f"reading part of the checkpoint of session {session_id!r}"):
                found = await conn.fetchval(sql, session_id, base, start + 1, stop - start)
            return b"" if found is None else bytes(found)

        return self._ranges.run(read)

    async def _ranges_connection(self) -> asyncpg.Connection:
        """A connection of its own for ``_ranges``' loop."""
        if self._dsn is None:
            raise StoreError("the store is closed")
        async with self._translated("connecting to read part of a checkpoint"):
            return await asyncpg.connect(self._dsn)

    # -- the event stream and the outbox --------------------------------------------------------

    async def read_events(self, after: int = 0, limit: int = 100) -> list[Event]:
        pool = await self._ready_pool()
        async with self._translated("reading events"):
            rows = await pool.fetch(self._sql["read_events"], after, limit)
        return [_event(r) for r in rows]

    async def last_event(self) -> int:
        return (await self._heads())[0]

    async def _heads(self) -> tuple[int, int]:
        """The latest position readers may take, and the latest written (possibly held back)."""
        pool = await self._ready_pool()
        async with self._translated("reading events"):
            row = await pool.fetchrow(self._sql["last_event"])
        assert row is not None
        return int(row[0]), int(row[1])

    async def wait_for_events(self, after: int, max_wait: float) -> None:
        try:
            await self._listen()
            listening = True
        except StoreError:  # no LISTEN connection now: look again soon instead
            listening = False
        generation = self._signal.generation
        settled, written = await self._heads()
        if settled > after:
            return
        if written > after or not listening:
            # An event is written but held back behind a running transaction, which may end
            # without a notification of its own: look again shortly.
            max_wait = min(max_wait, _HELD_BACK_POLL if written > after else 0.5)
        await self._signal.wait(generation, max_wait)

    async def _listen(self) -> None:
        if self._listener is not None and not self._listener.is_closed():
            return
        async with self._listen_lock:
            if self._listener is not None and not self._listener.is_closed():
                return
            pool = await self._ready_pool()
            async with self._translated("listening for events"):
                if self._dsn is not None:
                    conn: Any = await asyncpg.connect(self._dsn)
                else:  # a pool we were given: hold one of its connections
                    conn = await pool.acquire()
                await conn.add_listener(self._channel, self._notified)
                conn.add_termination_listener(self._listener_lost)
            self._listener = conn

    def _notified(self, *_: Any) -> None:
        self._signal.fire()

    def _listener_lost(self, *_: Any) -> None:
        self._listener = None
        self._signal.fire()  # waiters look at the stream themselves, then listen again

    async def claim_deliveries(
        self, targets: Collection[str], now: datetime, lease: timedelta, limit: int = 50
    ) -> list[Delivery]:
        if not targets or limit <= 0:
            return []
        pool = await self._ready_pool()
        async with self._translated("claiming deliveries"):
            rows = await pool.fetch(self._sql["claim"], list(targets), now, limit, now + lease, secrets.token_hex(8))
        return sorted((_delivery(r) for r in rows), key=lambda d: d.id)

    async def settle_delivery(
        self, delivery: Delivery, now: datetime, *, error: str | None = None, retry_at: datetime | None = None
    ) -> bool:
        state = "delivered" if error is None else ("pending" if retry_at is not None else "failed")
        due = retry_at if state == "pending" else None
        pool = await self._ready_pool()
        async with self._translated("settling a delivery"):
            status = await pool.execute(self._sql["settle"], delivery.id, delivery.lease, state, due, now, error)
        return bool(status == "UPDATE 1")

    async def list_deliveries(
        self, *, state: DeliveryState | None = None, target: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[Delivery]:
        where: list[str] = []
        args: list[Any] = []
        if state is not None:
            args.append(state)
            where.append(f"d.state = ${len(args)}")
        if target is not None:
            args.append(target)
            where.append(f"d.target = ${len(args)}")
        sql = self._sql["deliveries"] + (" WHERE " + " AND ".join(where) if where else "")
        args += [limit, offset]
        sql += f" ORDER BY d.id DESC LIMIT ${len(args) - 1} OFFSET ${len(args)}"
        pool = await self._ready_pool()
        async with self._translated("listing deliveries"):
            rows = await pool.fetch(sql, *args)
        return [_delivery(r) for r in rows]

    async def requeue_delivery(self, delivery_id: int, now: datetime) -> bool:
        pool = await self._ready_pool()
        async with self._translated("requeueing a delivery"):
            status = await pool.execute(self._sql["requeue"], delivery_id, now)
        return bool(status == "UPDATE 1")

    async def prune_events(self, before: datetime) -> int:
        pool = await self._ready_pool()
        async with self._translated("pruning events"), pool.acquire() as conn, conn.transaction():
            await conn.execute(self._sql["prune_deliveries"], before)
            status = await conn.execute(self._sql["prune_events"], before)
        return int(status.split()[-1])

    async def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None and not listener.is_closed():
            with contextlib.suppress(Exception):
                listener.remove_termination_listener(self._listener_lost)
                if isinstance(listener, PoolConnectionProxy) and self._pool is not None:
                    await self._pool.release(listener)
                else:
                    await listener.close()
        await self._ranges.aclose()
        pool, self._pool = self._pool, None
        self._ready = False
        self._dsn = None  # a closed store does not reconnect
        if pool is not None and self._owns_pool:
            async with self._translated("closing"):
                await pool.close()


async def _close_connection(conn: asyncpg.Connection) -> None:
    with contextlib.suppress(Exception):
        await conn.close()


async def _keep_session(conn: Any) -> None:
    """The pool's reset on release, for the pool the store makes itself: nothing beyond what
    asyncpg always does (roll back a transaction left open, drop listeners).

    asyncpg's default also runs ``RESET ALL``, ``UNLISTEN *``, ``CLOSE ALL`` and unlocks advisory
    locks — a round trip on every release, as costly as the statement the connection was taken
    for. The store leaves none of that behind: its settings and locks are transaction-scoped
    (``set_config(..., true)``, ``pg_advisory_xact_lock``), it opens no cursor, and its ``LISTEN``
    has a connection of its own. (A pool you give the store keeps your pool's reset.)"""
