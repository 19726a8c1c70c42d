"""The suite's tests of checkpoint extensions: kept only at the head, dropped by a new base,
replacing the last ones whole or not at all (for a store whose ``extend_checkpoint`` takes
``replaces``), one kept of racing writers, and a read racing them that sees one whole checkpoint."""

from __future__ import annotations

import asyncio
import random

import pytest

from ...stores import Checkpoint, CheckpointStore, SessionStore
from ...stores._base import merges_extensions
from ._checkpoints import checkpoint_stores, checkpoints, merging, read_whole
from ._fixtures import OpenStore, entries, put, summary

__all__ = [
    "chained",
    "grow_checkpoint",
    "test_a_deleted_session_takes_its_extensions_along",
    "test_a_new_base_drops_the_extensions",
    "test_a_read_racing_extensions_sees_one_whole_checkpoint",
    "test_an_extension_is_kept_only_at_the_head",
    "test_an_extension_is_refused_without_a_checkpoint_or_past_the_log",
    "test_an_extension_may_replace_the_last_ones",
    "test_an_extension_that_cannot_replace_changes_nothing",
    "test_extensions_keep_their_bytes_and_order",
    "test_racing_extensions_from_the_same_head_keep_one",
    "test_racing_merges_from_the_same_head_keep_one",
]


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
