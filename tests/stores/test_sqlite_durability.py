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
