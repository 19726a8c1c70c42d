"""What only ``PostgresSessionStore`` has: pools, schemas, error translation."""

from __future__ import annotations

import socket

import pytest

from pausepoint.errors import StoreError
from pausepoint.stores import LogEntry, LogSlice
from pausepoint.testing.stores import summary

from .backends import PostgresBackend, service_url

asyncpg = pytest.importorskip("asyncpg")

from pausepoint.stores import PostgresSessionStore  # noqa: E402


@pytest.fixture
async def place():
    made = PostgresBackend(service_url("postgres"))
    yield made
    await made.cleanup()


async def test_uses_a_pool_it_is_given_and_leaves_it_open(place):
    pool = await asyncpg.create_pool(place.url, min_size=1, max_size=2)
    try:
        store = PostgresSessionStore(pool, schema=place.schema)
        await store.append("s1", 0, [LogEntry(1, "message", b"{}")], summary("s1", 1))
        await store.close()
        assert await pool.fetchval(f"SELECT count(*) FROM {place.quoted}.pausepoint_records") == 1
    finally:
        await pool.close()


async def test_schemas_keep_deployments_apart(place):
    other = PostgresBackend(place.url)
    first, second = await place.open(), await other.open()
    try:
        await first.append("s1", 0, [LogEntry(1, "message", b"1")], summary("s1", 1))
        await second.append("s1", 0, [LogEntry(1, "message", b"2")], summary("s1", 1, owner="bob"))
        assert await first.read("s1") == LogSlice(1, [LogEntry(1, "message", b"1")])
        assert [s.owner for s in await second.list_sessions()] == ["bob"]
    finally:
        await first.close()
        await second.close()
        await other.cleanup()


async def test_the_url_may_name_the_schema_as_serve_takes_it(place):
    """``PostgresSessionStore("postgresql://...?schema=NAME")``, the form ``serve --store`` and
    the README give: the schema is the URL's (not a server option PostgreSQL refuses)."""
    sep = "&" if "?" in place.url else "?"
    store = PostgresSessionStore(f"{place.url}{sep}schema={place.schema}")
    try:
        assert store.schema == place.schema
        await store.append("s1", 0, [LogEntry(1, "message", b"{}")], summary("s1", 1))
    finally:
        await store.close()
    known = await place.open()  # the same schema named by its keyword
    try:
        assert await known.read("s1") == LogSlice(1, [LogEntry(1, "message", b"{}")])
    finally:
        await known.close()
    with pytest.raises(ValueError, match="name one"):
        PostgresSessionStore("postgresql://localhost/x?schema=a", schema="b")


async def test_a_schema_name_needing_quotes(place):
    place.schema = 'pp "odd" Name'
    store = await place.open()
    try:
        await store.append("s1", 0, [LogEntry(1, "message", b"{}")], summary("s1", 1))
        assert (await store.get_summary("s1")) == summary("s1", 1)
    finally:
        await store.close()


@pytest.mark.parametrize("name", ["", "x" * 64, "a\x00b"])
def test_unusable_schema_names_are_refused(name):
    with pytest.raises(ValueError):
        PostgresSessionStore("postgresql://localhost/x", schema=name)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("postgresql://u:hunter2@127.0.0.1:99999/db", "port is a number from 1 to 65535, not '99999'"),
        ("postgresql://u:hunter2@127.0.0.1:abc/db", "port is a number from 1 to 65535, not 'abc'"),
        ("postgresql://u:hunter2@h1:5432,[::1]:70000/db", "not '70000'"),
        ("postgresql://u:hunter2@/db?port=5432,65536", "not '65536'"),
        ("postgresql://u:hunter2@h/db?target_session_attrs=foo", "target_session_attrs is one of any, primary"),
        ("postgresql://u:hunter2@h/db?sslmode=requir", "sslmode is one of disable, allow, prefer, require"),
        ("postgresql://u:hunter2@h/db?sslmode=require&sslmode=disable", "names sslmode twice"),
    ],
)
def test_a_url_asyncpg_would_refuse_or_read_otherwise_is_refused_where_the_store_is_made(url, said):
    """Found by a probe: a port past 65535 reached port modulo 65536 on uvloop (a session written
    to whatever listened there) and was an ``OverflowError`` on asyncio's loop (a 500 a request);
    a ``target_session_attrs`` asyncpg refuses failed every connection. The URL is not echoed."""
    with pytest.raises(ValueError, match="the PostgreSQL URL cannot be used") as caught:
        PostgresSessionStore(url)
    assert said in str(caught.value) and "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    "url", ["postgresql://u@h:5432/db", "postgresql://u@[::1]:5432,h2/db?port=5433", "postgresql:///db?sslmode=verify_full"]
)
def test_a_url_asyncpg_takes_is_taken(url):
    PostgresSessionStore(url)  # nothing is opened until the store is used


async def test_connection_failure_is_a_store_error():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = PostgresSessionStore(f"postgresql://postgres@127.0.0.1:{port}/none")
    with pytest.raises(StoreError) as caught:
        await store.read("s1")
    assert isinstance(caught.value.__cause__, OSError | asyncpg.PostgresError | asyncpg.InterfaceError)
    await store.close()


async def test_server_errors_are_store_errors_with_their_cause(place):
    store = await place.open()
    try:
        await store.read("s1")  # creates the tables
        await place._execute(f"DROP TABLE {place.quoted}.pausepoint_records")
        with pytest.raises(StoreError) as caught:
            await store.read("s1")
        assert isinstance(caught.value.__cause__, asyncpg.UndefinedTableError)
    finally:
        await store.close()


async def test_a_closed_store_refuses_work(place):
    store = await place.open()
    await store.read("s1")
    await store.close()
    with pytest.raises(StoreError):
        await store.read("s1")


async def test_an_append_not_yet_durable_leaves_the_connection_as_it_was(place):
    """``durable=False`` relaxes ``synchronous_commit`` for its own transaction only."""
    pool = await asyncpg.create_pool(place.url, min_size=1, max_size=1)
    try:
        store = PostgresSessionStore(pool, schema=place.schema)
        await store.append("s1", 0, [LogEntry(1, "message", b"{}")], summary("s1", 1), durable=False)
        await store.append("s1", 1, [LogEntry(2, "message", b"{}")], summary("s1", 2), durable=False)
        assert await pool.fetchval("SHOW synchronous_commit") == "on"
        assert (await store.read("s1")) == LogSlice(2, [LogEntry(1, "message", b"{}"), LogEntry(2, "message", b"{}")])
        await store.close()
    finally:
        await pool.close()


async def test_the_stores_own_pool_needs_no_reset_between_uses(place):
    """The pool the store makes skips asyncpg's session reset on release: what the store does
    on a connection (a relaxed commit, a schema lock) must end with its transaction."""
    store = PostgresSessionStore(place.url, schema=place.schema, min_size=1, max_size=1)
    try:
        await store.append("s1", 0, [LogEntry(1, "message", b"{}")], summary("s1", 1), durable=False)
        await store.append("s1", 1, [LogEntry(2, "message", b"{}")], summary("s1", 2))
        pool = store._pool  # the one connection every call above used
        assert pool is not None
        async with pool.acquire() as conn:
            assert await conn.fetchval("SHOW synchronous_commit") == "on"
            assert not conn.is_in_transaction()
            assert (
                await conn.fetchval(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
                )
                == 0
            )
    finally:
        await store.close()
