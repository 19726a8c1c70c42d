"""The suite's tests of appends and reads: the conditional append, racing writers, reads from a
version, and the size and shape of what a log keeps."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from ...errors import PayloadTooLarge, StoreError, VersionConflict
from ...stores import LogEntry, LogSlice, SessionStore
from ._fixtures import DEFAULT_MAX_RECORD_BYTES, OpenStore, at, entries, ids, put, summary

__all__ = [
    "test_an_append_not_yet_durable_is_seen_at_once_and_continued",
    "test_append_then_read",
    "test_append_to_a_missing_session_conflicts",
    "test_appends_continue_the_log",
    "test_configured_size_limit",
    "test_ids_are_kept_exactly",
    "test_conflicting_append_writes_nothing",
    "test_is_a_session_store",
    "test_long_history_in_many_appends",
    "test_long_history_in_one_append",
    "test_malformed_append_is_refused",
    "test_oversize_payload_is_refused_and_nothing_written",
    "test_payload_at_the_limit_is_accepted",
    "test_racing_appends_one_wins",
    "test_racing_creators_one_wins",
    "test_read_after_a_version_keeps_kinds_and_bytes",
    "test_ties_are_ordered_by_id_bytewise",
    "test_unicode",
    "test_unknown_session",
]


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


async def test_ids_are_kept_exactly(store: SessionStore) -> None:
    """Ids that differ only by case, by Unicode normalisation or by a space are different
    sessions (ids are chosen by users: a store folding them would merge two people's sessions),
    and so are owners that differ so."""
    names = ["Order-42", "order-42", "ORDER-42", "caf\u00e9", "cafe\u0301", "order-42 "]
    logs = {name: [LogEntry(1, "message", json.dumps({"session": name}).encode())] for name in names}
    for name in names:
        await store.append(name, 0, logs[name], summary(name, 1, owner=name))
    for name in names:
        assert await store.read(name) == LogSlice(1, logs[name]), name
        assert await store.get_summary(name) == summary(name, 1, owner=name)
        assert ids(await store.list_sessions(owner=name)) == [name]
    assert sorted(ids(await store.list_sessions())) == sorted(names)
    assert await store.delete("order-42") is True
    assert await store.read("order-42") is None
    assert sorted(ids(await store.list_sessions())) == sorted(n for n in names if n != "order-42")


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
