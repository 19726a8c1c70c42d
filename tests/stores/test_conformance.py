"""The store contract (``pausepoint.stores.SessionStore``), checked on every backend alike."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from pausepoint.errors import PayloadTooLarge, SchemaVersionError, StoreError, VersionConflict
from pausepoint.stores import LogEntry, LogSlice, SessionStore, SessionSummary

DEFAULT_MAX_RECORD_BYTES = 1024 * 1024  # the documented default of every store

T0 = datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def summary(
    session_id: str,
    version: int,
    *,
    agent: str = "bankingAgent",
    owner: str | None = "alice",
    updated: float = 0,
    pending: int = 0,
    expiry: float | None = None,
    turn: int = 1,
) -> SessionSummary:
    return SessionSummary(
        session_id=session_id,
        agent=agent,
        owner=owner,
        version=version,
        created_at=T0,
        updated_at=at(updated),
        pending=pending,
        next_expiry=None if expiry is None else at(expiry),
        turn=turn,
    )


def entries(after: int, count: int, kind: str = "message") -> list[LogEntry]:
    return [LogEntry(after + i, kind, b'{"n": %d}' % (after + i)) for i in range(1, count + 1)]


async def put(store: SessionStore, s: SessionSummary, count: int = 1) -> None:
    """Create session ``s.session_id`` with ``count`` entries and summary ``s``."""
    await store.append(s.session_id, 0, entries(0, count), s)


def ids(summaries: list[SessionSummary]) -> list[str]:
    return [s.session_id for s in summaries]


# -- appends and reads ---------------------------------------------------------------------------


async def test_is_a_session_store(store):
    assert isinstance(store, SessionStore)
    assert store.max_record_bytes == DEFAULT_MAX_RECORD_BYTES


async def test_unknown_session(store):
    assert await store.read("nope") is None
    assert await store.read("nope", 3) is None
    assert await store.get_summary("nope") is None
    assert await store.list_sessions() == []
    assert await store.delete("nope") is False


async def test_append_then_read(store):
    written = entries(0, 3)
    s = summary("s1", 3, pending=1, expiry=60, turn=2)
    assert await store.append("s1", 0, written, s) == 3
    assert await store.read("s1") == LogSlice(3, written)
    assert await store.read("s1", 1) == LogSlice(3, written[1:])
    assert await store.read("s1", 3) == LogSlice(3, [])
    assert await store.get_summary("s1") == s


async def test_appends_continue_the_log(store):
    await store.append("s1", 0, entries(0, 2), summary("s1", 2))
    assert await store.append("s1", 2, entries(2, 1), summary("s1", 3, updated=1)) == 3
    assert await store.append("s1", 3, entries(3, 4), summary("s1", 7, updated=2, pending=2)) == 7
    found = await store.read("s1")
    assert found is not None
    assert found.version == 7
    assert [e.version for e in found.entries] == list(range(1, 8))
    assert found.entries == entries(0, 7)
    assert await store.get_summary("s1") == summary("s1", 7, updated=2, pending=2)
    assert (await store.read("s1", 5)) == LogSlice(7, entries(5, 2))


async def test_an_append_not_yet_durable_is_seen_at_once_and_continued(backend):
    """``durable=False`` changes when the append reaches stable storage, nothing else: it is
    visible to every store object at once, conditional like any append, and continued by a
    durable one."""
    writer, reader = await backend.open(), await backend.open()
    try:
        assert await writer.append("s1", 0, entries(0, 2), summary("s1", 2), durable=False) == 2
        assert await reader.read("s1") == LogSlice(2, entries(0, 2))
        with pytest.raises(VersionConflict):
            await reader.append("s1", 1, entries(1, 1), summary("s1", 2), durable=False)
        assert await reader.append("s1", 2, entries(2, 1), summary("s1", 3, updated=1), durable=False) == 3
        assert await writer.append("s1", 3, entries(3, 1), summary("s1", 4, updated=2)) == 4
        assert await reader.read("s1") == LogSlice(4, entries(0, 4))
        assert await reader.get_summary("s1") == summary("s1", 4, updated=2)
    finally:
        await writer.close()
        await reader.close()


@pytest.mark.parametrize("expected", [0, 2, 4, 100])
async def test_conflicting_append_writes_nothing(store, expected):
    before = summary("s1", 3, updated=1)
    await store.append("s1", 0, entries(0, 3), before)
    intruder = summary("s1", expected + 1, owner="mallory", agent="other", updated=9, pending=1, expiry=5)
    with pytest.raises(VersionConflict) as caught:
        await store.append("s1", expected, entries(expected, 1, kind="call_answered"), intruder)
    assert caught.value.details == {"session_id": "s1", "expected": expected, "actual": 3}
    assert isinstance(caught.value, StoreError)
    assert await store.read("s1") == LogSlice(3, entries(0, 3))
    assert await store.get_summary("s1") == before
    assert ids(await store.list_sessions(owner="mallory")) == []
    assert ids(await store.list_sessions(agent="other")) == []
    assert ids(await store.list_sessions(has_pending=True)) == []
    assert ids(await store.list_sessions(expiring_before=at(100))) == []
    assert ids(await store.list_sessions(owner="alice")) == ["s1"]


async def test_append_to_a_missing_session_conflicts(store):
    with pytest.raises(VersionConflict) as caught:
        await store.append("ghost", 2, entries(2, 1), summary("ghost", 3))
    assert caught.value.details["actual"] == 0
    assert await store.read("ghost") is None
    assert await store.get_summary("ghost") is None
    assert await store.list_sessions() == []


async def test_racing_appends_one_wins(backend):
    """Twelve writers (separate connections on durable backends) race for the same version."""
    first = await backend.open()
    await first.append("s1", 0, entries(0, 2), summary("s1", 2))
    writers = [await backend.open() for _ in range(12)]

    async def attempt(n: int) -> int | None:
        mine = [LogEntry(3, "call_answered", b'{"writer": %d}' % n), LogEntry(4, "turn_ended", b"{}")]
        try:
            return await writers[n].append("s1", 2, mine, summary("s1", 4, updated=n, owner=f"w{n}"))
        except VersionConflict:
            return None

    results = await asyncio.gather(*(attempt(n) for n in range(12)))
    winners = [n for n, result in enumerate(results) if result is not None]
    assert len(winners) == 1
    assert results[winners[0]] == 4
    found = await first.read("s1")
    assert found is not None
    assert found.version == 4
    assert found.entries[2] == LogEntry(3, "call_answered", b'{"writer": %d}' % winners[0])
    assert [e.version for e in found.entries] == [1, 2, 3, 4]
    assert await first.get_summary("s1") == summary("s1", 4, updated=winners[0], owner=f"w{winners[0]}")
    for made in {id(s): s for s in [first, *writers]}.values():
        await made.close()


async def test_racing_creators_one_wins(backend):
    writers = [await backend.open() for _ in range(8)]

    async def attempt(n: int) -> bool:
        try:
            await writers[n].append("new", 0, [LogEntry(1, "session_started", b'{"w": %d}' % n)], summary("new", 1))
        except VersionConflict:
            return False
        return True

    results = await asyncio.gather(*(attempt(n) for n in range(8)))
    assert results.count(True) == 1
    found = await writers[0].read("new")
    assert found is not None
    assert found.entries == [LogEntry(1, "session_started", b'{"w": %d}' % results.index(True))]
    for made in {id(s): s for s in writers}.values():
        await made.close()


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param([], id="no-entries"),
        pytest.param([LogEntry(2, "message", b"{}")], id="gap"),
        pytest.param([LogEntry(1, "message", b"{}"), LogEntry(1, "message", b"{}")], id="repeat"),
    ],
)
async def test_malformed_append_is_refused(store, bad):
    with pytest.raises(ValueError):
        await store.append("s1", 0, bad, summary("s1", len(bad)))
    assert await store.read("s1") is None


# -- listing -------------------------------------------------------------------------------------


@pytest.fixture
async def listed(store):
    """Five sessions: s2 and s5 share an update time (ties go to the greater id)."""
    await put(store, summary("s1", 1, agent="a", owner="alice", updated=1))
    await put(store, summary("s2", 1, agent="a", owner="bob", updated=2, pending=2, expiry=100))
    await put(store, summary("s3", 1, agent="b", owner="alice", updated=3, pending=1, expiry=50))
    await put(store, summary("s4", 1, agent="a", owner=None, updated=4))
    await put(store, summary("s5", 1, agent="a", owner="alice", updated=2, pending=1, expiry=200))
    return store


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, ["s4", "s3", "s5", "s2", "s1"]),
        ({"owner": "alice"}, ["s3", "s5", "s1"]),
        ({"owner": "bob"}, ["s2"]),
        ({"owner": "nobody"}, []),
        ({"agent": "a"}, ["s4", "s5", "s2", "s1"]),
        ({"agent": "b"}, ["s3"]),
        ({"has_pending": True}, ["s3", "s5", "s2"]),
        ({"has_pending": False}, ["s4", "s1"]),
        ({"expiring_before": at(101)}, ["s3", "s2"]),
        ({"expiring_before": at(100)}, ["s3"]),  # strictly before
        ({"expiring_before": at(10)}, []),
        ({"agent": "a", "has_pending": True}, ["s5", "s2"]),
        ({"agent": "a", "has_pending": False}, ["s4", "s1"]),
        ({"owner": "alice", "agent": "a"}, ["s5", "s1"]),
        ({"owner": "alice", "has_pending": True}, ["s3", "s5"]),
        ({"owner": "alice", "agent": "a", "has_pending": True}, ["s5"]),
        ({"agent": "a", "expiring_before": at(300)}, ["s5", "s2"]),
        ({"owner": "alice", "expiring_before": at(300)}, ["s3", "s5"]),
        ({"has_pending": False, "expiring_before": at(300)}, []),
    ],
)
async def test_list_filters_and_order(listed, filters, expected):
    assert ids(await listed.list_sessions(**filters)) == expected


@pytest.mark.parametrize(
    ("filters", "limit", "offset", "expected"),
    [
        ({}, 2, 0, ["s4", "s3"]),
        ({}, 2, 2, ["s5", "s2"]),
        ({}, 2, 4, ["s1"]),
        ({}, 2, 5, []),
        ({}, 100, 10, []),
        ({}, 0, 0, []),
        ({"has_pending": True}, 1, 1, ["s5"]),
        ({"owner": "alice"}, 2, 1, ["s5", "s1"]),
        ({"expiring_before": at(300)}, 2, 1, ["s5", "s2"]),
    ],
)
async def test_list_limit_and_offset(listed, filters, limit, offset, expected):
    assert ids(await listed.list_sessions(**filters, limit=limit, offset=offset)) == expected


async def test_list_returns_whole_summaries(listed):
    assert await listed.list_sessions(owner="bob") == [
        summary("s2", 1, agent="a", owner="bob", updated=2, pending=2, expiry=100)
    ]
    assert await listed.list_sessions(agent="a", has_pending=False) == [
        summary("s4", 1, agent="a", owner=None, updated=4),
        summary("s1", 1, agent="a", owner="alice", updated=1),
    ]


async def test_listing_follows_the_latest_summary(listed):
    store = listed
    # s1 pauses and moves to the front of every list it belongs to.
    await store.append("s1", 1, entries(1, 1), summary("s1", 2, agent="a", updated=10, pending=1, expiry=20))
    assert ids(await store.list_sessions()) == ["s1", "s4", "s3", "s5", "s2"]
    assert ids(await store.list_sessions(has_pending=True)) == ["s1", "s3", "s5", "s2"]
    assert ids(await store.list_sessions(expiring_before=at(60))) == ["s1", "s3"]
    # s2's pauses are answered: it leaves the inbox and the expiry list.
    await store.append("s2", 1, entries(1, 1), summary("s2", 2, agent="a", owner="bob", updated=11))
    assert ids(await store.list_sessions(has_pending=True)) == ["s1", "s3", "s5"]
    assert ids(await store.list_sessions(has_pending=False)) == ["s2", "s4"]
    assert ids(await store.list_sessions(expiring_before=at(1000))) == ["s1", "s3", "s5"]
    # A summary naming another owner and agent moves the session between their lists.
    await store.append("s3", 1, entries(1, 1), summary("s3", 2, agent="c", owner="carol", updated=12))
    assert ids(await store.list_sessions(owner="alice")) == ["s1", "s5"]
    assert ids(await store.list_sessions(owner="carol")) == ["s3"]
    assert ids(await store.list_sessions(agent="b")) == []
    assert ids(await store.list_sessions(agent="c")) == ["s3"]
    # ... or to no owner at all.
    await store.append("s5", 1, entries(1, 1), summary("s5", 2, agent="a", owner=None, updated=13, pending=1))
    assert ids(await store.list_sessions(owner="alice")) == ["s1"]
    assert (await store.get_summary("s5")) == summary("s5", 2, agent="a", owner=None, updated=13, pending=1)


# -- reads from a version -------------------------------------------------------------------------


async def test_read_after_a_version_keeps_kinds_and_bytes(store):
    kinds = ["session_started", "message", "message", "call_paused", "turn_ended", "call_answered"]
    kinds += ["message", "call_completed", "message", "turn_ended", "call_paused", "call_answered"]
    log = [LogEntry(v, kind, b'{"v": %d}' % v) for v, kind in enumerate(kinds, 1)]
    await store.append("s1", 0, log[:6], summary("s1", 6))
    await store.append("s1", 6, log[6:], summary("s1", 12))
    for after in (0, 5, 6, 11):
        assert await store.read("s1", after) == LogSlice(12, log[after:])
    assert await store.read("s1", 12) == LogSlice(12, [])
    assert await store.read("s1", 40) == LogSlice(12, [])


# -- delete --------------------------------------------------------------------------------------


async def test_delete(listed):
    store = listed
    await store.append(
        "s2", 1, entries(1, 5), summary("s2", 6, agent="a", owner="bob", updated=2, pending=2, expiry=100)
    )
    assert await store.delete("s2") is True
    assert await store.read("s2") is None
    assert await store.get_summary("s2") is None
    assert "s2" not in ids(await store.list_sessions())
    assert ids(await store.list_sessions(owner="bob")) == []
    assert ids(await store.list_sessions(agent="a", has_pending=True)) == ["s5"]
    assert ids(await store.list_sessions(expiring_before=at(1000))) == ["s3", "s5"]
    assert await store.delete("s2") is False
    # Others are untouched, and the id can start again from version 0 with a fresh log.
    assert await store.read("s1") == LogSlice(1, entries(0, 1))
    fresh = [LogEntry(1, "session_started", b'{"again": true}')]
    assert await store.append("s2", 0, fresh, summary("s2", 1, owner="bob", updated=20)) == 1
    assert await store.read("s2") == LogSlice(1, fresh)
    assert ids(await store.list_sessions(owner="bob")) == ["s2"]


# -- size and shape of what is stored ------------------------------------------------------------


async def test_long_history_in_one_append(store):
    log = [LogEntry(v, "message" if v % 100 else "call_answered", b'{"v": %d}' % v) for v in range(1, 10_001)]
    assert await store.append("long", 0, log, summary("long", 10_000)) == 10_000
    found = await store.read("long")
    assert found is not None
    assert found.version == 10_000
    assert found.entries == log
    assert await store.read("long", 9_990) == LogSlice(10_000, log[9_990:])
    assert [e.version for e in found.entries if e.kind == "call_answered"] == list(range(100, 10_001, 100))


async def test_long_history_in_many_appends(store):
    version = 0
    for batch in range(100):
        log = [LogEntry(version + i, "message", b'{"batch": %d, "i": %d}' % (batch, i)) for i in range(1, 101)]
        version = await store.append("long", version, log, summary("long", version + 100, updated=batch))
    assert version == 10_000
    found = await store.read("long")
    assert found is not None
    assert [e.version for e in found.entries] == list(range(1, 10_001))
    assert found.entries[-1].data == b'{"batch": 99, "i": 100}'
    assert await store.read("long", 9_999) == LogSlice(10_000, [found.entries[-1]])
    assert await store.get_summary("long") == summary("long", 10_000, updated=99)


async def test_unicode(store):
    sid = "séance-日本語-🙂:log:summary"
    text = '{"text": "Überweisung → 500 € an Zoë 👩\u200d💻, 转账, تحويل"}'.encode()
    log = [LogEntry(1, "message", text), LogEntry(2, "call_paused", b'{"bytes": "\x00\xff\n"}' + b"\x00\xff\n")]
    s = summary(sid, 2, agent="агент", owner="Zoë 👩\u200d💻", pending=1, expiry=5)
    await store.append(sid, 0, log, s)
    assert await store.read(sid) == LogSlice(2, log)
    assert await store.read(sid, 1) == LogSlice(2, log[1:])
    assert await store.get_summary(sid) == s
    assert await store.list_sessions(owner="Zoë 👩\u200d💻") == [s]
    assert await store.list_sessions(agent="агент", has_pending=True) == [s]
    assert await store.list_sessions(owner="Zoe") == []
    assert await store.delete(sid) is True
    assert await store.read(sid) is None


async def test_ties_are_ordered_by_id_bytewise(store):
    names = ["b", "Z", "é", "日本", "🙂", "a-1", "a"]
    for name in names:
        await put(store, summary(name, 1, updated=7))
    expected = sorted(names, key=lambda n: n.encode(), reverse=True)
    assert ids(await store.list_sessions()) == expected
    assert ids(await store.list_sessions(limit=3, offset=2)) == expected[2:5]


async def test_payload_at_the_limit_is_accepted(store):
    data = b'"' + b"x" * (store.max_record_bytes - 2) + b'"'
    assert len(data) == DEFAULT_MAX_RECORD_BYTES
    await store.append("big", 0, [LogEntry(1, "message", data), LogEntry(2, "message", b"{}")], summary("big", 2))
    assert await store.read("big") == LogSlice(2, [LogEntry(1, "message", data), LogEntry(2, "message", b"{}")])


async def test_oversize_payload_is_refused_and_nothing_written(store):
    await put(store, summary("s1", 1))
    too_big = b"x" * (store.max_record_bytes + 1)
    batch = [LogEntry(2, "message", b"{}"), LogEntry(3, "message", too_big)]
    with pytest.raises(PayloadTooLarge) as caught:
        await store.append("s1", 1, batch, summary("s1", 3, updated=5, pending=1))
    assert caught.value.details == {"size": len(too_big), "limit": store.max_record_bytes}
    assert await store.read("s1") == LogSlice(1, entries(0, 1))
    assert await store.get_summary("s1") == summary("s1", 1)
    with pytest.raises(PayloadTooLarge):
        await store.append("s2", 0, [LogEntry(1, "message", too_big)], summary("s2", 1))
    assert await store.read("s2") is None
    assert ids(await store.list_sessions()) == ["s1"]


async def test_configured_size_limit(backend):
    small = await backend.open(max_record_bytes=1000)
    try:
        assert small.max_record_bytes == 1000
        await small.append("s1", 0, [LogEntry(1, "message", b"y" * 1000)], summary("s1", 1))
        with pytest.raises(PayloadTooLarge):
            await small.append("s1", 1, [LogEntry(2, "message", b"y" * 1001)], summary("s1", 2))
        assert await small.read("s1") == LogSlice(1, [LogEntry(1, "message", b"y" * 1000)])
    finally:
        await small.close()


# -- durability and the schema version -----------------------------------------------------------


async def test_sessions_outlive_the_store_object(durable_backend):
    first = await durable_backend.open()
    s = summary("s1", 3, pending=1, expiry=30)
    await first.append("s1", 0, entries(0, 3), s)
    await first.close()
    second = await durable_backend.open()
    try:
        assert await second.read("s1") == LogSlice(3, entries(0, 3))
        assert await second.list_sessions(has_pending=True) == [s]
        assert await second.append("s1", 3, entries(3, 1), summary("s1", 4)) == 4
    finally:
        await second.close()


@pytest.mark.parametrize("found", ["4", "0", "not-a-version"])
async def test_unknown_schema_version_is_refused(durable_backend, found):
    first = await durable_backend.open()
    await put(first, summary("s1", 1))
    await first.close()
    await durable_backend.set_schema_version(found)
    later = await durable_backend.open()
    try:
        with pytest.raises(SchemaVersionError) as caught:
            await later.read("s1")
        assert caught.value.details["found"] == found
        assert isinstance(caught.value, StoreError)
        with pytest.raises(SchemaVersionError):
            await later.append("s2", 0, entries(0, 1), summary("s2", 1))
    finally:
        await later.close()
    await durable_backend.set_schema_version("3")
    again = await durable_backend.open()
    try:
        assert ids(await again.list_sessions()) == ["s1"]  # the refused append wrote nothing
    finally:
        await again.close()
