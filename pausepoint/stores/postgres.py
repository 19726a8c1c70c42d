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

This module holds the store: its pool, its ``LISTEN`` connection and the contract's calls. Their
statements live beside it, one concept each: the schema and its migrations
(``_postgres_schema``), sessions and their logs (``_postgres_log``), checkpoints
(``_postgres_checkpoints``), and the event stream and the outbox (``_postgres_outbox``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import secrets
from collections.abc import AsyncIterator, Collection, Hashable, Sequence
from datetime import datetime, timedelta
from typing import Any

from .._extras import missing_extra
from ..errors import StoreError
from . import _postgres_checkpoints, _postgres_log, _postgres_outbox
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
from ._postgres_schema import SCHEMA_VERSION as SCHEMA_VERSION  # the schema's version, named beside its store
from ._postgres_schema import create_schema
from ._signal import Signal
from ._url import option_in, postgres_url_problem, schema_problem

try:
    import asyncpg
    from asyncpg.pool import PoolConnectionProxy
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("asyncpg", "postgres") from exc

__all__ = ["PostgresSessionStore"]

# While events of a transaction still running are held back, readers look again this often.
_HELD_BACK_POLL = 0.02


def _quote_identifier(name: str) -> str:
    if (problem := schema_problem(name)) is not None:
        raise ValueError(f"{name[:80]!r} is not a usable PostgreSQL schema name: {problem}")
    return '"' + name.replace('"', '""') + '"'


class PostgresSessionStore:
    """Sessions in PostgreSQL tables (``pausepoint_sessions``, ``pausepoint_records``).

    ``connection`` is a ``postgresql://`` URL (the store makes, and on ``close`` closes, its
    own pool of ``min_size``..``max_size`` connections) or an existing ``asyncpg.Pool`` (which
    stays the caller's to close). ``schema`` names the PostgreSQL schema holding the tables
    (``public`` unless given, or named in the URL's query as ``pausepoint serve --store`` takes
    it: ``postgresql://host/db?schema=NAME``); it is created if missing. Tables are created on
    first use; a database holding a newer or unknown pausepoint schema raises
    ``SchemaVersionError`` then. Any database failure raises ``StoreError`` with the asyncpg
    error as its cause.
    """

    def __init__(
        self,
        connection: str | asyncpg.Pool,
        *,
        schema: str | None = None,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        min_size: int = 1,
        max_size: int = 10,
    ) -> None:
        if isinstance(connection, str):
            connection, schema = option_in(connection, "schema", schema)
            if (problem := postgres_url_problem(connection)) is not None:
                raise ValueError(f"the PostgreSQL URL cannot be used: {problem}")
            self._dsn: str | None = connection
            self._pool: asyncpg.Pool | None = None
        else:
            self._dsn = None
            self._pool = connection
        self._owns_pool = self._dsn is not None
        self._pool_sizes = (min_size, max_size)
        schema = "public" if schema is None else schema
        self.schema = schema
        self.max_record_bytes = max_record_bytes
        self._quoted = quoted = _quote_identifier(schema)
        # A channel name is at most 63 bytes, a schema name may be as long: name it by a digest.
        self._channel = "pausepoint_" + hashlib.sha256(schema.encode()).hexdigest()[:24]
        self._signal = Signal()
        self._listener: asyncpg.Connection | PoolConnectionProxy[asyncpg.Record] | None = None
        self._listen_lock = asyncio.Lock()
        self._ranges = BlockingLoop("pausepoint-postgres-ranges", self._ranges_connection, _close_connection)
        self._sql = {
            **_postgres_log.log_statements(quoted),
            **_postgres_checkpoints.checkpoint_statements(quoted),
            **_postgres_outbox.outbox_statements(quoted),
        }
        self._ready = False
        self._ready_lock = asyncio.Lock()
        self._secret: bytes | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # where its connections were made

    @property
    def event_source(self) -> Hashable:
        """Its DSN (or its pool) and schema (``stores.event_stream``)."""
        return ("postgresql", self._dsn if self._dsn is not None else id(self._pool), self.schema)

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

    def _in_this_loop(self) -> None:
        """Connections serve the event loop they were made in: in another (a second
        ``asyncio.run``), a pool of the store's own is made anew — the old one is left to the
        loop it belongs to — and a pool it was given is refused with ``StoreError``."""
        loop = asyncio.get_running_loop()
        if loop is self._loop:
            return
        if self._loop is not None:
            if not self._owns_pool:
                raise StoreError(
                    "the asyncpg pool given to this store was made in another event loop: "
                    "make a pool (and a store) in each event loop that uses one",
                    schema=self.schema,
                )
            self._pool, self._listener = None, None
            self._ready_lock, self._listen_lock = asyncio.Lock(), asyncio.Lock()
        self._loop = loop

    async def _ready_pool(self) -> asyncpg.Pool:
        """The pool, once the schema is known to be there and of our version."""
        self._in_this_loop()
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
                    await create_schema(conn, self.schema, self._quoted)
                self._ready = True
            return self._pool

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
        args = _postgres_log.append_args(session_id, summary, new_version, entries, events, self._channel)
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
        return None if row is None else _postgres_log.summary(row)

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
        sql, args = _postgres_log.sessions_query(
            self._sql["list"],
            owner=owner,
            tenant=tenant,
            agent=agent,
            has_pending=has_pending,
            expiring_before=expiring_before,
            limit=limit,
            offset=offset,
        )
        pool = await self._ready_pool()
        async with self._translated("listing sessions"):
            rows = await pool.fetch(sql, *args)
        return [_postgres_log.summary(r) for r in rows]

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
        prefix_bytes = PREFIX_BYTES if self._dsn is not None else _postgres_checkpoints.WHOLE
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
        return [_postgres_outbox.event(r) for r in rows]

    async def last_event(self) -> int:
        return (await self._heads())[0]

    async def secret(self) -> bytes:
        if self._secret is None:
            pool = await self._ready_pool()
            async with self._translated("reading the store's secret"):
                await pool.execute(self._sql["make_secret"], secrets.token_hex(32))
                self._secret = bytes.fromhex(await pool.fetchval(self._sql["secret"]))
        return self._secret

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
        self._in_this_loop()
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
        return sorted((_postgres_outbox.delivery(r) for r in rows), key=lambda d: d.id)

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
        sql, args = _postgres_outbox.deliveries_query(
            self._sql["deliveries"], state=state, target=target, limit=limit, offset=offset
        )
        pool = await self._ready_pool()
        async with self._translated("listing deliveries"):
            rows = await pool.fetch(sql, *args)
        return [_postgres_outbox.delivery(r) for r in rows]

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
