"""Long checkpoint bases given in part (PostgreSQL, Redis, a store of one's own): a cold agent
reads the head of the base and fetches its items as it reads them, from the base it loaded even
after a newer base replaced it; a base gone from the store fails one call, and the session is
read again after.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pausepoint import Agent, ToolResponse
from pausepoint.checkpoints import _cache as _checkpoint
from pausepoint.checkpoints._books import books
from pausepoint.checkpoints._chunks import CHUNK_BYTES
from pausepoint.demo import build
from pausepoint.errors import AlreadyResolved, ConcurrentUpdate, StoreError, UnknownInterrupt
from pausepoint.stores import REPLACED_BASES_KEPT, Checkpoint, CheckpointStore, postgres, redis
from pausepoint.stores._partial import PREFIX_BYTES, PartialBase
from pausepoint.testing.stores import put, summary

from .backends import Backend, MemoryCheckpoints, make_backend
from .test_checkpoints import TRANSFER, cycle, seen, settled

# Enough approval cycles for a base well past what a store reads with the checkpoint.
CYCLES = 60


@pytest.fixture(params=["postgres", "redis"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    made = make_backend(request.param, tmp_path)
    yield made
    await made.cleanup()


async def agent_on(backend: Backend, ledger: list[str] | None = None) -> Agent:
    """A banking agent in a "process" of its own, writing a checkpoint every 8 records."""
    _, agent = build(await backend.open(), ledger)
    agent.checkpoint_every = 8
    return agent


async def grown(backend: Backend, ledger: list[str] | None = None, cycles: int = CYCLES) -> tuple[Agent, str]:
    """An agent that ran a session of ``cycles`` approval cycles and wrote its checkpoint (up to
    7 records behind: one is written once the session is 8 records past the last)."""
    writer = await agent_on(backend, ledger)
    session_id = await cycle(writer)
    for _ in range(cycles - 1):
        await cycle(writer, session_id)
    await settled(writer)
    return writer, session_id


async def cold_load(agent: Agent, session_id: str) -> None:
    """Load the session into ``agent`` as a turn would, reading none of its history."""
    await agent.sessions.refresh(session_id)
    state = agent.sessions.cached(session_id)
    assert state is not None and books(state).partial is not None, "the base was not given in part"


async def loaded_cold(backend: Backend, cycles: int = CYCLES) -> tuple[Agent, str, Agent]:
    """A grown session's writer, its id, and another agent that loaded it cold, in part."""
    writer, session_id = await grown(backend, cycles=cycles)
    reader = await agent_on(backend)
    # Were the writer's last checkpoint 8 records behind, the reader would write a base at once,
    # fetching the whole of the one it loaded: not while it loads.
    every, reader.checkpoint_every = reader.checkpoint_every, None
    await cold_load(reader, session_id)
    reader.checkpoint_every = every
    return writer, session_id, reader


async def cycles(agent: Agent, session_id: str, count: int) -> None:
    """``count`` approval cycles, each followed by the checkpoint it causes."""
    for _ in range(count):
        await cycle(agent, session_id)
        await settled(agent)


async def test_a_cold_agent_reads_a_long_base_in_part(backend: Backend) -> None:
    writer, session_id = await grown(backend)
    store = writer.store
    assert isinstance(store, CheckpointStore)
    checkpoint = await store.read_checkpoint(session_id)
    assert checkpoint is not None and checkpoint.fetch is not None
    assert len(checkpoint.data) > 3 * 64 * 1024  # more than was read with it
    reader = await agent_on(backend)
    await cold_load(reader, session_id)
    assert await seen(reader, session_id) == await seen(writer, session_id)
    await cycle(reader, session_id)  # and it goes on from there
    assert await seen(reader, session_id) == await seen(writer, session_id)


async def test_a_pause_answered_at_once_by_agents_reading_in_part_runs_its_tool_once(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only live pauses are answerable, and each once, when the agents answering found the pause
    in a base given in part (its key index and the pause fetched as they are looked up)."""
    monkeypatch.setattr(_checkpoint, "MIN_EXTENSIONS", 0)  # a base at each checkpoint: the pause in one
    ledger: list[str] = []
    writer, session_id = await grown(backend, ledger)
    writer.checkpoint_every = 1
    paused = await writer.chat(session_id).send(TRANSFER)
    await settled(writer)
    store = writer.store
    assert isinstance(store, CheckpointStore)
    checkpoint = await store.read_checkpoint(session_id)  # a base, taken with the pause open
    state = writer.sessions.cached(session_id)
    assert checkpoint is not None and state is not None and checkpoint.version == state.version
    assert not checkpoint.extensions and checkpoint.fetch is not None
    pause = paused.interrupts[0]
    racers = [await agent_on(backend, ledger) for _ in range(3)]
    for racer in racers:
        await cold_load(racer, session_id)
    with pytest.raises(UnknownInterrupt):  # a forged ref finds nothing in the key index
        await racers[0].chat(session_id).resume(respond=[ToolResponse("0" * 24, pause.name, {"approved": True})])
    answer = pause.respond({"approved": True})
    outcomes = await asyncio.gather(
        *(racer.chat(session_id).resume(respond=[answer]) for racer in racers), return_exceptions=True
    )
    assert sum(not isinstance(outcome, BaseException) for outcome in outcomes) == 1, outcomes
    assert all(isinstance(o, AlreadyResolved | ConcurrentUpdate) for o in outcomes if isinstance(o, BaseException))
    assert ledger.count("5->savings") == CYCLES + 1  # every earlier cycle's transfer, and this one once


async def test_a_base_replaced_after_a_cold_load_stays_readable(backend: Backend) -> None:
    writer, session_id, reader = await loaded_cold(backend)
    state = reader.sessions.cached(session_id)
    await cycles(writer, session_id, 2)  # newer bases meanwhile (fewer than the store keeps)
    assert reader.sessions.cached(session_id) is state
    history = (await seen(writer, session_id))[0]
    # The reader's state still reads its old base's items (the history up to its version).
    assert state is not None and list(state.messages) == history[: len(state.messages)]
    assert await seen(reader, session_id) == await seen(writer, session_id)


async def test_a_state_far_behind_its_session_is_read_again_rather_than_folded_on(backend: Backend) -> None:
    writer, session_id, reader = await loaded_cold(backend)
    stale = reader.sessions.cached(session_id)
    await cycles(writer, session_id, 12)  # more new bases than the store keeps replaced ones
    assert await seen(reader, session_id) == await seen(writer, session_id)
    assert reader.sessions.cached(session_id) is not stale


async def test_a_base_gone_from_the_store_fails_one_call_then_the_session_is_read_again(backend: Backend) -> None:
    # A history of many chunks: folding the records after the checkpoint fetches a few of them,
    # and reading the history needs the others.
    writer, session_id, reader = await loaded_cold(backend, cycles=5 * CYCLES)
    reader.checkpoint_every = None  # a reader only: a new base would fetch the whole of the old one
    await backend.drop_checkpoint_bases()
    with pytest.raises(StoreError, match="no longer in the store"):
        await reader.chat(session_id).history()
    # The next call reads the session again: its log, as no base is left.
    assert await seen(reader, session_id) == await seen(writer, session_id)
    await cycle(reader, session_id)


async def test_a_state_is_read_again_before_its_replaced_base_expires(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = 1.0  # seconds a replaced base is kept (300 by default)
    for module in (_checkpoint, postgres, redis):
        monkeypatch.setattr(module, "PARTIAL_BASE_KEPT", kept)
    writer, session_id, reader = await loaded_cold(backend)
    await cycles(writer, session_id, 3)  # a newer base replaces the one the reader loaded
    await asyncio.sleep(kept * 1.5)
    await cycles(writer, session_id, 3)  # and another, after which the loaded one is gone
    # Past half of ``kept`` the reader loads the session again rather than read a base that may
    # be gone; the history it gives is whole.
    assert await seen(reader, session_id) == await seen(writer, session_id)


async def test_a_busy_session_keeps_only_its_newest_replaced_bases(backend: Backend) -> None:
    store = await backend.open()
    try:
        assert isinstance(store, CheckpointStore)
        await put(store, summary("s1", 7), 7)
        bases = {version: bytes([version]) * 300_000 for version in range(1, 8)}
        read = {}
        for version, data in bases.items():
            assert await store.write_checkpoint("s1", version, data) is True
            read[version] = await store.read_checkpoint("s1")
        assert await backend.count_checkpoint_bases("s1") == 1 + REPLACED_BASES_KEPT
        for version, checkpoint in read.items():
            assert checkpoint is not None and checkpoint.fetch is not None
            if version > 7 - 1 - REPLACED_BASES_KEPT:  # the newest replaced ones, and the current one
                assert checkpoint.whole().data == bases[version]
            else:
                with pytest.raises(StoreError, match="no longer in the store"):
                    checkpoint.whole()
        assert await store.delete("s1") is True
        assert await backend.count_checkpoint_bases("s1") == 0
    finally:
        await store.close()


async def test_version_4_checkpoints_are_set_aside_by_the_upgrade(backend: Backend) -> None:
    """A store of layout 4 kept each base with its checkpoint, without its version: the upgrade
    leaves them unused (a cache), and a cold agent reads the session from its log."""
    writer, session_id = await grown(backend)
    await backend.make_version_4(session_id)
    reader = await agent_on(backend)  # opens the store: the upgrade runs
    assert await seen(reader, session_id) == await seen(writer, session_id)
    await cycle(reader, session_id)
    await settled(reader)
    store = reader.store
    assert isinstance(store, CheckpointStore)
    written = await store.read_checkpoint(session_id)  # of the new layout, by the reader
    assert written is not None and written.version > 3 and written.fetch is not None
    again = await agent_on(backend)
    assert await seen(again, session_id) == await seen(writer, session_id)
    cached = again.sessions.cached(session_id)
    assert cached is not None and books(cached).checkpointed >= written.version


class GivenInPart(MemoryCheckpoints):
    """An in-memory store that gives its bases in part, as a store across a network would
    (``Checkpoint.fetch``, through the ``PartialBase`` PostgreSQL's and Redis's use): the first
    ``PREFIX_BYTES`` with the checkpoint, and each range the runtime has it read after, noted
    in ``fetched``."""

    def __init__(self) -> None:
        super().__init__()
        self.fetched: list[tuple[int, int]] = []

    async def read_checkpoint(self, session_id: str) -> Checkpoint | None:
        checkpoint = await super().read_checkpoint(session_id)
        if checkpoint is None or len(checkpoint.data) <= PREFIX_BYTES:
            return checkpoint
        whole = bytes(checkpoint.data)

        def read(start: int, stop: int) -> bytes:
            self.fetched.append((start, stop))
            return whole[start:stop]

        given = PartialBase(len(whole), whole[:PREFIX_BYTES], read)
        return dataclasses.replace(checkpoint, data=given.view, fetch=given.fetch)


async def test_a_cold_load_of_a_long_base_reads_no_more_than_its_first_bytes() -> None:
    """What a load reads of a base does not grow with the history: the head of a base of 1,000
    approval cycles (4.4 MB, where each of its 18,000 items starts: 73 KB) is within the first
    64 KiB, so a cold load asks for nothing else; each item it reads after costs a fetch of the
    chunks its place and its bytes are in."""
    store = GivenInPart()
    _, writer = build(store)
    session_id = await cycle(writer)
    for _ in range(999):
        await cycle(writer, session_id)
    await settled(writer)
    checkpoint = await store.read_checkpoint(session_id)
    assert checkpoint is not None and checkpoint.fetch is not None and len(checkpoint.data) > 4_000_000

    _, reader = build(store)
    reader.checkpoint_every = None  # a reader only: no new base, which would fetch the whole of this one
    await cold_load(reader, session_id)
    assert store.fetched == []  # the load read the head from the first bytes alone
    state = reader.sessions.cached(session_id)
    assert state is not None
    middle = len(state.messages) // 2
    assert state.messages[middle] == (await writer.chat(session_id).history())[middle]
    assert 1 <= len(store.fetched) <= 2  # the chunk of its place, and of its bytes (one, or two)
    assert all(stop - start <= 2 * CHUNK_BYTES for start, stop in store.fetched)
    assert await seen(reader, session_id) == await seen(writer, session_id)
