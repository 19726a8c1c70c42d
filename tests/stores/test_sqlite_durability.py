"""SQLite's durability setting, and the group fsync that makes durable appends cheap to share."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from pausepoint.errors import StoreError
from pausepoint.stores import LogEntry, SqliteSessionStore
from pausepoint.stores._groupsync import GroupSync
from pausepoint.testing.stores import summary


def test_full_is_the_default_and_nothing_else_is_taken(tmp_path: Path):
    assert SqliteSessionStore(tmp_path / "a.db").synchronous == "FULL"
    assert SqliteSessionStore(tmp_path / "a.db", synchronous="NORMAL").synchronous == "NORMAL"
    with pytest.raises(ValueError, match="FULL"):
        SqliteSessionStore(tmp_path / "a.db", synchronous="OFF")  # type: ignore[arg-type]


@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
async def test_both_settings_keep_what_was_appended(tmp_path: Path, synchronous: str):
    path = tmp_path / "s.db"
    store = SqliteSessionStore(path, synchronous=synchronous)  # type: ignore[arg-type]
    await asyncio.gather(
        *(store.append(f"s{i}", 0, [LogEntry(1, "message", b"{}")], summary(f"s{i}", 1)) for i in range(20))
    )
    await store.append("s0", 1, [LogEntry(2, "message", b"{}")], summary("s0", 2), durable=False)
    await store.close()
    again = SqliteSessionStore(path)
    assert len(await again.list_sessions()) == 20
    found = await again.read("s0")
    assert found is not None and found.version == 2
    await again.close()


async def test_waiters_share_fsyncs_and_each_waits_for_one_begun_after_it():
    began: list[float] = []

    def sync() -> None:
        began.append(time.monotonic())
        time.sleep(0.02)

    group = GroupSync(sync)
    asked: list[float] = []
    returned: list[tuple[float, float]] = []

    async def writer() -> None:
        at = time.monotonic()
        asked.append(at)
        await group.wait()
        returned.append((at, time.monotonic()))

    await asyncio.gather(*(writer() for _ in range(40)))
    group.close()
    assert len(returned) == 40
    assert len(began) < 10  # 40 writers, a handful of fsyncs
    for at, done in returned:  # some fsync began after the writer asked, and ended before it returned
        assert any(at <= start and start + 0.02 <= done for start in began)


async def test_a_failed_fsync_is_an_error_for_its_waiters_and_the_next_one_is_tried_again():
    failures = [OSError(5, "I/O error")]
    calls = 0

    def sync() -> None:
        nonlocal calls
        calls += 1
        if failures:
            raise failures.pop()

    group = GroupSync(sync)
    with pytest.raises(OSError, match="I/O error"):
        await group.wait()
    await group.wait()
    assert calls == 2
    group.close()


async def test_a_store_whose_file_cannot_be_flushed_says_so(tmp_path: Path):
    store = SqliteSessionStore(tmp_path / "s.db")
    await store.append("s1", 0, [LogEntry(1, "message", b"{}")], summary("s1", 1))

    def broken() -> None:
        raise OSError(28, "No space left on device")

    store._group = GroupSync(broken)  # what the disk would do
    with pytest.raises(StoreError, match="stable storage"):
        await store.append("s1", 1, [LogEntry(2, "message", b"{}")], summary("s1", 2))
    await store.close()


async def test_waiters_in_other_event_loops_are_woken_in_their_own():
    group = GroupSync(lambda: time.sleep(0.01))
    done: list[str] = []

    def other_loop() -> None:
        asyncio.run(group.wait())
        done.append("thread")

    thread = threading.Thread(target=other_loop)
    thread.start()
    await group.wait()
    await asyncio.to_thread(thread.join)
    assert done == ["thread"]
    group.close()


async def test_a_fast_disk_is_synced_on_the_loop_sharing_one_fsync_among_the_ready_writers():
    synced_on: list[str] = []

    def sync() -> None:
        synced_on.append(threading.current_thread().name)

    group = GroupSync(sync)
    await asyncio.gather(*(group.wait() for _ in range(10)))
    assert synced_on == [threading.current_thread().name]  # one fsync, on the loop's own thread
    await group.wait()
    assert len(synced_on) == 2  # a later writer is not covered by the earlier round
    assert group._thread is None
    group.close()


async def test_slow_fsyncs_move_to_the_worker_thread_and_the_loop_serves_others_meanwhile():
    delay = [0.03]
    synced_on: list[str] = []

    def sync() -> None:
        synced_on.append(threading.current_thread().name)
        time.sleep(delay[0])

    group = GroupSync(sync, inline_below=0.005)
    await group.wait()  # the first runs inline, and tells the group the disk is slow
    assert not group.inline
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = ticks
    await group.wait()
    assert synced_on[-1] == "pausepoint-fsync"
    assert ticks - before >= 5  # the loop ran the ticker during the 30 ms fsync
    ticking.cancel()
    delay[0] = 0
    for _ in range(40):  # fast again: the average falls below the bound, and rounds come back inline
        await group.wait()
    assert group.inline and synced_on[-1] == threading.current_thread().name
    group.close()


async def test_a_cancelled_writer_leaves_the_others_in_its_round_served():
    calls = 0

    def sync() -> None:
        nonlocal calls
        calls += 1

    group = GroupSync(sync)
    first = asyncio.create_task(group.wait())
    second = asyncio.create_task(group.wait())
    await asyncio.sleep(0)  # both joined the round
    first.cancel()
    await second
    assert calls == 1 and first.cancelled()
    group.close()


async def test_a_full_disk_is_named_as_such_and_passes(tmp_path: Path):
    """SQLite rolls a transaction back itself when the disk fills: the error is that, not the
    "cannot rollback - no transaction is active" of a second rollback (found by a probe). Its
    message names the file, not its path (it may reach an HTTP client). Once there is room
    again, writes go on."""
    store = SqliteSessionStore(tmp_path / "s.db")
    try:
        await store.append("s0", 0, [LogEntry(1, "message", b"{}")], summary("s0", 1))
        conn = store._open()
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")  # what a full disk does to the next write
        big = [LogEntry(1, "message", b'"' + b"x" * 200_000 + b'"')]
        with pytest.raises(StoreError, match="database or disk is full") as caught:
            await store.append("s1", 0, big, summary("s1", 1))
        assert str(tmp_path) not in str(caught.value) and "s.db" in str(caught.value)
        assert await store.read("s1") is None  # nothing half-written
        conn.execute("PRAGMA max_page_count = 1073741823")
        await store.append("s1", 0, big, summary("s1", 1))
        assert (await store.read("s1")) is not None
    finally:
        await store.close()
