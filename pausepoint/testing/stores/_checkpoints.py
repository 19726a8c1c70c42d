"""The suite's tests of checkpoint bases, and the helpers every checkpoint test uses: a base kept
only for a version its log holds, never replaced by an older one, whole when read, and deleted
with its session. A store that keeps no checkpoints skips them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from ...stores import Checkpoint, CheckpointStore, LogSlice, SessionStore
from ...stores._base import merges_extensions
from ._fixtures import OpenStore, entries, put, summary

__all__ = [
    "checkpoint_stores",
    "checkpoints",
    "merging",
    "read_whole",
    "test_a_base_read_before_a_newer_one_replaced_it_stays_whole",
    "test_a_checkpoint_is_kept_as_written",
    "test_a_checkpoint_is_never_replaced_by_an_older_one",
    "test_a_checkpoint_may_be_larger_than_a_record",
    "test_a_checkpoint_needs_a_log_that_holds_its_version",
    "test_a_deleted_session_takes_its_checkpoint_along",
    "test_checkpoints_do_not_change_listings_or_appends",
    "test_racing_checkpoint_writers_leave_the_latest",
]


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
