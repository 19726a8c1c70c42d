"""Checkpoint extensions (``CheckpointStore.extend_checkpoint``), on every backend alike.

A checkpoint is a base and the extensions added to it since, oldest first; its version is the
latest extension's. These tests call the store directly with opaque bytes: an extension is kept
only at the checkpoint's head, a new base drops the extensions, deleting the session forgets
them, racers leave one chain, and a read never sees a head that disagrees with its extensions.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator

from pausepoint.stores import Checkpoint, CheckpointStore, SessionStore
from pausepoint.testing.stores import entries, put, summary

from .backends import Backend


async def keeper(store: SessionStore) -> CheckpointStore:
    assert isinstance(store, CheckpointStore)
    return store


@contextlib.asynccontextmanager
async def keepers(backend: Backend, count: int) -> AsyncIterator[list[CheckpointStore]]:
    """``count`` store objects on the backend's place, as separate processes would open them
    (the memory backend shares one)."""
    opened = [await backend.open() for _ in range(count)]
    try:
        yield [await keeper(s) for s in opened]
    finally:
        for made in {id(s): s for s in opened}.values():
            await made.close()


async def test_an_extension_is_kept_only_at_the_head(store: SessionStore) -> None:
    ck = await keeper(store)
    await put(store, summary("s1", 6), 6)
    assert await ck.write_checkpoint("s1", 2, b"base") is True
    assert await ck.extend_checkpoint("s1", 2, 3, b"to 3") is True
    assert await ck.extend_checkpoint("s1", 2, 4, b"stale") is False  # the head moved on to 3
    assert await ck.extend_checkpoint("s1", 4, 5, b"ahead") is False  # the head is not at 4 yet
    assert await ck.read_checkpoint("s1") == Checkpoint(3, b"base", (b"to 3",))
    assert await ck.extend_checkpoint("s1", 3, 5, b"to 5") is True
    assert await ck.read_checkpoint("s1") == Checkpoint(5, b"base", (b"to 3", b"to 5"))
    assert await ck.extend_checkpoint("s1", 5, 6, b"to 6") is True
    assert await ck.read_checkpoint("s1") == Checkpoint(6, b"base", (b"to 3", b"to 5", b"to 6"))


async def test_an_extension_is_refused_without_a_checkpoint_or_past_the_log(store: SessionStore) -> None:
    ck = await keeper(store)
    assert await ck.extend_checkpoint("ghost", 0, 1, b"no session") is False
    assert await ck.read_checkpoint("ghost") is None
    await put(store, summary("s1", 4), 4)
    assert await ck.extend_checkpoint("s1", 0, 1, b"no checkpoint") is False
    assert await ck.extend_checkpoint("s1", 1, 2, b"no checkpoint") is False
    assert await ck.read_checkpoint("s1") is None
    assert await ck.write_checkpoint("s1", 2, b"base") is True
    assert await ck.extend_checkpoint("s1", 2, 5, b"past the log") is False
    assert await ck.extend_checkpoint("s1", 2, 2, b"no step") is False
    assert await ck.extend_checkpoint("s1", 2, 1, b"backwards") is False
    assert await ck.read_checkpoint("s1") == Checkpoint(2, b"base")
    assert await ck.extend_checkpoint("s1", 2, 4, b"at the log's head") is True
    assert await store.append("s1", 4, entries(4, 1), summary("s1", 5)) == 5  # the log moves on
    assert await ck.extend_checkpoint("s1", 4, 6, b"past the log again") is False
    assert await ck.extend_checkpoint("s1", 4, 5, b"to 5") is True
    assert await ck.read_checkpoint("s1") == Checkpoint(5, b"base", (b"at the log's head", b"to 5"))
    log = await store.read("s1")
    assert log is not None and log.version == 5


async def test_extensions_keep_their_bytes_and_order(store: SessionStore) -> None:
    ck = await keeper(store)
    await put(store, summary("s1", 40), 40)
    base = bytes(range(256)) * 4 + b"\n\x00 \xff"
    assert await ck.write_checkpoint("s1", 1, base) is True
    expected = []
    for version in range(2, 41):
        data = bytes([version]) * version + b"\n\x00\r\n" + b"%d" % version
        expected.append(data)
        assert await ck.extend_checkpoint("s1", version - 1, version, data) is True
    big = b"x" * (store.max_record_bytes * 2)  # like a base, an extension may exceed a record's limit
    await store.append("s1", 40, entries(40, 1), summary("s1", 41))
    assert await ck.extend_checkpoint("s1", 40, 41, big) is True
    assert await ck.read_checkpoint("s1") == Checkpoint(41, base, (*expected, big))
    assert await ck.extend_checkpoint("s1", 41, 42, b"past the log") is False
    assert await ck.extend_checkpoint("s1", 40, 41, b"again") is False
    assert (await ck.read_checkpoint("s1")) == Checkpoint(41, base, (*expected, big))


async def test_a_new_base_drops_the_extensions(store: SessionStore) -> None:
    ck = await keeper(store)
    await put(store, summary("s1", 8), 8)
    assert await ck.write_checkpoint("s1", 2, b"old base") is True
    assert await ck.extend_checkpoint("s1", 2, 4, b"to 4") is True
    # At or below the head (an extension's version, or between the base and it): refused.
    for version in (1, 2, 3, 4):
        assert await ck.write_checkpoint("s1", version, b"older") is False
    assert await ck.read_checkpoint("s1") == Checkpoint(4, b"old base", (b"to 4",))
    assert await ck.write_checkpoint("s1", 9, b"past the log") is False
    assert await ck.write_checkpoint("s1", 5, b"new base") is True
    assert await ck.read_checkpoint("s1") == Checkpoint(5, b"new base")
    assert await ck.extend_checkpoint("s1", 4, 6, b"after the old head") is False
    assert await ck.extend_checkpoint("s1", 5, 7, b"to 7") is True
    assert await ck.read_checkpoint("s1") == Checkpoint(7, b"new base", (b"to 7",))
    assert await ck.write_checkpoint("s1", 8, b"newest base") is True
    assert await ck.read_checkpoint("s1") == Checkpoint(8, b"newest base")


async def test_a_deleted_session_takes_its_extensions_along(store: SessionStore) -> None:
    ck = await keeper(store)
    await put(store, summary("s1", 5), 5)
    assert await ck.write_checkpoint("s1", 2, b"old base") is True
    assert await ck.extend_checkpoint("s1", 2, 3, b"old 3") is True
    assert await ck.extend_checkpoint("s1", 3, 5, b"old 5") is True
    assert await store.delete("s1") is True
    assert await ck.read_checkpoint("s1") is None
    assert await ck.extend_checkpoint("s1", 5, 6, b"ghost") is False
    await put(store, summary("s1", 6), 6)  # the same id again: a new log, nothing of the old checkpoint
    assert await ck.read_checkpoint("s1") is None
    assert await ck.extend_checkpoint("s1", 5, 6, b"on the old head") is False
    assert await ck.write_checkpoint("s1", 1, b"new base") is True
    assert await ck.read_checkpoint("s1") == Checkpoint(1, b"new base")
    assert await ck.extend_checkpoint("s1", 1, 3, b"new 3") is True
    assert await ck.read_checkpoint("s1") == Checkpoint(3, b"new base", (b"new 3",))


async def test_racing_extensions_from_the_same_head_keep_one(backend: Backend) -> None:
    async with keepers(backend, 8) as racers:
        first = racers[0]
        await put(first, summary("s1", 12), 12)
        assert await first.write_checkpoint("s1", 2, b"base") is True
        for round_ in range(3):
            head = (await first.read_checkpoint("s1") or Checkpoint(0, b"")).version
            kept = await asyncio.gather(
                *(
                    r.extend_checkpoint("s1", head, head + 1 + n % 2, b"%d by %d" % (round_, n))
                    for n, r in enumerate(racers)
                )
            )
            assert sum(kept) == 1
            [winner] = [n for n, k in enumerate(kept) if k]
            after = await racers[-1].read_checkpoint("s1")
            assert after is not None
            assert after.version == head + 1 + winner % 2
            assert after.data == b"base"
            assert len(after.extensions) == round_ + 1
            assert after.extensions[-1] == b"%d by %d" % (round_, winner)


def chained(checkpoint: Checkpoint) -> bool:
    """Whether a checkpoint made by ``grow`` is whole: its base names the version it was written
    at, each extension the versions it took the checkpoint from and to, and they meet the head."""
    at = int(checkpoint.data.split(b"@")[1])
    for extension in checkpoint.extensions:
        start, end = (int(v) for v in extension.split(b">"))
        if start != at:
            return False
        at = end
    return at == checkpoint.version


async def grow(ck: CheckpointStore, seed: int, until: int, rebase: bool) -> int:
    """Extend (and now and then rebase) the checkpoint of s1 from whatever head it is at, until
    it reaches ``until``; returns how many writes were kept."""
    rng = random.Random(seed)
    kept = 0
    while True:
        current = await ck.read_checkpoint("s1")
        assert current is not None
        if current.version >= until:
            return kept
        step = min(rng.randint(1, 2), until - current.version)
        target = current.version + step
        if rebase and rng.random() < 0.2:
            kept += await ck.write_checkpoint("s1", target, b"base@%d" % target)
        else:
            kept += await ck.extend_checkpoint("s1", current.version, target, b"%d>%d" % (current.version, target))
        await asyncio.sleep(0)  # let the others in, on a store that never waits (memory)


async def test_a_read_racing_extensions_sees_one_whole_checkpoint(backend: Backend) -> None:
    """Writers on separate store objects extend (and now and then rebase) one checkpoint while
    readers read it: every read is one moment's checkpoint, its head that of its extensions."""
    until = 120
    async with keepers(backend, 6) as stores:
        await put(stores[0], summary("s1", until), until)
        assert await stores[0].write_checkpoint("s1", 1, b"base@1") is True
        done = asyncio.Event()
        seen: list[Checkpoint] = []

        async def read(ck: CheckpointStore) -> None:
            while not done.is_set():
                checkpoint = await ck.read_checkpoint("s1")
                assert checkpoint is not None
                assert chained(checkpoint), checkpoint
                seen.append(checkpoint)
                await asyncio.sleep(0)

        readers = [asyncio.ensure_future(read(ck)) for ck in stores[3:]]
        try:
            writes = await asyncio.gather(*(grow(ck, n, until, rebase=n == 0) for n, ck in enumerate(stores[:3])))
        finally:
            done.set()
            await asyncio.gather(*readers)
        assert sum(writes) >= 1
        final = await stores[-1].read_checkpoint("s1")
        assert final is not None and final.version == until and chained(final)
        assert len(seen) > 1
        assert any(c.extensions for c in seen)
