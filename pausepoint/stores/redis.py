"""``RedisSessionStore``: sessions in Redis, shared by every process of a deployment.

Keys (all under a configurable prefix, ``pausepoint:`` by default)::

    {prefix}schema_version      the layout version below, checked at start
    {prefix}log:{id}            list: the session's entries, ``kind`` + "\\n" + JSON
    {prefix}summary:{id}        hash: the session's summary (times in epoch microseconds)
    {prefix}checkpoint:{id}     hash: the session's checkpoint: ``version`` (its head: the
                                latest extension's, or the base's), ``base`` (its base's version)
    {prefix}checkpoint-ext:{id} list: the checkpoint's extensions, oldest first
    {prefix}checkpoint-base:{id}:{version}  string: a base; one a newer base replaced expires
                                ``PARTIAL_BASE_KEPT`` seconds later, or once
                                ``REPLACED_BASES_KEPT`` newer ones did (see ``read_checkpoint``)
    {prefix}checkpoint-bases:{id}  set: the versions of the session's bases still held
    {prefix}all                 sorted set: every session by updated time
    {prefix}agent:{agent}       sorted set: the agent's sessions by updated time
    {prefix}owner:{owner}       sorted set: the owner's sessions by updated time
    {prefix}tenant:{tenant}     sorted set: the tenant's sessions by updated time
    {prefix}pending             sorted set: sessions with pending interrupts by updated time
    {prefix}expiry              sorted set: sessions with an expiring pause, by expiry time
    {prefix}event_seq           counter: the latest event position handed out
    {prefix}events              sorted set: the event stream, by position (member: the event)
    {prefix}delivery_seq        counter: the latest delivery id handed out
    {prefix}delivery:{n}        hash: one delivery of the outbox
    {prefix}deliveries          sorted set: every delivery by id
    {prefix}deliveries:failed   sorted set: the failed deliveries by id
    {prefix}due:{target}        sorted set: a webhook's pending deliveries by due time

Every write is a Lua script, which Redis runs atomically: no other command runs between its
first and last line. The append script checks the version first and returns before writing
anything if it does not match, so a refused append leaves no trace; otherwise it pushes the
entries, rewrites the summary, moves the session in every index, adds the events and their
deliveries and publishes on the ``{prefix}events`` channel in the same step (a reader's
``wait_for_events`` subscribes to it). Equal
scores in a sorted set are ordered by member, so "most recently updated first" breaks ties by
session id, as on the SQL backends.

The scripts reach index keys derived from the prefix, so the store needs a single Redis server,
version 6.2 or later (or a cluster with a hash-tagged prefix such as ``{pausepoint}:``, which
keeps every key in one slot). Sessions are as durable as the server is configured to be, for
every append alike (``append(durable=...)`` changes nothing here): with Redis's default
snapshots a crash of the server loses the writes since the last snapshot; ``appendonly yes``
with ``appendfsync everysec`` loses up to about a second of writes on a power loss or OS crash
(a crash of the Redis process alone loses none); ``appendfsync always`` loses none. What a lost
write means is the same as for SQLite's ``synchronous=NORMAL``: an answer whose tool already
ran may be lost, and answering again would run the tool again. Every redis-py error is
translated to ``StoreError`` in ``_translated``.

The scripts live beside the store, one concept each: sessions and their logs (``_redis_log``),
checkpoints (``_redis_checkpoints``) and the outbox (``_redis_outbox``); replies are read back
into pausepoint's values in ``_redis_rows``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Collection, Hashable, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from .._extras import missing_extra
from ..errors import SchemaVersionError, StoreError
from . import _redis_rows
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
from ._redis_checkpoints import EXTEND_CHECKPOINT, READ_CHECKPOINT, WRITE_CHECKPOINT
from ._redis_log import APPEND, DELETE, LIST, READ, append_args, listing
from ._redis_outbox import CLAIM, LIST_DELIVERIES, PRUNE, REQUEUE, SETTLE
from ._redis_rows import us
from ._signal import Signal, wait_after
from ._url import option_in

try:
    import redis.asyncio as aioredis
    from redis.exceptions import RedisError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("redis", "redis") from exc

__all__ = ["RedisSessionStore"]

log = logging.getLogger("pausepoint")

# The layout's versions, each adding keys only, so a prefix of any earlier version is upgraded by
# naming the new one: 1 sessions and logs, 2 the event stream and the delivery outbox, 3
# checkpoints, 4 checkpoint extensions (named so that a process of layout 3, whose checkpoint
# writes would leave the extensions of an older base behind, refuses the prefix), 5 bases in keys
# of their own, by version (a checkpoint hash of layout 4 holds its base in ``data`` and no
# ``base``: it reads as no checkpoint, and the next base written replaces it), 6 a session's
# tenant (a ``tenant`` field of its summary, absent for none) and each tenant's index (named so
# that a process of layout 5, whose appends would leave a tenant's index behind, refuses the
# prefix). A new version that changes existing keys adds its migration here.
_LAYOUTS = [
    "sessions and logs",
    "the event stream and the delivery outbox",
    "checkpoints",
    "checkpoint extensions",
    "checkpoint bases by version",
    "tenants",
]
SCHEMA_VERSION = len(_LAYOUTS)
_UPGRADABLE = {str(version).encode() for version in range(1, SCHEMA_VERSION)}


async def _close_client(client: aioredis.Redis) -> None:
    with contextlib.suppress(RedisError, OSError):
        await client.aclose()


class RedisSessionStore:
    """Sessions in Redis, under the key ``prefix`` (see the module docstring for the layout).

    ``connection`` is a ``redis://`` URL (the store makes, and on ``close`` closes, its own
    client; a ``?prefix=`` in its query is the key prefix, as ``pausepoint serve --store`` reads
    it — ``ValueError`` if ``prefix=`` names another) or an existing ``redis.asyncio.Redis`` client created with
    ``decode_responses=False`` (which stays the caller's to close). The schema version key is
    checked on first use: a prefix holding a newer or unknown layout raises
    ``SchemaVersionError``. Any Redis failure raises ``StoreError`` with the redis-py error as
    its cause.
    """

    def __init__(
        self,
        connection: str | aioredis.Redis,
        *,
        prefix: str | None = None,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    ) -> None:
        if isinstance(connection, str):
            connection, prefix = option_in(connection, "prefix", prefix)
        prefix = "pausepoint:" if prefix is None else prefix
        self._url = connection if isinstance(connection, str) else None
        if isinstance(connection, str):
            self._client: aioredis.Redis | None = aioredis.Redis.from_url(connection, decode_responses=False)
            self._owns_client = True
        else:
            if connection.connection_pool.connection_kwargs.get("decode_responses"):
                raise ValueError("RedisSessionStore needs a client made with decode_responses=False")
            self._client = connection
            self._owns_client = False
        self.prefix = prefix
        self.max_record_bytes = max_record_bytes
        self._secret: bytes | None = None
        self._scripts = {
            name: self._client.register_script(source)
            for name, source in (
                ("append", APPEND),
                ("read", READ),
                ("list", LIST),
                ("delete", DELETE),
                ("write_checkpoint", WRITE_CHECKPOINT),
                ("extend_checkpoint", EXTEND_CHECKPOINT),
                ("read_checkpoint", READ_CHECKPOINT),
                ("claim", CLAIM),
                ("settle", SETTLE),
                ("requeue", REQUEUE),
                ("list_deliveries", LIST_DELIVERIES),
                ("prune", PRUNE),
            )
        }
        self._ready = False
        self._ranges = BlockingLoop("pausepoint-redis-ranges", self._ranges_client, _close_client)
        self._signal = Signal()
        self._subscriber: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # where its connections were made

    @property
    def event_source(self) -> Hashable:
        """The server and database it talks to, and its prefix (``stores.event_stream``)."""
        assert self._client is not None
        where = self._client.connection_pool.connection_kwargs
        return ("redis", where.get("host"), where.get("port"), where.get("path"), where.get("db"), self.prefix)

    def __repr__(self) -> str:
        return f"<RedisSessionStore prefix={self.prefix!r}>"

    # -- connection and schema ----------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _translated(self, action: str) -> AsyncIterator[None]:
        """The one place redis-py's errors become ``StoreError`` (pausepoint's own pass through)."""
        try:
            yield
        except (RedisError, OSError) as exc:
            raise StoreError(f"Redis failed while {action}: {exc}", prefix=self.prefix) from exc

    def _in_this_loop(self) -> None:
        """Connections serve the event loop they were made in: in another (a second
        ``asyncio.run``), a client of the store's own is made anew — the old one is left to the
        loop it belongs to — and a client it was given is refused with ``StoreError``."""
        loop = asyncio.get_running_loop()
        if loop is self._loop:
            return
        if self._loop is not None and self._client is not None:
            if self._url is None:
                raise StoreError(
                    "the Redis client given to this store was made in another event loop: "
                    "make a client (and a store) in each event loop that uses one",
                    prefix=self.prefix,
                )
            self._client = aioredis.Redis.from_url(self._url, decode_responses=False)
            self._subscriber = None
        self._loop = loop

    async def _ready_client(self) -> aioredis.Redis:
        """The client, once the prefix is known to hold our layout (checked on first use)."""
        self._in_this_loop()
        if self._client is None:
            raise StoreError("the store is closed")
        if not self._ready:
            await self._check_schema(self._client)
        return self._client

    async def _run(self, script: str, action: str, keys: list[str], args: list[Any]) -> Any:
        """Run one of the Lua scripts."""
        async with self._translated(action):
            client = await self._ready_client()
            return await self._scripts[script](keys=keys, args=args, client=client)

    async def _check_schema(self, client: aioredis.Redis) -> None:
        key = self.prefix + "schema_version"
        # SET NX: the first process claims the (empty) prefix; everyone then reads what is there.
        await client.set(key, str(SCHEMA_VERSION), nx=True)
        found = await client.get(key)
        if found in _UPGRADABLE:  # the new layout only adds keys: upgrading is naming it
            await client.set(key, str(SCHEMA_VERSION))
            found = str(SCHEMA_VERSION).encode()
        if found != str(SCHEMA_VERSION).encode():
            shown = found.decode(errors="replace") if isinstance(found, bytes) else found
            raise SchemaVersionError(
                f"Redis prefix {self.prefix!r} holds pausepoint schema version {shown!r}; this version of "
                f"pausepoint uses version {SCHEMA_VERSION}",
                found=shown,
                expected=SCHEMA_VERSION,
            )
        self._ready = True

    def _keys(self, session_id: str) -> list[str]:
        p = self.prefix
        return [f"{p}summary:{session_id}", f"{p}log:{session_id}", f"{p}all", f"{p}pending", f"{p}expiry"]

    # -- the contract -------------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        expected_version: int,
        entries: Sequence[LogEntry],
        summary: SessionSummary,
        events: Sequence[Event] = (),
        *,
        durable: bool = True,  # as durable as the server is configured to be (see the module docstring)
    ) -> int:
        check_entries(expected_version, entries, self.max_record_bytes, events)
        keys = [*self._keys(session_id), f"{self.prefix}agent:{summary.agent}"]
        if summary.owner is not None:
            keys.append(f"{self.prefix}owner:{summary.owner}")
        if summary.tenant is not None:
            keys.append(f"{self.prefix}tenant:{summary.tenant}")  # the script's last key
        args = append_args(self.prefix, session_id, expected_version, summary, entries, events)
        applied, version = await self._run("append", f"appending to session {session_id!r}", keys, args)
        if applied and events:
            self._signal.fire()
        if not applied:
            raise version_conflict(session_id, expected_version, int(version))
        return int(version)

    async def read(self, session_id: str, after_version: int = 0) -> LogSlice | None:
        keys = self._keys(session_id)[:2]
        reply = await self._run("read", f"reading session {session_id!r}", keys, [after_version])
        if reply is None:
            return None
        entries = []
        for version, entry in enumerate(reply[1:], start=after_version + 1):
            kind, _, data = entry.partition(b"\n")
            entries.append(LogEntry(version, kind.decode(), data))
        return LogSlice(int(reply[0]), entries)

    def _checkpoint_keys(self, session_id: str) -> list[str]:
        p = self.prefix
        return [f"{p}summary:{session_id}", f"{p}checkpoint:{session_id}", f"{p}checkpoint-ext:{session_id}"]

    def _base_stem(self, session_id: str) -> str:
        """The key of the session's base at version V is this and V."""
        return f"{self.prefix}checkpoint-base:{session_id}:"

    async def write_checkpoint(self, session_id: str, version: int, data: bytes) -> bool:
        action = f"writing the checkpoint of session {session_id!r}"
        keys = [*self._checkpoint_keys(session_id), f"{self.prefix}checkpoint-bases:{session_id}"]
        args = [version, data, self._base_stem(session_id), round(PARTIAL_BASE_KEPT * 1000), REPLACED_BASES_KEPT]
        return bool(await self._run("write_checkpoint", action, keys, args))

    async def extend_checkpoint(
        self, session_id: str, after: int, version: int, data: bytes, *, replaces: int = 0
    ) -> bool:
        check_replaces(replaces)
        action = f"extending the checkpoint of session {session_id!r}"
        keys = self._checkpoint_keys(session_id)
        return bool(await self._run("extend_checkpoint", action, keys, [after, version, data, replaces]))

    async def read_checkpoint(self, session_id: str) -> Checkpoint | None:
        # One script: the head, the extensions and the base's first PREFIX_BYTES in one atomic
        # step. A longer base is given in part (``_partial``): the runtime fetches the rest of it
        # a range at a time, as it reads it, from the base's own key, which a newer base leaves
        # in place for PARTIAL_BASE_KEPT seconds (unless REPLACED_BASES_KEPT newer ones replace it).
        _, head, extensions = self._checkpoint_keys(session_id)
        action = f"reading the checkpoint of session {session_id!r}"
        stem = self._base_stem(session_id)
        try:
            reply = await self._run("read_checkpoint", action, [head, extensions], [stem, PREFIX_BYTES])
            if not reply:
                return None
            version, base, length, prefix = int(reply[0]), int(reply[1]), int(reply[2]), bytes(reply[3])
            added = tuple(bytes(e) for e in reply[4:])
        except (StoreError, ValueError, TypeError, IndexError) as exc:
            # A checkpoint's keys of another type or shape than these write (set by hand, say) are
            # no checkpoint: the log is folded. Any other failure of the store is the store's.
            if isinstance(exc, StoreError) and "WRONGTYPE" not in str(exc.__cause__ or ""):
                raise
            log.warning("the checkpoint of session %s is not one this store wrote: ignored", session_id)
            return None
        if length <= len(prefix):
            return Checkpoint(version, prefix, added)
        key = f"{stem}{base}"
        partial = PartialBase(length, prefix, lambda start, stop: self._read_range(key, start, stop))
        return Checkpoint(version, partial.view, added, partial.fetch)

    def _read_range(self, key: str, start: int, stop: int) -> bytes:
        """Bytes ``start`` to ``stop - 1`` of the string at ``key``, blocking (see ``_partial``)."""

        async def getrange(client: aioredis.Redis) -> bytes:
            async with self._translated(f"reading part of a checkpoint ({key})"):
                return cast(bytes, await client.getrange(key, start, stop - 1))

        return self._ranges.run(getrange)

    async def _ranges_client(self) -> aioredis.Redis:
        """A client of its own for ``_ranges``' loop, to the same server as the store's."""
        if self._client is None:
            raise StoreError("the store is closed")
        pool = self._client.connection_pool
        return aioredis.Redis.from_pool(
            aioredis.ConnectionPool(connection_class=pool.connection_class, **pool.connection_kwargs)
        )

    async def get_summary(self, session_id: str) -> SessionSummary | None:
        async with self._translated(f"reading session {session_id!r}"):
            client = await self._ready_client()
            fields = await client.hgetall(self._keys(session_id)[0])
        if not fields:
            return None
        return _redis_rows.summary(session_id, {_redis_rows.text(k): v for k, v in fields.items()})

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
        source, args = listing(
            self.prefix,
            owner=owner,
            tenant=tenant,
            agent=agent,
            has_pending=has_pending,
            expiring_before=expiring_before,
            limit=limit,
            offset=offset,
        )
        if limit <= 0:
            return []
        rows = await self._run("list", "listing sessions", [source], args)
        return [
            _redis_rows.summary(row[0].decode(), {row[i].decode(): row[i + 1] for i in range(1, len(row), 2)})
            for row in rows
        ]

    async def delete(self, session_id: str) -> bool:
        gone = await self._run(
            "delete",
            f"deleting session {session_id!r}",
            self._keys(session_id),
            [
                session_id,
                self.prefix,
            ],
        )
        return bool(gone)

    # -- the event stream and the outbox --------------------------------------------------------

    async def read_events(self, after: int = 0, limit: int = 100) -> list[Event]:
        async with self._translated("reading events"):
            client = await self._ready_client()
            members = await client.zrangebyscore(f"{self.prefix}events", f"({after}", "+inf", start=0, num=limit)
        return [_redis_rows.event(m) for m in members if isinstance(m, bytes)]

    async def last_event(self) -> int:
        async with self._translated("reading events"):
            client = await self._ready_client()
            found = await client.get(f"{self.prefix}event_seq")
        return 0 if found is None else int(found)

    async def secret(self) -> bytes:
        if self._secret is None:
            key = f"{self.prefix}secret"  # made by the first process that asks for it
            async with self._translated("reading the store's secret"):
                client = await self._ready_client()
                await client.set(key, secrets.token_hex(32), nx=True)
                found = await client.get(key)
            if found is None:  # evicted between the two calls: asked again next time
                raise StoreError("the store's secret could not be read back (was the key evicted?)")
            self._secret = bytes.fromhex(found.decode() if isinstance(found, bytes) else str(found))
        return self._secret

    async def wait_for_events(self, after: int, max_wait: float) -> None:
        try:
            await self._subscribe()
        except StoreError:  # not subscribed now: look again soon instead
            max_wait = min(max_wait, 0.5)
        await wait_after(self._signal, after, max_wait, self.last_event)

    async def _subscribe(self) -> None:
        self._in_this_loop()
        if self._subscriber is not None and not self._subscriber.done():
            return
        async with self._translated("subscribing to events"):
            client = await self._ready_client()
            pubsub = client.pubsub()
            await pubsub.subscribe(f"{self.prefix}events")
        self._subscriber = asyncio.get_running_loop().create_task(self._listen(pubsub))

    async def _listen(self, pubsub: Any) -> None:
        try:
            async for message in pubsub.listen():
                if message.get("type") == "message":
                    self._signal.fire()
        except (RedisError, OSError):
            pass  # the next wait subscribes again
        finally:
            self._signal.fire()
            with contextlib.suppress(RedisError, OSError):
                await pubsub.aclose()

    async def claim_deliveries(
        self, targets: Collection[str], now: datetime, lease: timedelta, limit: int = 50
    ) -> list[Delivery]:
        if not targets or limit <= 0:
            return []
        args = [self.prefix, us(now), us(now + lease), secrets.token_hex(8), limit, *targets]
        rows = await self._run("claim", "claiming deliveries", [], args)
        return sorted((_redis_rows.delivery(r) for r in rows), key=lambda d: d.id)

    async def settle_delivery(
        self, delivery: Delivery, now: datetime, *, error: str | None = None, retry_at: datetime | None = None
    ) -> bool:
        state = "delivered" if error is None else ("pending" if retry_at is not None else "failed")
        args = [
            self.prefix,
            delivery.id,
            delivery.lease or "",
            state,
            "" if retry_at is None else us(retry_at),
            us(now),
            "0" if error is None else "1",
            error or "",
        ]
        return bool(await self._run("settle", "settling a delivery", [], args))

    async def list_deliveries(
        self, *, state: DeliveryState | None = None, target: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[Delivery]:
        if limit <= 0:
            return []
        args = [self.prefix, state or "", target or "", offset, limit, "0" if target is None else "1"]
        rows = await self._run("list_deliveries", "listing deliveries", [], args)
        return [_redis_rows.delivery(r) for r in rows]

    async def requeue_delivery(self, delivery_id: int, now: datetime) -> bool:
        return bool(await self._run("requeue", "requeueing a delivery", [], [self.prefix, delivery_id, us(now)]))

    async def prune_events(self, before: datetime) -> int:
        return int(await self._run("prune", "pruning events", [], [self.prefix, us(before)]))

    async def close(self) -> None:
        subscriber, self._subscriber = self._subscriber, None
        if subscriber is not None and not subscriber.done():
            subscriber.cancel()
            with contextlib.suppress(asyncio.CancelledError, RedisError, OSError):
                await subscriber
        await self._ranges.aclose()
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            async with self._translated("closing"):
                await client.aclose()
