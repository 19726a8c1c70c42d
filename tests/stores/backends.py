"""The store backends under test, each in a place of its own (a file, a schema, a key prefix).

A ``Backend`` opens stores on its place (several stores on one place share the data, as
several processes would), describes the place as JSON so a worker process can open it too
(``open_store``), can plant a schema version for the refusal tests, and removes everything at
the end. PostgreSQL and Redis come from ``PAUSEPOINT_TEST_POSTGRES_URL`` and
``PAUSEPOINT_TEST_REDIS_URL``; without them their tests skip, or fail when
``PAUSEPOINT_REQUIRE_SERVICES=1`` (as in CI).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

from pausepoint.stores import Checkpoint, InMemorySessionStore, SessionStore, SqliteSessionStore
from pausepoint.stores._base import check_replaces

from .sqlite_layouts import migrate_to, rewind_to_version_1

# "sqlite-files": SQLite with every checkpoint base in a file beside the database, as a long
# session's is (``SqliteSessionStore(checkpoint_file_bytes=...)``).
ALL = ["memory", "sqlite", "sqlite-files", "postgres", "redis"]
DURABLE = ["sqlite", "sqlite-files", "postgres", "redis"]

URL_VARIABLES = {"postgres": "PAUSEPOINT_TEST_POSTGRES_URL", "redis": "PAUSEPOINT_TEST_REDIS_URL"}


def service_url(name: str) -> str:
    """The test server URL for ``name``; skips (or fails, when services are required) without it."""
    variable = URL_VARIABLES[name]
    url = os.environ.get(variable)
    if url:
        return url
    if os.environ.get("PAUSEPOINT_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{variable} is not set, and PAUSEPOINT_REQUIRE_SERVICES=1 requires a {name} server")
    pytest.skip(f"{variable} is not set (source .ci/services.sh && start_services)")


def open_store(spec: dict[str, Any], **options: Any) -> SessionStore:
    """A store on the place ``spec`` describes (see ``Backend.spec``); used by worker processes too."""
    kind = spec["backend"]
    if kind == "sqlite":
        files = {"checkpoint_file_bytes": spec["checkpoint_file_bytes"]} if "checkpoint_file_bytes" in spec else {}
        return SqliteSessionStore(spec["path"], **{**files, **options})
    if kind == "postgres":
        from pausepoint.stores import PostgresSessionStore

        return PostgresSessionStore(spec["url"], schema=spec["schema"], **options)
    if kind == "redis":
        from pausepoint.stores import RedisSessionStore

        return RedisSessionStore(spec["url"], prefix=spec["prefix"], **options)
    raise ValueError(f"no durable backend {kind!r}")


class Backend:
    name: str
    durable = True

    def spec(self) -> dict[str, Any]:
        raise NotImplementedError

    def process_spec(self, client: str) -> dict[str, Any]:
        """``spec()`` for a process whose connections the server knows by the name ``client``
        (see ``wait_disconnected``)."""
        return self.spec()

    async def wait_disconnected(self, client: str) -> None:
        """Wait until the server holds no connection of the process opened as ``client``.

        A process killed with SIGKILL may have sent its last statement (a COMMIT) without
        waiting for the reply: the server still carries it out, then sees the connection gone.
        Until then a reader may see the session before that statement and, a moment later,
        after it. A SQLite transaction lives in the process and dies with it: nothing to wait for.
        """
        return None

    async def open(self, **options: Any) -> SessionStore:
        return open_store(self.spec(), **options)

    async def set_schema_version(self, value: str) -> None:
        """Make the place claim pausepoint schema ``value`` (a store must have used it before)."""
        raise NotImplementedError

    async def schema_version(self) -> str:
        raise NotImplementedError

    async def make_version_1(self) -> None:
        """Turn the place back into what pausepoint's schema version 1 made (no events, no outbox,
        no checkpoints, no checkpoint extensions)."""
        raise NotImplementedError

    async def make_version_before_tenants(self) -> None:
        """Turn the place back into the layout of the release before tenants (SQLite 6,
        PostgreSQL 5, Redis 5): no session has a tenant, and nothing lists them by tenant."""
        raise NotImplementedError

    async def drop_checkpoint_bases(self) -> None:
        """Remove every checkpoint base kept apart from its checkpoint (PostgreSQL, Redis), as
        expiry removes a replaced one."""
        raise NotImplementedError

    async def count_checkpoint_bases(self, session_id: str) -> int:
        """How many bases of the session's checkpoint the place holds (PostgreSQL, Redis)."""
        raise NotImplementedError

    async def make_version_4(self, session_id: str) -> None:
        """Turn the place's checkpoints back into what schema version 4 kept (PostgreSQL, Redis):
        each base with its checkpoint, without its version; the session's is ``b"an old base"``."""
        raise NotImplementedError

    def hold_writes(self, session_id: str) -> contextlib.AbstractAsyncContextManager[None]:
        """While entered, appends to ``session_id`` wait (reads may too); they proceed on exit.

        Racers that all reach their append inside the hold collide when it ends, so the
        conditional append — not the luck of process scheduling — decides the race.
        """
        raise NotImplementedError

    async def cleanup(self) -> None:
        return None


class MemoryCheckpoints(InMemorySessionStore):
    """A store of one's own that keeps checkpoints in memory (the in-memory store keeps none):
    the fastest ``CheckpointStore`` for tests of the checkpoint code (the store suite runs on its
    subclass, ``StoreWithoutMerging``)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._checkpoints: dict[str, Checkpoint] = {}

    async def write_checkpoint(self, session_id: str, version: int, data: bytes) -> bool:
        found = await self.read(session_id)
        if found is None or found.version < version:
            return False
        current = self._checkpoints.get(session_id)
        if current is not None and current.version >= version:
            return False
        # A view of the bytes, as the SQLite store gives a mapped file: checked a chunk at a time.
        self._checkpoints[session_id] = Checkpoint(version, memoryview(bytes(data)))
        return True

    async def extend_checkpoint(
        self, session_id: str, after: int, version: int, data: bytes, *, replaces: int = 0
    ) -> bool:
        check_replaces(replaces)
        found = await self.read(session_id)
        current = self._checkpoints.get(session_id)
        if found is None or current is None or current.version != after or not after < version <= found.version:
            return False
        if len(current.extensions) < replaces:
            return False
        kept = current.extensions[: len(current.extensions) - replaces]
        self._checkpoints[session_id] = Checkpoint(version, current.data, (*kept, bytes(data)))
        return True

    async def read_checkpoint(self, session_id: str) -> Checkpoint | None:
        return self._checkpoints.get(session_id) if await self.read(session_id) is not None else None

    async def delete(self, session_id: str) -> bool:
        self._checkpoints.pop(session_id, None)
        return await super().delete(session_id)


class StoreWithoutMerging(MemoryCheckpoints):
    """A store of one's own written before extensions could be merged: its
    ``extend_checkpoint`` takes no ``replaces``."""

    async def extend_checkpoint(self, session_id: str, after: int, version: int, data: bytes) -> bool:  # type: ignore[override]
        return await super().extend_checkpoint(session_id, after, version, data)


class MemoryBackend(Backend):
    """One shared in-memory store: every ``open()`` without options returns it."""

    name = "memory"
    durable = False

    def __init__(self) -> None:
        self._shared = InMemorySessionStore()

    async def open(self, **options: Any) -> SessionStore:
        return InMemorySessionStore(**options) if options else self._shared


class SqliteBackend(Backend):
    name = "sqlite"

    def __init__(self, directory: Path) -> None:
        self.path = directory / "sessions.db"

    def spec(self) -> dict[str, Any]:
        return {"backend": "sqlite", "path": str(self.path)}

    async def set_schema_version(self, value: str) -> None:
        with sqlite3.connect(self.path) as conn:
            conn.execute("UPDATE pausepoint_meta SET value = ? WHERE key = 'schema_version'", (value,))
        conn.close()

    async def schema_version(self) -> str:
        with contextlib.closing(sqlite3.connect(self.path)) as conn:
            return str(conn.execute("SELECT value FROM pausepoint_meta WHERE key = 'schema_version'").fetchone()[0])

    async def make_version_1(self) -> None:
        with contextlib.closing(sqlite3.connect(self.path, isolation_level=None)) as conn:
            rewind_to_version_1(conn)

    async def make_version_before_tenants(self) -> None:
        with contextlib.closing(sqlite3.connect(self.path, isolation_level=None)) as conn:
            rewind_to_version_1(conn)
            migrate_to(conn, 6)

    @contextlib.asynccontextmanager
    async def hold_writes(self, session_id: str) -> AsyncIterator[None]:
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")  # the write lock; WAL readers carry on
            yield
            conn.execute("ROLLBACK")
        finally:
            conn.close()


class SqliteFilesBackend(SqliteBackend):
    """SQLite keeping every checkpoint base, however small, in a file beside the database."""

    name = "sqlite-files"

    def spec(self) -> dict[str, Any]:
        return {**super().spec(), "checkpoint_file_bytes": 1}


class PostgresBackend(Backend):
    """A fresh PostgreSQL schema per test, dropped at the end."""

    name = "postgres"

    def __init__(self, url: str) -> None:
        self.url = url
        self.schema = f"pptest_{uuid.uuid4().hex[:12]}"

    def spec(self) -> dict[str, Any]:
        return {"backend": "postgres", "url": self.url, "schema": self.schema}

    def process_spec(self, client: str) -> dict[str, Any]:
        return {**self.spec(), "url": _with_query(self.url, application_name=self._tag(client))}

    async def wait_disconnected(self, client: str) -> None:
        import asyncpg

        conn = await asyncpg.connect(self.url)
        try:
            query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1"
            await _until_none(lambda: conn.fetchval(query, self._tag(client)), client)
        finally:
            await conn.close()

    def _tag(self, client: str) -> str:
        """The name the server shows for ``client``: unique to this test's schema, even when
        other test runs share the server (PostgreSQL keeps the first 63 bytes)."""
        return f"{self.schema}/{client}"[:63]

    @property
    def quoted(self) -> str:
        return '"' + self.schema.replace('"', '""') + '"'

    async def _execute(self, sql: str, *args: Any) -> None:
        import asyncpg

        conn = await asyncpg.connect(self.url)
        try:
            await conn.execute(sql, *args)
        finally:
            await conn.close()

    async def set_schema_version(self, value: str) -> None:
        await self._execute(f"UPDATE {self.quoted}.pausepoint_meta SET value = $1 WHERE key = 'schema_version'", value)

    async def schema_version(self) -> str:
        import asyncpg

        conn = await asyncpg.connect(self.url)
        try:
            return str(
                await conn.fetchval(f"SELECT value FROM {self.quoted}.pausepoint_meta WHERE key = 'schema_version'")
            )
        finally:
            await conn.close()

    async def make_version_1(self) -> None:
        await self._execute(
            f"DROP TABLE {self.quoted}.pausepoint_events; DROP TABLE {self.quoted}.pausepoint_deliveries; "
            f"DROP TABLE {self.quoted}.pausepoint_checkpoints; "
            f"DROP TABLE {self.quoted}.pausepoint_checkpoint_extensions; "
            f"DROP TABLE {self.quoted}.pausepoint_checkpoint_bases; "
            f"{self._without_tenants()}"
            f"UPDATE {self.quoted}.pausepoint_meta SET value = '1' WHERE key = 'schema_version'"
        )

    async def make_version_before_tenants(self) -> None:
        version = f"UPDATE {self.quoted}.pausepoint_meta SET value = '5' WHERE key = 'schema_version'"
        await self._execute(self._without_tenants() + version)

    def _without_tenants(self) -> str:
        """What takes the sessions' table back to before version 6 (tenants)."""
        return (
            f"DROP INDEX {self.quoted}.pausepoint_sessions_tenant; "
            f"ALTER TABLE {self.quoted}.pausepoint_sessions DROP COLUMN tenant; "
        )

    async def drop_checkpoint_bases(self) -> None:
        await self._execute(f"DELETE FROM {self.quoted}.pausepoint_checkpoint_bases")

    async def count_checkpoint_bases(self, session_id: str) -> int:
        import asyncpg

        conn = await asyncpg.connect(self.url)
        try:
            sql = f"SELECT count(*) FROM {self.quoted}.pausepoint_checkpoint_bases WHERE session_id = $1"
            return int(await conn.fetchval(sql, session_id))
        finally:
            await conn.close()

    async def make_version_4(self, session_id: str) -> None:
        s = self.quoted
        await self._execute(
            f"DROP TABLE {s}.pausepoint_checkpoint_bases; DELETE FROM {s}.pausepoint_checkpoints; "
            f"ALTER TABLE {s}.pausepoint_checkpoints DROP COLUMN base, ADD COLUMN data bytea NOT NULL; "
            f"{self._without_tenants()}"
            f"UPDATE {s}.pausepoint_meta SET value = '4' WHERE key = 'schema_version'"
        )
        await self._execute(f"INSERT INTO {s}.pausepoint_checkpoints VALUES ($1, 3, 'an old base')", session_id)

    @contextlib.asynccontextmanager
    async def hold_writes(self, session_id: str) -> AsyncIterator[None]:
        import asyncpg

        conn = await asyncpg.connect(self.url)
        try:
            async with conn.transaction():
                # The session row's lock: appends wait on it, plain reads do not.
                await conn.execute(
                    f"SELECT 1 FROM {self.quoted}.pausepoint_sessions WHERE id = $1 FOR UPDATE", session_id
                )
                yield
        finally:
            await conn.close()

    async def cleanup(self) -> None:
        await self._execute(f"DROP SCHEMA IF EXISTS {self.quoted} CASCADE")


class RedisBackend(Backend):
    """A fresh key prefix per test, whose keys are deleted at the end."""

    name = "redis"

    def __init__(self, url: str) -> None:
        self.url = url
        self.prefix = f"pptest:{uuid.uuid4().hex[:12]}:"

    def spec(self) -> dict[str, Any]:
        return {"backend": "redis", "url": self.url, "prefix": self.prefix}

    def process_spec(self, client: str) -> dict[str, Any]:
        return {**self.spec(), "url": _with_query(self.url, client_name=self._tag(client))}

    async def wait_disconnected(self, client: str) -> None:
        import redis.asyncio as aioredis

        tag = self._tag(client)
        async with aioredis.Redis.from_url(self.url) as redis:

            async def connected() -> int:
                return sum(1 for c in await redis.client_list() if c.get("name") == tag)

            await _until_none(connected, client)

    def _tag(self, client: str) -> str:
        """The name the server shows for ``client``: unique to this test's key prefix, even when
        other test runs share the server (a client name has no spaces)."""
        return self.prefix.replace(":", "-") + client

    async def set_schema_version(self, value: str) -> None:
        import redis.asyncio as aioredis

        async with aioredis.Redis.from_url(self.url) as client:
            await client.set(self.prefix + "schema_version", value)

    async def schema_version(self) -> str:
        import redis.asyncio as aioredis

        async with aioredis.Redis.from_url(self.url) as client:
            return (await client.get(self.prefix + "schema_version")).decode()

    async def make_version_1(self) -> None:
        import redis.asyncio as aioredis

        async with aioredis.Redis.from_url(self.url) as client:
            outbox = [key async for key in client.scan_iter(match=self.prefix + "event*", count=1000)]
            outbox += [key async for key in client.scan_iter(match=self.prefix + "deliver*", count=1000)]
            outbox += [key async for key in client.scan_iter(match=self.prefix + "checkpoint*", count=1000)]
            if outbox:
                await client.delete(*outbox)
            await client.set(self.prefix + "schema_version", "1")

    async def make_version_before_tenants(self) -> None:
        import redis.asyncio as aioredis

        async with aioredis.Redis.from_url(self.url) as client:
            async for key in client.scan_iter(match=self.prefix + "summary:*", count=1000):
                await client.hdel(key, "tenant")
            indexes = [key async for key in client.scan_iter(match=self.prefix + "tenant:*", count=1000)]
            if indexes:
                await client.delete(*indexes)
            await client.set(self.prefix + "schema_version", "5")

    async def drop_checkpoint_bases(self) -> None:
        import redis.asyncio as aioredis

        async with aioredis.Redis.from_url(self.url) as client:
            keys = [key async for key in client.scan_iter(match=self.prefix + "checkpoint-base:*", count=1000)]
            if keys:
                await client.delete(*keys)

    async def count_checkpoint_bases(self, session_id: str) -> int:
        import redis.asyncio as aioredis

        async with aioredis.Redis.from_url(self.url) as client:
            match = f"{self.prefix}checkpoint-base:{session_id}:*"
            return len([key async for key in client.scan_iter(match=match, count=1000)])

    async def make_version_4(self, session_id: str) -> None:
        import redis.asyncio as aioredis

        async with aioredis.Redis.from_url(self.url) as client:
            head = f"{self.prefix}checkpoint:{session_id}"
            await client.delete(head)
            await client.hset(head, mapping={"version": 3, "data": b"an old base"})
            await client.set(self.prefix + "schema_version", "4")

    @contextlib.asynccontextmanager
    async def hold_writes(self, session_id: str) -> AsyncIterator[None]:
        import redis.asyncio as aioredis

        async with aioredis.Redis.from_url(self.url) as client:
            # Holds every client's scripts (the store's reads are scripts too) until unpaused;
            # the racers' claims are then queued together. The pause ends by itself after 5 s
            # (a hold lasts well under one) should the unpause never arrive.
            await client.execute_command("CLIENT", "PAUSE", "5000", "WRITE")
            try:
                yield
            finally:
                await client.execute_command("CLIENT", "UNPAUSE")

    async def cleanup(self) -> None:
        import redis.asyncio as aioredis

        async with aioredis.Redis.from_url(self.url) as client:
            keys = [key async for key in client.scan_iter(match=self.prefix + "*", count=1000)]
            if keys:
                await client.delete(*keys)


def _with_query(url: str, **params: str) -> str:
    """``url`` with ``params`` added to its query string."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query=urlencode([*parse_qsl(parts.query), *params.items()])))


_DISCONNECT_SECONDS = 30.0


async def _until_none(count: Callable[[], Awaitable[int]], client: str) -> None:
    """Poll ``count()`` (connections of ``client``) until it is 0."""
    deadline = time.monotonic() + _DISCONNECT_SECONDS
    while await count():
        if time.monotonic() > deadline:
            raise AssertionError(f"the server still holds connections of {client} after {_DISCONNECT_SECONDS:g} s")
        await asyncio.sleep(0.01)


def make_backend(name: str, directory: Path) -> Backend:
    if name == "memory":
        return MemoryBackend()
    if name == "sqlite":
        return SqliteBackend(directory)
    if name == "sqlite-files":
        return SqliteFilesBackend(directory)
    if name == "postgres":
        return PostgresBackend(service_url("postgres"))
    if name == "redis":
        return RedisBackend(service_url("redis"))
    raise ValueError(name)
