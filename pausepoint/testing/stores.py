"""The session store contract as a test suite: run it on your own store.

Every store pausepoint ships passes this suite, and a store of your own (any object with the
methods of ``pausepoint.stores.SessionStore``) can run it too. In a test module of your
project, import the suite and give it one fixture, ``open_store``: an async function that
opens a store on one place (a file, a schema, a key prefix) — every call a new store object on
the same data, as another process would open it, and taking the keyword options the built-in
stores take (``max_record_bytes``)::

    import pytest
    from pausepoint.testing.stores import *  # noqa: F403 - the suite's tests and its ``store`` fixture

    @pytest.fixture
    async def open_store(tmp_path):
        async def open_(**options):
            return MyStore(tmp_path / "sessions", **options)
        return open_

pytest then collects every ``test_*`` of the suite in that module. The suite needs ``pytest``
and ``pytest-asyncio`` with ``asyncio_mode = "auto"``. Each test starts from an empty place.
A store that keeps checkpoints (``pausepoint.stores.CheckpointStore``) is held to that part of
the contract too: a checkpoint kept only for a version its log holds and never replaced by an
older one, an extension kept only at the checkpoint's head, a new base that drops the
extensions, an extension that replaces the last ones (if its ``extend_checkpoint`` takes
``replaces``) doing so whole or not at all, a read that sees one consistent checkpoint (a base
and the extensions of one moment), and the checkpoint deleted with its session. A store that
keeps none skips those tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

try:
    import pytest
except ImportError as exc:  # pragma: no cover - exercised only without pytest
    raise ImportError("pausepoint.testing.stores is a pytest suite: pip install pytest pytest-asyncio") from exc

from ..errors import PayloadTooLarge, StoreError, VersionConflict
from ..stores import Checkpoint, CheckpointStore, LogEntry, LogSlice, SessionStore, SessionSummary
from ..stores._base import merges_extensions

__all__ = [
    "DEFAULT_MAX_RECORD_BYTES",
    "OpenStore",
    "T0",
    "at",
    "chained",
    "checkpoint_stores",
    "checkpoints",
    "entries",
    "grow_checkpoint",
    "ids",
    "listed",
    "put",
    "store",
    "summary",
    "test_a_checkpoint_is_kept_as_written",
    "test_a_checkpoint_is_never_replaced_by_an_older_one",
    "test_a_checkpoint_may_be_larger_than_a_record",
    "test_a_base_read_before_a_newer_one_replaced_it_stays_whole",
    "test_a_checkpoint_needs_a_log_that_holds_its_version",
    "test_a_deleted_session_takes_its_checkpoint_along",
    "test_a_deleted_session_takes_its_extensions_along",
    "test_a_new_base_drops_the_extensions",
    "test_a_read_racing_extensions_sees_one_whole_checkpoint",
    "test_an_append_not_yet_durable_is_seen_at_once_and_continued",
    "test_an_extension_is_kept_only_at_the_head",
    "test_an_extension_is_refused_without_a_checkpoint_or_past_the_log",
    "test_an_extension_may_replace_the_last_ones",
    "test_an_extension_that_cannot_replace_changes_nothing",
    "test_append_then_read",
    "test_append_to_a_missing_session_conflicts",
    "test_appends_continue_the_log",
    "test_checkpoints_do_not_change_listings_or_appends",
    "test_configured_size_limit",
    "test_conflicting_append_writes_nothing",
    "test_delete",
    "test_extensions_keep_their_bytes_and_order",
    "test_is_a_session_store",
    "test_list_filters_and_order",
    "test_list_limit_and_offset",
    "test_list_returns_whole_summaries",
    "test_listing_follows_the_latest_summary",
    "test_long_history_in_many_appends",
    "test_long_history_in_one_append",
    "test_malformed_append_is_refused",
    "test_oversize_payload_is_refused_and_nothing_written",
    "test_payload_at_the_limit_is_accepted",
    "test_racing_appends_one_wins",
    "test_racing_checkpoint_writers_leave_the_latest",
    "test_racing_creators_one_wins",
    "test_racing_extensions_from_the_same_head_keep_one",
    "test_racing_merges_from_the_same_head_keep_one",
    "test_read_after_a_version_keeps_kinds_and_bytes",
    "test_ties_are_ordered_by_id_bytewise",
    "test_unicode",
    "test_unknown_session",
]

OpenStore = Callable[..., Awaitable[SessionStore]]

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


@pytest.fixture
async def store(open_store: OpenStore) -> AsyncIterator[SessionStore]:
    """A store on the test's place, closed at the end."""
    made = await open_store()
    yield made
    await made.close()


# -- appends and reads ---------------------------------------------------------------------------


async def test_is_a_session_store(store: SessionStore) -> None:
    assert isinstance(store, SessionStore)
    assert store.max_record_bytes == DEFAULT_MAX_RECORD_BYTES


async def test_unknown_session(store: SessionStore) -> None:
    assert await store.read("nope") is None
    assert await store.read("nope", 3) is None
    assert await store.get_summary("nope") is None
    assert await store.list_sessions() == []
    assert await store.delete("nope") is False


async def test_append_then_read(store: SessionStore) -> None:
    written = entries(0, 3)
    s = summary("s1", 3, pending=1, expiry=60, turn=2)
    assert await store.append("s1", 0, written, s) == 3
    assert await store.read("s1") == LogSlice(3, written)
    assert await store.read("s1", 1) == LogSlice(3, written[1:])
    assert await store.read("s1", 3) == LogSlice(3, [])
    assert await store.get_summary("s1") == s


async def test_appends_continue_the_log(store: SessionStore) -> None:
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


async def test_an_append_not_yet_durable_is_seen_at_once_and_continued(open_store: OpenStore) -> None:
    """``durable=False`` changes when the append reaches stable storage, nothing else: it is
    visible to every store object at once, conditional like any append, and continued by a
    durable one."""
    writer, reader = await open_store(), await open_store()
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
async def test_conflicting_append_writes_nothing(store: SessionStore, expected: Any) -> None:
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


async def test_append_to_a_missing_session_conflicts(store: SessionStore) -> None:
    with pytest.raises(VersionConflict) as caught:
        await store.append("ghost", 2, entries(2, 1), summary("ghost", 3))
    assert caught.value.details["actual"] == 0
    assert await store.read("ghost") is None
    assert await store.get_summary("ghost") is None
    assert await store.list_sessions() == []


async def test_racing_appends_one_wins(open_store: OpenStore) -> None:
    """Twelve writers (separate connections on durable backends) race for the same version."""
    first = await open_store()
    await first.append("s1", 0, entries(0, 2), summary("s1", 2))
    writers = [await open_store() for _ in range(12)]

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


async def test_racing_creators_one_wins(open_store: OpenStore) -> None:
    writers = [await open_store() for _ in range(8)]

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
async def test_malformed_append_is_refused(store: SessionStore, bad: list[LogEntry]) -> None:
    with pytest.raises(ValueError):
        await store.append("s1", 0, bad, summary("s1", len(bad)))
    assert await store.read("s1") is None


# -- listing -------------------------------------------------------------------------------------


@pytest.fixture
async def listed(store: SessionStore) -> SessionStore:
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
async def test_list_filters_and_order(listed: SessionStore, filters: dict[str, Any], expected: Any) -> None:
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
async def test_list_limit_and_offset(
    listed: SessionStore, filters: dict[str, Any], limit: int, offset: int, expected: Any
) -> None:
    assert ids(await listed.list_sessions(**filters, limit=limit, offset=offset)) == expected


async def test_list_returns_whole_summaries(listed: SessionStore) -> None:
    assert await listed.list_sessions(owner="bob") == [
        summary("s2", 1, agent="a", owner="bob", updated=2, pending=2, expiry=100)
    ]
    assert await listed.list_sessions(agent="a", has_pending=False) == [
        summary("s4", 1, agent="a", owner=None, updated=4),
        summary("s1", 1, agent="a", owner="alice", updated=1),
    ]


async def test_listing_follows_the_latest_summary(listed: SessionStore) -> None:
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


async def test_read_after_a_version_keeps_kinds_and_bytes(store: SessionStore) -> None:
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


async def test_delete(listed: SessionStore) -> None:
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


async def test_long_history_in_one_append(store: SessionStore) -> None:
    log = [LogEntry(v, "message" if v % 100 else "call_answered", b'{"v": %d}' % v) for v in range(1, 10_001)]
    assert await store.append("long", 0, log, summary("long", 10_000)) == 10_000
    found = await store.read("long")
    assert found is not None
    assert found.version == 10_000
    assert found.entries == log
    assert await store.read("long", 9_990) == LogSlice(10_000, log[9_990:])
    assert [e.version for e in found.entries if e.kind == "call_answered"] == list(range(100, 10_001, 100))


async def test_long_history_in_many_appends(store: SessionStore) -> None:
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


async def test_unicode(store: SessionStore) -> None:
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


async def test_ties_are_ordered_by_id_bytewise(store: SessionStore) -> None:
    names = ["b", "Z", "é", "日本", "🙂", "a-1", "a"]
    for name in names:
        await put(store, summary(name, 1, updated=7))
    expected = sorted(names, key=lambda n: n.encode(), reverse=True)
    assert ids(await store.list_sessions()) == expected
    assert ids(await store.list_sessions(limit=3, offset=2)) == expected[2:5]


async def test_payload_at_the_limit_is_accepted(store: SessionStore) -> None:
    data = b'"' + b"x" * (store.max_record_bytes - 2) + b'"'
    assert len(data) == DEFAULT_MAX_RECORD_BYTES
    await store.append("big", 0, [LogEntry(1, "message", data), LogEntry(2, "message", b"{}")], summary("big", 2))
    assert await store.read("big") == LogSlice(2, [LogEntry(1, "message", data), LogEntry(2, "message", b"{}")])


async def test_oversize_payload_is_refused_and_nothing_written(store: SessionStore) -> None:
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


async def test_configured_size_limit(open_store: OpenStore) -> None:
    small = await open_store(max_record_bytes=1000)
    try:
        assert small.max_record_bytes == 1000
        await small.append("s1", 0, [LogEntry(1, "message", b"y" * 1000)], summary("s1", 1))
        with pytest.raises(PayloadTooLarge):
            await small.append("s1", 1, [LogEntry(2, "message", b"y" * 1001)], summary("s1", 2))
        assert await small.read("s1") == LogSlice(1, [LogEntry(1, "message", b"y" * 1000)])
    finally:
        await small.close()


# -- checkpoints -----------------------------------------------------------------------------------


async def checkpoints(store: SessionStore) -> CheckpointStore:
    if not isinstance(store, CheckpointStore):
        pytest.skip("the store keeps no checkpoints")
    return store


async def merging(store: SessionStore) -> CheckpointStore:
    """The store, if its ``extend_checkpoint`` takes ``replaces``; the tests of replacing are
    skipped for one that does not (it is given extensions one by one)."""
    keeper = await checkpoints(store)
    if not merges_extensions(keeper):
        pytest.skip("the store's extend_checkpoint takes no replaces")
    return keeper


async def read_whole(store: CheckpointStore, session_id: str) -> Checkpoint | None:
    """The session's checkpoint with its base whole (a store may give a large one in part)."""
    checkpoint = await store.read_checkpoint(session_id)
    return None if checkpoint is None else checkpoint.whole()


@contextlib.asynccontextmanager
async def checkpoint_stores(open_store: OpenStore, count: int) -> AsyncIterator[list[CheckpointStore]]:
    """``count`` store objects on the test's place, as separate processes would open them, closed
    at the end; skips for a store that keeps no checkpoints."""
    opened = [await open_store()]
    try:
        if not isinstance(opened[0], CheckpointStore):
            pytest.skip("the store keeps no checkpoints")
        for _ in range(count - 1):
            opened.append(await open_store())
        yield [await checkpoints(made) for made in opened]
    finally:
        for made in {id(s): s for s in opened}.values():
            await made.close()


async def test_a_checkpoint_is_kept_as_written(store: SessionStore) -> None:
    keeper = await checkpoints(store)
    assert await read_whole(keeper, "s1") is None
    await put(store, summary("s1", 3), 3)
    assert await read_whole(keeper, "s1") is None
    data = bytes(range(256)) * 4 + b"\n\x00 \xff"
    assert await keeper.write_checkpoint("s1", 2, data) is True
    assert await read_whole(keeper, "s1") == Checkpoint(2, data)
    assert await store.read("s1") == LogSlice(3, entries(0, 3))  # the log is untouched


async def test_a_checkpoint_may_be_larger_than_a_record(store: SessionStore) -> None:
    keeper = await checkpoints(store)
    await put(store, summary("s1", 1))
    big = b"x" * (store.max_record_bytes * 3)
    assert await keeper.write_checkpoint("s1", 1, big) is True
    assert await read_whole(keeper, "s1") == Checkpoint(1, big)


async def test_a_base_read_before_a_newer_one_replaced_it_stays_whole(store: SessionStore) -> None:
    """A store may give a base in part (``Checkpoint.fetch``): the rest of it must still be there
    after a newer base replaced it (``PARTIAL_BASE_KEPT``), and a range read in any order."""
    keeper = await checkpoints(store)
    await put(store, summary("s1", 4), 4)
    old = bytes(range(256)) * 4096  # 1 MiB: past what any store reads with the checkpoint
    assert await keeper.write_checkpoint("s1", 2, old) is True
    first = await keeper.read_checkpoint("s1")
    assert first is not None and len(first.data) == len(old)
    assert await keeper.write_checkpoint("s1", 4, b"the newer base") is True
    if first.fetch is not None:
        first.fetch(len(old) - 100, len(old))
        first.fetch(300_000, 300_100)
    assert bytes(first.data[-100:]) == old[-100:] and bytes(first.data[300_000:300_100]) == old[300_000:300_100]
    assert first.whole() == Checkpoint(2, old)
    assert await read_whole(keeper, "s1") == Checkpoint(4, b"the newer base")


async def test_a_checkpoint_needs_a_log_that_holds_its_version(store: SessionStore) -> None:
    keeper = await checkpoints(store)
    assert await keeper.write_checkpoint("ghost", 1, b"state") is False
    assert await read_whole(keeper, "ghost") is None
    await put(store, summary("s1", 2), 2)
    assert await keeper.write_checkpoint("s1", 3, b"ahead of the log") is False
    assert await read_whole(keeper, "s1") is None
    assert await keeper.write_checkpoint("s1", 2, b"at the log's head") is True


async def test_a_checkpoint_is_never_replaced_by_an_older_one(store: SessionStore) -> None:
    keeper = await checkpoints(store)
    await put(store, summary("s1", 6), 6)
    assert await keeper.write_checkpoint("s1", 4, b"four") is True
    assert await keeper.write_checkpoint("s1", 3, b"three") is False
    assert await keeper.write_checkpoint("s1", 4, b"four again") is False
    assert await read_whole(keeper, "s1") == Checkpoint(4, b"four")
    assert await keeper.write_checkpoint("s1", 6, b"six") is True
    assert await read_whole(keeper, "s1") == Checkpoint(6, b"six")


async def test_racing_checkpoint_writers_leave_the_latest(open_store: OpenStore) -> None:
    """Writers on separate store objects race with checkpoints of every version: whatever the
    order, the one kept is the latest, whole."""
    first = await open_store()
    if not isinstance(first, CheckpointStore):
        await first.close()
        pytest.skip("the store keeps no checkpoints")
    await put(first, summary("s1", 12), 12)
    writers = [await open_store() for _ in range(12)]
    kept = await asyncio.gather(
        *(
            w.write_checkpoint("s1", v, b"v%d" % v * 1000)
            for v, w in enumerate(writers, 1)
            if isinstance(w, CheckpointStore)
        )
    )
    assert kept[-1] is True
    assert await read_whole(first, "s1") == Checkpoint(12, b"v12" * 1000)
    for made in {id(s): s for s in [first, *writers]}.values():
        await made.close()


async def test_a_deleted_session_takes_its_checkpoint_along(store: SessionStore) -> None:
    keeper = await checkpoints(store)
    await put(store, summary("s1", 3), 3)
    assert await keeper.write_checkpoint("s1", 3, b"old life") is True
    assert await store.delete("s1") is True
    assert await read_whole(keeper, "s1") is None
    await put(store, summary("s1", 1))  # the same id again: a new log, no checkpoint of the old one
    assert await read_whole(keeper, "s1") is None
    assert await keeper.write_checkpoint("s1", 3, b"ahead") is False


async def test_checkpoints_do_not_change_listings_or_appends(store: SessionStore) -> None:
    keeper = await checkpoints(store)
    s = summary("s1", 2, pending=1, expiry=5)
    await put(store, s, 2)
    await keeper.write_checkpoint("s1", 2, b"state")
    assert await store.get_summary("s1") == s
    assert await store.list_sessions(has_pending=True) == [s]
    assert await store.append("s1", 2, entries(2, 1), summary("s1", 3)) == 3
    assert await read_whole(keeper, "s1") == Checkpoint(2, b"state")


async def test_an_extension_is_kept_only_at_the_head(store: SessionStore) -> None:
    keeper = await checkpoints(store)
    await put(store, summary("s1", 6), 6)
    assert await keeper.write_checkpoint("s1", 2, b"base") is True
    assert await keeper.extend_checkpoint("s1", 2, 3, b"to 3") is True
    assert await keeper.extend_checkpoint("s1", 2, 4, b"stale") is False  # the head moved on to 3
    assert await keeper.extend_checkpoint("s1", 4, 5, b"ahead") is False  # the head is not at 4 yet
    assert await read_whole(keeper, "s1") == Checkpoint(3, b"base", (b"to 3",))
    assert await keeper.extend_checkpoint("s1", 3, 5, b"to 5") is True
    assert await read_whole(keeper, "s1") == Checkpoint(5, b"base", (b"to 3", b"to 5"))
    assert await keeper.extend_checkpoint("s1", 5, 6, b"to 6") is True
    assert await read_whole(keeper, "s1") == Checkpoint(6, b"base", (b"to 3", b"to 5", b"to 6"))


async def test_an_extension_is_refused_without_a_checkpoint_or_past_the_log(store: SessionStore) -> None:
    keeper = await checkpoints(store)
    assert await keeper.extend_checkpoint("ghost", 0, 1, b"no session") is False
    assert await read_whole(keeper, "ghost") is None
    await put(store, summary("s1", 4), 4)
    assert await keeper.extend_checkpoint("s1", 0, 1, b"no checkpoint") is False
    assert await keeper.extend_checkpoint("s1", 1, 2, b"no checkpoint") is False
    assert await read_whole(keeper, "s1") is None
    assert await keeper.write_checkpoint("s1", 2, b"base") is True
    assert await keeper.extend_checkpoint("s1", 2, 5, b"past the log") is False
    assert await keeper.extend_checkpoint("s1", 2, 2, b"no step") is False
    assert await keeper.extend_checkpoint("s1", 2, 1, b"backwards") is False
    assert await read_whole(keeper, "s1") == Checkpoint(2, b"base")
    assert await keeper.extend_checkpoint("s1", 2, 4, b"at the log's head") is True
    assert await store.append("s1", 4, entries(4, 1), summary("s1", 5)) == 5  # the log moves on
    assert await keeper.extend_checkpoint("s1", 4, 6, b"past the log again") is False
    assert await keeper.extend_checkpoint("s1", 4, 5, b"to 5") is True
    assert await read_whole(keeper, "s1") == Checkpoint(5, b"base", (b"at the log's head", b"to 5"))
    log = await store.read("s1")
    assert log is not None and log.version == 5


async def test_extensions_keep_their_bytes_and_order(store: SessionStore) -> None:
    keeper = await checkpoints(store)
    await put(store, summary("s1", 40), 40)
    base = bytes(range(256)) * 4 + b"\n\x00 \xff"
    assert await keeper.write_checkpoint("s1", 1, base) is True
    expected = []
    for version in range(2, 41):
        data = bytes([version]) * version + b"\n\x00\r\n" + b"%d" % version
        expected.append(data)
        assert await keeper.extend_checkpoint("s1", version - 1, version, data) is True
    big = b"x" * (store.max_record_bytes * 2)  # like a base, an extension may exceed a record's limit
    await store.append("s1", 40, entries(40, 1), summary("s1", 41))
    assert await keeper.extend_checkpoint("s1", 40, 41, big) is True
    assert await read_whole(keeper, "s1") == Checkpoint(41, base, (*expected, big))
    assert await keeper.extend_checkpoint("s1", 41, 42, b"past the log") is False
    assert await keeper.extend_checkpoint("s1", 40, 41, b"again") is False
    assert (await read_whole(keeper, "s1")) == Checkpoint(41, base, (*expected, big))


async def test_a_new_base_drops_the_extensions(store: SessionStore) -> None:
    keeper = await checkpoints(store)
    await put(store, summary("s1", 8), 8)
    assert await keeper.write_checkpoint("s1", 2, b"old base") is True
    assert await keeper.extend_checkpoint("s1", 2, 4, b"to 4") is True
    # At or below the head (an extension's version, or between the base and it): refused.
    for version in (1, 2, 3, 4):
        assert await keeper.write_checkpoint("s1", version, b"older") is False
    assert await read_whole(keeper, "s1") == Checkpoint(4, b"old base", (b"to 4",))
    assert await keeper.write_checkpoint("s1", 9, b"past the log") is False
    assert await keeper.write_checkpoint("s1", 5, b"new base") is True
    assert await read_whole(keeper, "s1") == Checkpoint(5, b"new base")
    assert await keeper.extend_checkpoint("s1", 4, 6, b"after the old head") is False
    assert await keeper.extend_checkpoint("s1", 5, 7, b"to 7") is True
    assert await read_whole(keeper, "s1") == Checkpoint(7, b"new base", (b"to 7",))
    assert await keeper.write_checkpoint("s1", 8, b"newest base") is True
    assert await read_whole(keeper, "s1") == Checkpoint(8, b"newest base")


async def test_a_deleted_session_takes_its_extensions_along(store: SessionStore) -> None:
    keeper = await checkpoints(store)
    await put(store, summary("s1", 5), 5)
    assert await keeper.write_checkpoint("s1", 2, b"old base") is True
    assert await keeper.extend_checkpoint("s1", 2, 3, b"old 3") is True
    assert await keeper.extend_checkpoint("s1", 3, 5, b"old 5") is True
    assert await store.delete("s1") is True
    assert await read_whole(keeper, "s1") is None
    assert await keeper.extend_checkpoint("s1", 5, 6, b"ghost") is False
    await put(store, summary("s1", 6), 6)  # the same id again: a new log, nothing of the old checkpoint
    assert await read_whole(keeper, "s1") is None
    assert await keeper.extend_checkpoint("s1", 5, 6, b"on the old head") is False
    assert await keeper.write_checkpoint("s1", 1, b"new base") is True
    assert await read_whole(keeper, "s1") == Checkpoint(1, b"new base")
    assert await keeper.extend_checkpoint("s1", 1, 3, b"new 3") is True
    assert await read_whole(keeper, "s1") == Checkpoint(3, b"new base", (b"new 3",))


async def test_an_extension_may_replace_the_last_ones(store: SessionStore) -> None:
    keeper = await merging(store)
    await put(store, summary("s1", 9), 9)
    assert await keeper.write_checkpoint("s1", 2, b"base") is True
    for after, version in ((2, 3), (3, 5), (5, 6)):
        assert await keeper.extend_checkpoint("s1", after, version, b"to %d" % version) is True
    assert await keeper.extend_checkpoint("s1", 6, 7, b"3 to 7", replaces=2) is True
    assert await read_whole(keeper, "s1") == Checkpoint(7, b"base", (b"to 3", b"3 to 7"))
    assert await keeper.extend_checkpoint("s1", 7, 8, b"2 to 8", replaces=2) is True  # all of them
    assert await read_whole(keeper, "s1") == Checkpoint(8, b"base", (b"2 to 8",))
    assert await keeper.extend_checkpoint("s1", 8, 9, b"to 9", replaces=0) is True
    assert await read_whole(keeper, "s1") == Checkpoint(9, b"base", (b"2 to 8", b"to 9"))


async def test_an_extension_that_cannot_replace_changes_nothing(store: SessionStore) -> None:
    keeper = await merging(store)
    await put(store, summary("s1", 6), 6)
    assert await keeper.write_checkpoint("s1", 2, b"base") is True
    assert await keeper.extend_checkpoint("s1", 2, 3, b"base", replaces=1) is False  # none to replace
    assert await keeper.extend_checkpoint("s1", 2, 3, b"to 3") is True
    assert await keeper.extend_checkpoint("s1", 2, 4, b"stale", replaces=1) is False  # the head is at 3
    assert await keeper.extend_checkpoint("s1", 3, 7, b"past the log", replaces=1) is False
    assert await keeper.extend_checkpoint("s1", 3, 4, b"more than there are", replaces=2) is False
    with pytest.raises(ValueError):
        await keeper.extend_checkpoint("s1", 3, 4, b"negative", replaces=-1)
    assert await read_whole(keeper, "s1") == Checkpoint(3, b"base", (b"to 3",))
    await store.delete("s1")
    assert await keeper.extend_checkpoint("s1", 3, 4, b"no session", replaces=1) is False
    assert await read_whole(keeper, "s1") is None


async def test_racing_merges_from_the_same_head_keep_one(open_store: OpenStore) -> None:
    """Writers on separate store objects extend the checkpoint from the same head, some
    replacing the last extension (which ones, round by round: the first racer often wins):
    one is kept, round after round, and the extensions are what its choice makes them."""
    async with checkpoint_stores(open_store, 6) as racers:
        first = await merging(racers[0])
        await put(first, summary("s1", 12), 12)
        assert await first.write_checkpoint("s1", 2, b"base") is True
        assert await first.extend_checkpoint("s1", 2, 3, b"to 3") is True
        for round_ in range(4):
            before = await read_whole(first, "s1")
            assert before is not None
            kept = await asyncio.gather(
                *(
                    r.extend_checkpoint(
                        "s1", before.version, before.version + 1, b"%d by %d" % (round_, n), replaces=(n + round_) % 2
                    )
                    for n, r in enumerate(racers)
                )
            )
            assert sum(kept) == 1
            [winner] = [n for n, k in enumerate(kept) if k]
            after = await read_whole(racers[-1], "s1")
            assert after is not None and after.version == before.version + 1 and after.data == b"base"
            kept_before = before.extensions[: len(before.extensions) - (winner + round_) % 2]
            assert after.extensions == (*kept_before, b"%d by %d" % (round_, winner))


async def test_racing_extensions_from_the_same_head_keep_one(open_store: OpenStore) -> None:
    """Writers on separate store objects extend the checkpoint from the same head: one is kept,
    round after round."""
    async with checkpoint_stores(open_store, 8) as racers:
        first = racers[0]
        await put(first, summary("s1", 12), 12)
        assert await first.write_checkpoint("s1", 2, b"base") is True
        for round_ in range(3):
            head = (await read_whole(first, "s1") or Checkpoint(0, b"")).version
            kept = await asyncio.gather(
                *(
                    r.extend_checkpoint("s1", head, head + 1 + n % 2, b"%d by %d" % (round_, n))
                    for n, r in enumerate(racers)
                )
            )
            assert sum(kept) == 1
            [winner] = [n for n, k in enumerate(kept) if k]
            after = await read_whole(racers[-1], "s1")
            assert after is not None
            assert after.version == head + 1 + winner % 2
            assert after.data == b"base"
            assert len(after.extensions) == round_ + 1
            assert after.extensions[-1] == b"%d by %d" % (round_, winner)


def chained(checkpoint: Checkpoint) -> bool:
    """Whether a checkpoint made by ``grow_checkpoint`` is whole: its base names the version it
    was written at, each extension the versions it took the checkpoint from and to, and they
    meet the head."""
    reached = int(bytes(checkpoint.data).split(b"@")[1])
    for extension in checkpoint.extensions:
        start, end = (int(v) for v in extension.split(b">"))
        if start != reached:
            return False
        reached = end
    return reached == checkpoint.version


async def grow_checkpoint(keeper: CheckpointStore, seed: int, until: int, rebase: bool, merge: bool = False) -> int:
    """Extend (and now and then rebase, or ``merge``: replace the last extensions) the checkpoint
    of s1 from whatever head it is at, until it reaches ``until``; returns how many writes were
    kept."""
    rng = random.Random(seed)  # noqa: S311 - the test's reproducible choices, not a secret
    kept = 0
    while True:
        current = await read_whole(keeper, "s1")
        assert current is not None
        if current.version >= until:
            return kept
        step = min(rng.randint(1, 2), until - current.version)
        target = current.version + step
        if rebase and rng.random() < 0.2:
            kept += await keeper.write_checkpoint("s1", target, b"base@%d" % target)
        elif merge and current.extensions and rng.random() < 0.5:
            replaces = rng.randint(1, len(current.extensions))
            start = int(current.extensions[-replaces].split(b">")[0])
            data = b"%d>%d" % (start, target)
            kept += await keeper.extend_checkpoint("s1", current.version, target, data, replaces=replaces)
        else:
            kept += await keeper.extend_checkpoint("s1", current.version, target, b"%d>%d" % (current.version, target))
        await asyncio.sleep(0)  # let the others in, on a store that never waits (memory)


async def test_a_read_racing_extensions_sees_one_whole_checkpoint(open_store: OpenStore) -> None:
    """Writers on separate store objects extend (and now and then rebase) one checkpoint while
    readers read it: every read is one moment's checkpoint, its head that of its extensions."""
    until = 120
    async with checkpoint_stores(open_store, 6) as stores:
        await put(stores[0], summary("s1", until), until)
        assert await stores[0].write_checkpoint("s1", 1, b"base@1") is True
        done = asyncio.Event()
        seen: list[Checkpoint] = []

        async def read(keeper: CheckpointStore) -> None:
            while not done.is_set():
                checkpoint = await read_whole(keeper, "s1")
                assert checkpoint is not None
                assert chained(checkpoint), checkpoint
                seen.append(checkpoint)
                await asyncio.sleep(0)

        readers = [asyncio.ensure_future(read(keeper)) for keeper in stores[3:]]
        try:
            writes = await asyncio.gather(
                *(
                    grow_checkpoint(keeper, n, until, rebase=n == 0, merge=n == 1 and merges_extensions(keeper))
                    for n, keeper in enumerate(stores[:3])
                )
            )
        finally:
            done.set()
            await asyncio.gather(*readers)
        assert sum(writes) >= 1
        final = await read_whole(stores[-1], "s1")
        assert final is not None and final.version == until and chained(final)
        assert len(seen) > 1
        assert any(c.extensions for c in seen)
