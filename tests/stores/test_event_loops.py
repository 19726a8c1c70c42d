"""A store used from a second event loop (``asyncio.run`` twice in one script): one that made
its own connections makes them anew and serves it, as SQLite's does; one given a pool or a
client made in another loop says so with ``StoreError`` (found by a probe: asyncpg's and
redis-py's raw ``RuntimeError: Event loop is closed``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pausepoint import Pausepoint
from pausepoint.errors import StoreError
from pausepoint.testing import ScriptedModel

from .backends import PostgresBackend, RedisBackend, open_store, service_url

BACKENDS = {"postgres": PostgresBackend, "redis": RedisBackend}


@pytest.mark.parametrize("name", ["postgres", "redis"])
def test_a_store_of_its_own_connections_serves_a_second_event_loop(name: str) -> None:
    backend = BACKENDS[name](service_url(name))
    store = open_store(backend.spec())
    agent = Pausepoint().define_agent(name="a", model=ScriptedModel(["one", "two"]), store=store)
    try:
        assert asyncio.run(agent.chat("s").send("hi")).text == "one"
        assert asyncio.run(agent.chat("s").send("again")).text == "two"  # a new loop, the same store

        async def read() -> list[str]:
            texts = [m.text for m in await agent.chat("s").history()]
            await store.close()
            return texts

        assert asyncio.run(read()) == ["hi", "one", "again", "two"]
    finally:
        asyncio.run(backend.cleanup())


@pytest.mark.parametrize("name", ["postgres", "redis"])
def test_a_store_given_a_pool_or_client_of_another_event_loop_says_so(name: str) -> None:
    backend = BACKENDS[name](service_url(name))
    made: dict[str, Any] = {}

    async def first() -> None:
        if name == "postgres":
            import asyncpg

            from pausepoint.stores import PostgresSessionStore

            made["pool"] = await asyncpg.create_pool(backend.url, min_size=1, max_size=2)
            made["store"] = PostgresSessionStore(made["pool"], schema=backend.schema)
        else:
            import redis.asyncio as aioredis

            from pausepoint.stores import RedisSessionStore

            made["pool"] = aioredis.Redis.from_url(backend.url)
            made["store"] = RedisSessionStore(made["pool"], prefix=backend.prefix)
        assert await made["store"].get_summary("s") is None

    async def second() -> None:
        with pytest.raises(StoreError, match="made in another event loop"):
            await made["store"].get_summary("s")

    try:
        asyncio.run(first())
        asyncio.run(second())
    finally:
        asyncio.run(backend.cleanup())
