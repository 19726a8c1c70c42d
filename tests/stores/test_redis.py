"""What only ``RedisSessionStore`` has: clients, prefixes, error translation."""

from __future__ import annotations

import socket

import pytest

from pausepoint.errors import StoreError
from pausepoint.stores import LogEntry, LogSlice
from pausepoint.testing.stores import summary

from .backends import RedisBackend, service_url

aioredis = pytest.importorskip("redis.asyncio")

from pausepoint.stores import RedisSessionStore  # noqa: E402


@pytest.fixture
async def place():
    made = RedisBackend(service_url("redis"))
    yield made
    await made.cleanup()


async def test_uses_a_client_it_is_given_and_leaves_it_open(place):
    async with aioredis.Redis.from_url(place.url) as client:
        store = RedisSessionStore(client, prefix=place.prefix)
        await store.append("s1", 0, [LogEntry(1, "message", b"{}")], summary("s1", 1))
        await store.close()
        assert await client.llen(place.prefix + "log:s1") == 1


async def test_a_prefix_in_the_url_is_the_key_prefix_as_the_cli_reads_it(place):
    """Found by a probe: ``?prefix=`` (what ``serve --store`` takes) went to redis-py's connection,
    a raw TypeError on the first call."""
    store = RedisSessionStore(f"{place.url}?prefix={place.prefix}")
    try:
        await store.append("s1", 0, [LogEntry(1, "message", b"{}")], summary("s1", 1))
    finally:
        await store.close()
    async with aioredis.Redis.from_url(place.url) as client:
        assert await client.llen(place.prefix + "log:s1") == 1
    with pytest.raises(ValueError, match="names prefix"):
        RedisSessionStore(f"{place.url}?prefix={place.prefix}", prefix="other:")


async def test_a_decoding_client_is_refused(place):
    async with aioredis.Redis.from_url(place.url, decode_responses=True) as client:
        with pytest.raises(ValueError, match="decode_responses"):
            RedisSessionStore(client, prefix=place.prefix)


async def test_prefixes_keep_deployments_apart(place):
    other = RedisBackend(place.url)
    first, second = await place.open(), await other.open()
    try:
        await first.append("s1", 0, [LogEntry(1, "message", b"1")], summary("s1", 1))
        await second.append("s1", 0, [LogEntry(1, "message", b"2")], summary("s1", 1, owner="bob"))
        assert await first.read("s1") == LogSlice(1, [LogEntry(1, "message", b"1")])
        assert [s.owner for s in await second.list_sessions()] == ["bob"]
        assert [s.owner for s in await first.list_sessions(owner="bob")] == []
    finally:
        await first.close()
        await second.close()
        await other.cleanup()


async def test_a_kind_with_a_newline_is_refused(place):
    store = await place.open()
    try:
        with pytest.raises(ValueError):
            await store.append("s1", 0, [LogEntry(1, "bad\nkind", b"{}")], summary("s1", 1))
        assert await store.read("s1") is None
    finally:
        await store.close()


async def test_connection_failure_is_a_store_error():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = RedisSessionStore(f"redis://127.0.0.1:{port}/0")
    with pytest.raises(StoreError) as caught:
        await store.read("s1")
    assert caught.value.__cause__ is not None
    await store.close()


async def test_server_errors_are_store_errors_with_their_cause(place):
    from redis.exceptions import ResponseError

    store = await place.open()
    try:
        async with aioredis.Redis.from_url(place.url) as client:
            await client.set(place.prefix + "log:s1", "not a list")
            await client.hset(place.prefix + "summary:s1", "version", "1")
        with pytest.raises(StoreError) as caught:
            await store.read("s1")
        assert isinstance(caught.value.__cause__, ResponseError)
    finally:
        await store.close()


async def test_a_closed_store_refuses_work(place):
    store = await place.open()
    await store.read("s1")
    await store.close()
    with pytest.raises(StoreError):
        await store.read("s1")


@pytest.mark.parametrize("key", ["checkpoint", "checkpoint-ext"])
async def test_checkpoint_keys_of_another_type_are_no_checkpoint(place, key):
    """A checkpoint key replaced by a key of another type (by hand, say): the log is folded,
    every time, not a StoreError on every call (found by a probe)."""
    from pausepoint.demo import build

    from .test_checkpoints import cycle

    store = await place.open()
    try:
        _, writer = build(store)
        writer.checkpoint_every = 1
        sid = await cycle(writer)
        await cycle(writer, sid)
        await writer.sessions.settle()
        assert await store.read_checkpoint(sid) is not None
        async with aioredis.Redis.from_url(place.url) as client:
            await client.delete(f"{place.prefix}{key}:{sid}")
            await client.sadd(f"{place.prefix}{key}:{sid}", "not a checkpoint")
        assert await store.read_checkpoint(sid) is None
        _, cold = build(await place.open())
        assert [m.text for m in await cold.chat(sid).history()] == [m.text for m in await writer.chat(sid).history()]
        await cold.store.close()
    finally:
        await store.close()
