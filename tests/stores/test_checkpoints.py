"""Cold loads through checkpoints, on every backend: the same sessions, the same guarantees.

Each test makes the checkpoint a cold agent finds either older than the log, torn, corrupt,
from another schema, or of another log, and checks that the agent sees exactly the session the
log holds (history, pauses, audit trail), that exactly once holds across agents loading from
checkpoints, and that writers racing leave a checkpoint a cold agent can use.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pausepoint import Agent, AgentFinishReason, ToolResponse
from pausepoint.checkpoints import _cache as _checkpoint
from pausepoint.checkpoints import _key_index
from pausepoint.checkpoints._books import books
from pausepoint.checkpoints._decode import decode_chain, decode_state
from pausepoint.checkpoints._encode import encode, encode_state
from pausepoint.checkpoints._format import record_digest
from pausepoint.demo import build
from pausepoint.errors import AlreadyResolved, StoreError, UnknownInterrupt
from pausepoint.session._records import decode_record
from pausepoint.stores import Checkpoint, CheckpointStore, InMemorySessionStore, SessionStore

from .backends import DURABLE, Backend, MemoryCheckpoints, StoreWithoutMerging, make_backend

TRANSFER = "Transfer $5 to savings."


@pytest.fixture(params=DURABLE)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """The backends that keep checkpoints (the in-memory store keeps none: see
    test_the_memory_store_keeps_no_checkpoints)."""
    made = make_backend(request.param, tmp_path)
    yield made
    await made.cleanup()


@pytest.fixture(autouse=True, params=["bases", "extensions"])
def extending(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test twice: with checkpoints written whole each time (what a chain that is full
    gets), and extended whenever they can be, the extensions merged (what a long one gets), with
    a dict's keys in as many buckets as it has keys (as a long session's are: a lookup parses one
    of many)."""
    if request.param == "bases":
        monkeypatch.setattr(_checkpoint, "MIN_EXTENSIONS", 0)
    if request.param == "extensions":
        monkeypatch.setattr(_key_index, "KEYS_PER_BUCKET", 1)
        monkeypatch.setattr(_checkpoint, "BYTES_PER_EXTENSION", 1)
        monkeypatch.setattr(_checkpoint, "EXTENSIONS_SHARE", 1000)
        monkeypatch.setattr(_checkpoint, "MAX_EXTENSIONS", 1000)
        monkeypatch.setattr(_checkpoint, "MERGED_FROM_BYTES", 0)
        monkeypatch.setattr(_checkpoint, "MERGED_SHARE", 1000)
    return str(request.param)


async def agent_on(backend: Backend, ledger: list[str] | None = None, every: int | None = None) -> Agent:
    """A banking agent in a "process" of its own: its own store object, nothing cached."""
    _, agent = build(await backend.open(), ledger)
    agent.checkpoint_every = every
    return agent


async def settled(agent: Agent) -> None:
    """Wait for the checkpoints the agent is writing in the background."""
    await agent.sessions.settle()


def checkpointed(agent: Agent, session_id: str) -> int:
    """The version of the checkpoint the agent's cached state of the session was loaded from
    (0: folded from the log alone)."""
    state = agent.sessions.cached(session_id)
    assert state is not None
    return books(state).checkpointed


async def cycle(agent: Agent, session_id: str | None = None) -> str:
    chat = agent.chat(session_id)
    paused = await chat.send(TRANSFER)
    assert paused.finish_reason == AgentFinishReason.INTERRUPTED
    done = await chat.resume(respond=[paused.interrupts[0].respond({"approved": True})])
    assert done.finish_reason == AgentFinishReason.STOP
    return chat.session_id


async def seen(agent: Agent, session_id: str) -> tuple[Any, ...]:
    chat = agent.chat(session_id)
    interrupts = [(i.ref, i.input) for i in await chat.interrupts()]
    audit = await chat.audit_trail()
    return await chat.history(), interrupts, audit, (await chat.last_response())


async def keeper(store: SessionStore) -> CheckpointStore:
    assert isinstance(store, CheckpointStore)
    return store


async def test_a_checkpoint_older_than_the_log(backend: Backend) -> None:
    writer = await agent_on(backend, every=8)
    sid = await cycle(writer)
    for _ in range(4):
        await cycle(writer, sid)
    await settled(writer)
    checkpoint = await (await keeper(writer.store)).read_checkpoint(sid)
    assert checkpoint is not None and checkpoint.version >= 8
    writer.checkpoint_every = None  # the log moves on past the checkpoint
    await cycle(writer, sid)
    await writer.chat(sid).send("hello after the checkpoint")
    summary = await writer.store.get_summary(sid)
    assert summary is not None and summary.version > checkpoint.version

    cold = await agent_on(backend)
    assert await seen(cold, sid) == await seen(writer, sid)
    assert checkpointed(cold, sid) == checkpoint.version  # loaded from it, not from the whole log
    await cycle(cold, sid)  # and goes on from there
    assert await seen(cold, sid) == await seen(await agent_on(backend), sid)


async def test_a_crash_between_the_append_and_the_checkpoint(backend: Backend) -> None:
    """The process dies after its records are in the log and before its checkpoint is written:
    the next process loads the previous checkpoint and folds what came after it."""
    writer = await agent_on(backend, every=4)
    sid = await cycle(writer)
    await cycle(writer, sid)
    await settled(writer)
    before = await (await keeper(writer.store)).read_checkpoint(sid)
    assert before is not None
    chat = writer.chat(sid)
    paused = await chat.send(TRANSFER)
    for task in list(writer.sessions.tasks):  # the checkpoint writes never happen
        task.cancel()
    await asyncio.gather(*list(writer.sessions.tasks), return_exceptions=True)
    assert await (await keeper(writer.store)).read_checkpoint(sid) == before

    ledger: list[str] = []
    cold = await agent_on(backend, ledger)
    [pending] = await cold.chat(sid).interrupts()
    assert pending.ref == paused.interrupts[0].ref
    await cold.chat(sid).resume(respond=[pending.respond({"approved": True})])
    assert ledger == ["5->savings"]


@pytest.mark.parametrize("damage", ["torn", "flipped", "empty", "other-schema", "other-version"])
async def test_a_damaged_checkpoint_is_not_used(backend: Backend, damage: str) -> None:
    writer = await agent_on(backend, every=1)
    sid = await cycle(writer)
    await settled(writer)
    good = await (await keeper(writer.store)).read_checkpoint(sid)
    assert good is not None and decode_state(sid, good.data) is not None
    writer.checkpoint_every = None
    await cycle(writer, sid)
    await writer.chat(sid).send("a plain message")
    summary = await writer.store.get_summary(sid)
    assert summary is not None
    data = bytes(good.data)
    if damage == "torn":
        data = data[: len(data) * 2 // 3]
    elif damage == "flipped":
        middle = len(data) // 2
        data = data[:middle] + bytes([data[middle] ^ 0x20]) + data[middle + 1 :]
    elif damage == "empty":
        data = b""
    elif damage == "other-schema":  # written by a version of pausepoint whose state had another shape
        head, _, body = data.partition(b"\n")
        parts = head.split(b" ")
        parts[1] = b"0" * len(parts[1])
        data = b" ".join(parts) + b"\n" + body
    else:  # claims a version the log holds, but was taken at another one
        head, _, body = data.partition(b"\n")
        parts = head.split(b" ")
        parts[2] = str(summary.version).encode()
        data = b" ".join(parts) + b"\n" + body
    assert decode_state(sid, data) is None or damage == "other-version"
    assert await (await keeper(writer.store)).write_checkpoint(sid, summary.version, data)

    cold = await agent_on(backend)
    assert await seen(cold, sid) == await seen(writer, sid)
    assert checkpointed(cold, sid) == 0  # folded from the log
    cold.checkpoint_every = 1
    await cycle(cold, sid)  # and writes a sound checkpoint over the damaged one
    await settled(cold)
    again = await agent_on(backend)
    assert await seen(again, sid) == await seen(cold, sid)
    assert checkpointed(again, sid) > summary.version


def flipped_items(data: bytes, where: str = "items") -> bytes:
    """``data`` with one bit flipped in every chunk of a checkpoint's items, or in the first of
    its bounds (the fields of its header line: ... text-length bound-count chunk-size
    chunk-count; after the line come the text, the chunk sums, the bounds and the items)."""
    line, _, _ = data.partition(b"\n")
    *_, text, count, chunk, sums = (int(field) for field in line.split(b" ")[6:])
    bounds = len(line) + 1 + text + 8 * sums
    damaged = bytearray(data)
    if where == "bounds":
        damaged[bounds] ^= 0x01
        return bytes(damaged)
    for at in range(bounds + 4 * count, len(data), chunk):
        damaged[at] ^= 0x01
    return bytes(damaged)


@pytest.mark.parametrize("where", ["items", "bounds"])
async def test_damaged_items_fail_at_most_one_call_then_the_log_is_folded(backend: Backend, where: str) -> None:
    """Damage in a base's items, or in where they start: a store that gives the base whole has
    it checked at load (the log is folded at once); one that gives a view of it (memory, a
    mapped SQLite file) has each chunk checked when first read, so the call that reads the
    damage fails with ``StoreError``, once. Either way the next calls see the session the log
    holds, and exactly once holds."""
    ledger: list[str] = []
    writer = await agent_on(backend, ledger)  # writes no checkpoint: the test writes the one there is
    sid = await cycle(writer)
    for _ in range(3):
        await cycle(writer, sid)
    state = writer.sessions.cached(sid)
    assert state is not None
    last = await writer.store.read(sid, after_version=state.version - 1)
    assert last is not None
    data = encode_state(state, record_digest(last.entries[0].data))
    store = await keeper(writer.store)
    assert await store.write_checkpoint(sid, state.version, flipped_items(data, where))
    written = await store.read_checkpoint(sid)
    assert written is not None

    cold = await agent_on(backend, ledger)
    if isinstance(written.data, memoryview):
        with pytest.raises(StoreError, match="damaged"):
            await seen(cold, sid)
    assert await seen(cold, sid) == await seen(writer, sid)
    assert checkpointed(cold, sid) == 0  # folded from the log
    before = len(ledger)
    await cycle(cold, sid)
    assert len(ledger) == before + 1


async def test_a_checkpoint_of_another_log_is_not_used(backend: Backend) -> None:
    """A session deleted and made again under the same id has a new log: a checkpoint of the
    old one, even at a version the new log holds, is ignored (the digest of the record it was
    taken after tells the logs apart)."""
    writer = await agent_on(backend, every=1)
    sid = "same-id"
    await writer.chat(sid).send("the first life of this id")
    await cycle(writer, sid)
    await settled(writer)
    old = await (await keeper(writer.store)).read_checkpoint(sid)
    assert old is not None
    assert await writer.store.delete(sid)
    writer.checkpoint_every = None
    await writer.chat(sid).send("the second life of this id")
    await cycle(writer, sid)
    await writer.chat(sid).send("one more")
    assert await (await keeper(writer.store)).write_checkpoint(sid, old.version, old.data)

    cold = await agent_on(backend)
    assert await seen(cold, sid) == await seen(writer, sid)
    assert (await cold.chat(sid).history())[0].text == "the second life of this id"
    assert checkpointed(cold, sid) == 0


async def test_exactly_once_across_agents_loading_from_checkpoints(backend: Backend) -> None:
    """A pause answered by one cold agent stays answered for another whose checkpoint was taken
    while it was open: the records after the checkpoint say so."""
    ledger: list[str] = []
    first = await agent_on(backend, ledger, every=1)
    sid = await cycle(first)
    paused = await first.chat(sid).send(TRANSFER)
    await settled(first)
    checkpoint = await (await keeper(first.store)).read_checkpoint(sid)
    assert checkpoint is not None
    assert decode_chain(sid, checkpoint) is not None
    assert decode_chain(sid, checkpoint).open  # type: ignore[union-attr] # the pause is open in it

    # A cold agent looks refs up in the checkpoint's key index: a forged ref and a forged pause
    # id of a live ref find nothing there, and are refused.
    pause = paused.interrupts[0]
    forger = await agent_on(backend, ledger)
    with pytest.raises(UnknownInterrupt):
        await forger.chat(sid).resume(respond=[ToolResponse("0" * 24, pause.name, {"approved": True})])
    with pytest.raises(UnknownInterrupt):
        await forger.chat(sid).resume(
            respond=[ToolResponse(pause.ref, pause.name, {"approved": True}, pause_id="f" * 24)]
        )
    assert ledger == ["5->savings"]

    second, third = await agent_on(backend, ledger), await agent_on(backend, ledger)
    answer = pause.respond({"approved": True})
    await second.chat(sid).resume(respond=[answer])
    with pytest.raises(AlreadyResolved):
        await third.chat(sid).resume(respond=[answer])
    assert ledger == ["5->savings", "5->savings"]  # the first cycle's and this one's: once each


async def test_racing_agents_leave_a_checkpoint_a_cold_agent_can_use(backend: Backend) -> None:
    """Agents on separate store objects run cycles on the same session and write checkpoints
    as they go; one cold agent afterwards sees what the log holds."""
    ledger: list[str] = []
    agents = [await agent_on(backend, ledger, every=2) for _ in range(3)]
    sid = await cycle(agents[0])
    for round_ in range(3):
        for agent in agents:
            await cycle(agent, sid)
        if round_ == 1:
            await asyncio.gather(*(settled(a) for a in agents))
    paused = await agents[1].chat(sid).send(TRANSFER)
    answer = paused.interrupts[0].respond({"approved": True})
    results = await asyncio.gather(*(a.chat(sid).resume(respond=[answer]) for a in agents), return_exceptions=True)
    assert sum(not isinstance(r, BaseException) for r in results) == 1
    assert all(isinstance(r, AlreadyResolved | Exception) for r in results if isinstance(r, BaseException))
    await asyncio.gather(*(settled(a) for a in agents))
    assert len(ledger) == 11

    checkpoint = await (await keeper(agents[0].store)).read_checkpoint(sid)
    assert checkpoint is not None and checkpoint.version > 2
    cold = await agent_on(backend)
    assert await seen(cold, sid) == await seen(await agent_on(backend, every=None), sid)
    assert len(await cold.chat(sid).history()) == len(await agents[0].chat(sid).history())


async def test_a_cold_agent_loads_the_base_and_its_extensions(backend: Backend, extending: str) -> None:
    writer = await agent_on(backend, every=4)
    sid = await cycle(writer)
    for _ in range(5):
        await cycle(writer, sid)
        await settled(writer)
    await writer.chat(sid).send(TRANSFER)  # a pause left open
    await settled(writer)
    checkpoint = await (await keeper(writer.store)).read_checkpoint(sid)
    assert checkpoint is not None
    assert bool(checkpoint.extensions) == (extending == "extensions")

    cold = await agent_on(backend)
    assert await seen(cold, sid) == await seen(await agent_on(backend, every=None), sid)
    assert checkpointed(cold, sid) == checkpoint.version
    [pending] = await cold.chat(sid).interrupts()
    ledger: list[str] = []
    second = await agent_on(backend, ledger)
    await second.chat(sid).resume(respond=[pending.respond({"approved": True})])
    assert ledger == ["5->savings"]
    with pytest.raises(AlreadyResolved):
        await cold.chat(sid).resume(respond=[pending.respond({"approved": True})])


@pytest.mark.parametrize("damage", ["flipped", "torn", "missing"])
async def test_a_damaged_extension_is_not_used(backend: Backend, damage: str) -> None:
    """A checkpoint whose extensions are not whole, or not a chain from its base, is not used:
    the cold agent folds the log."""
    writer = await agent_on(backend, every=None)
    sid = await cycle(writer)
    store = await keeper(writer.store)
    state = writer.sessions.cached(sid)
    assert state is not None
    base = encode_state(state, await digest_at(store, sid, state.version))
    assert await store.write_checkpoint(sid, state.version, base)
    loaded = decode_state(sid, base)
    assert loaded is not None and books(loaded).chain is not None
    datas = []
    for _ in range(2):
        await cycle(writer, sid)
        found = await store.read(sid, after_version=loaded.version)
        assert found is not None
        for entry in found.entries:
            loaded.apply(decode_record(entry.data))
        written = encode(loaded, await digest_at(store, sid, loaded.version), books(loaded).chain)
        assert written is not None
        datas.append((books(loaded).chain.version, loaded.version, written.data))
        _checkpoint._extended(loaded, written, True)
    if damage == "flipped":
        after, version, data = datas[1]
        middle = len(data) // 2
        datas[1] = (after, version, data[:middle] + bytes([data[middle] ^ 0x20]) + data[middle + 1 :])
    elif damage == "torn":
        after, version, data = datas[1]
        datas[1] = (after, version, data[: len(data) // 2])
    else:  # the first extension lost: the second stored as if it extended the base
        datas = [(datas[0][0], datas[1][1], datas[1][2])]
    for after, version, data in datas:
        assert await store.extend_checkpoint(sid, after, version, data)

    cold = await agent_on(backend)
    assert await seen(cold, sid) == await seen(writer, sid)
    assert checkpointed(cold, sid) == 0  # folded from the log


async def digest_at(store: CheckpointStore, session_id: str, version: int) -> bytes:
    found = await store.read(session_id, after_version=version - 1)
    assert found is not None
    return record_digest(found.entries[0].data)


async def test_a_state_that_cannot_take_its_extension_back_is_read_again(
    backend: Backend, extending: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Taking an extension back into the state it was written from should never fail; if it
    did, halfway, the state is not used again: the next call reads the session from the store."""
    if extending != "extensions":
        pytest.skip("only extensions are taken back in")
    real = _checkpoint.extend
    failed: list[int] = []

    def half_done(state: Any, data: bytes, header: Any, **options: Any) -> bool:
        if options.get("written") is None:
            return real(state, data, header, **options)
        failed.append(state.version)
        dict.clear(state.pauses)  # what a merge stopped halfway could leave
        return False

    monkeypatch.setattr(_checkpoint, "extend", half_done)
    ledger: list[str] = []
    writer = await agent_on(backend, ledger, every=4)
    sid = await cycle(writer)
    for _ in range(3):
        await cycle(writer, sid)
        await settled(writer)
    assert failed
    await cycle(writer, sid)
    assert await seen(writer, sid) == await seen(await agent_on(backend, every=None), sid)
    assert len(ledger) == 5


class LogOnly:
    """The ``SessionStore`` side of a store, without its checkpoint methods (a custom store
    that keeps no checkpoints)."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name in ("write_checkpoint", "extend_checkpoint", "read_checkpoint"):
            raise AttributeError(name)
        return getattr(self._store, name)


async def test_a_store_without_checkpoints_is_used_by_folding_the_log(backend: Backend) -> None:
    """An agent whose store has no checkpoint methods writes none and folds whole logs; one
    given a store that has them (``agent.store = ...`` before serving, as the CLI's ``--store``
    does) writes them."""
    store = await keeper(await backend.open())
    plain = LogOnly(store)
    assert isinstance(plain, SessionStore) and not isinstance(plain, CheckpointStore)
    _, folding = build(plain)  # type: ignore[arg-type]
    folding.checkpoint_every = 4
    sid = await cycle(folding)
    await cycle(folding, sid)
    await settled(folding)
    assert await store.read_checkpoint(sid) is None

    _, writer = build(MemoryCheckpoints())
    writer.store = store
    writer.checkpoint_every = 4
    await cycle(writer, sid)
    await settled(writer)
    checkpoint = await store.read_checkpoint(sid)
    assert checkpoint is not None

    _, cold = build(LogOnly(await backend.open()))  # type: ignore[arg-type]
    assert await seen(cold, sid) == await seen(writer, sid)
    assert checkpointed(cold, sid) == 0  # folded from the log, the checkpoint unread


async def test_extensions_of_a_busy_session_hold_what_changed(
    backend: Backend, extending: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cycles back to back, so each extension is written while the next cycle runs: an entry
    read by an earlier cycle and unchanged since is not written again (the extensions stay the
    size of a cycle's changes rather than grow with every cycle since the load)."""
    if extending != "extensions":
        pytest.skip("only extensions are measured")
    monkeypatch.setattr(_checkpoint, "MERGED_FROM_BYTES", 10**12)  # each extension on its own
    writer = await agent_on(backend, every=8)
    sid = await cycle(writer)
    await settled(writer)
    for _ in range(24):
        await cycle(writer, sid)
    await settled(writer)
    checkpoint = await (await keeper(writer.store)).read_checkpoint(sid)
    assert checkpoint is not None
    if len(checkpoint.extensions) < 6:  # the checkpoint writes ran when the cycles were over
        pytest.skip("the store let no checkpoint be written while a cycle ran")
    per_record = []  # each extension's bytes per record it covers
    for extension in checkpoint.extensions:
        version, after = extension.split(b" ", 4)[2:4]
        per_record.append(len(extension) / (int(version) - int(after)))
    third = len(per_record) // 3
    assert max(per_record[-third:]) < 2 * max(per_record[:third]), per_record
    cold = await agent_on(backend)
    assert await seen(cold, sid) == await seen(writer, sid)


def spans(checkpoint: Checkpoint) -> list[tuple[int, int]]:
    """The versions each extension of ``checkpoint`` takes it from and to (from its header)."""
    found = []
    for extension in checkpoint.extensions:
        version, after = extension.split(b" ", 4)[2:4]
        found.append((int(after), int(version)))
    return found


async def test_merged_extensions_keep_a_long_chain_short(backend: Backend, extending: str) -> None:
    """A checkpoint extended many times holds a few extensions, each merging those before it
    of no more records (as a binary counter carries); cold agents load it, extend it further,
    merging what they loaded, and see the session the log holds."""
    if extending != "extensions":
        pytest.skip("only extensions are merged")
    writer = await agent_on(backend, every=2)
    sid = await cycle(writer)
    written: list[list[tuple[int, int]]] = []

    async def served(agent: Agent) -> list[tuple[int, int]]:
        await cycle(agent, sid)
        await settled(agent)
        checkpoint = await (await keeper(agent.store)).read_checkpoint(sid)
        assert checkpoint is not None
        return spans(checkpoint)

    for _ in range(16):
        written.append(await served(writer))
    chains = [chain for chain in written if chain]
    assert len(chains) >= 12  # extended, not rebased, nearly every time
    for chain in chains:  # each a chain from the base, of spans that shrink as a counter's bits
        assert all(a[1] == b[0] for a, b in itertools.pairwise(chain))
        assert all(a[1] - a[0] > b[1] - b[0] for a, b in itertools.pairwise(chain)), chain
    assert max(len(chain) for chain in chains) <= 5
    assert any(len(chain) < len(previous) for previous, chain in itertools.pairwise(chains))

    for _ in range(8):  # until the last extension is one write's own
        if len(written[-1]) > len(written[-2]):
            break
        written.append(await served(writer))
    assert len(written[-1]) > len(written[-2])
    before = written[-1]
    cold = await agent_on(backend, every=2)
    assert await seen(cold, sid) == await seen(await agent_on(backend, every=None), sid)
    after = await served(cold)
    assert after[0][0] == before[0][0] and after[-1][1] > before[-1][1]
    assert all(a[1] == b[0] for a, b in itertools.pairwise(after))
    # The last extension it loaded is merged into its own, which starts where that one did.
    assert before[-1] not in after and after[-1][0] <= before[-1][0] and len(after) <= len(before)
    ledger: list[str] = []
    last = await agent_on(backend, ledger)
    assert await seen(last, sid) == await seen(await agent_on(backend, every=None), sid)
    paused = await last.chat(sid).send(TRANSFER)
    await last.chat(sid).resume(respond=[paused.interrupts[0].respond({"approved": True})])
    assert ledger == ["5->savings"]


@pytest.mark.parametrize("store_kind", ["cannot merge", "base too short"])
async def test_extensions_are_not_merged_for_a_store_that_cannot_or_a_short_base(
    extending: str, store_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store whose ``extend_checkpoint`` takes no ``replaces`` gets extensions one by one, and
    so does any store while the base is shorter than ``MERGED_FROM_BYTES``."""
    if extending != "extensions":
        pytest.skip("only extensions are merged")
    if store_kind == "base too short":
        monkeypatch.setattr(_checkpoint, "MERGED_FROM_BYTES", 10**12)
    store = StoreWithoutMerging() if store_kind == "cannot merge" else MemoryCheckpoints()
    _, writer = build(store)
    writer.checkpoint_every = 2
    sid = await cycle(writer)
    for _ in range(8):
        await cycle(writer, sid)
        await settled(writer)
    checkpoint = await store.read_checkpoint(sid)
    assert checkpoint is not None and len(checkpoint.extensions) >= 6
    chain = spans(checkpoint)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(chain))
    _, cold = build(store)
    assert await seen(cold, sid) == await seen(writer, sid)
    assert checkpointed(cold, sid) == checkpoint.version


async def test_the_memory_store_keeps_no_checkpoints() -> None:
    """A session in memory lives in the process that serves it: a long-lived warm session there
    pays for no checkpoint, and a new agent in the same process reads it by folding its log."""
    store = InMemorySessionStore()
    assert not isinstance(store, CheckpointStore)
    _, warm = build(store)
    session_id = await cycle(warm)
    for _ in range(20):  # far past the default checkpoint_every (64 records)
        await cycle(warm, session_id)
    await settled(warm)
    assert checkpointed(warm, session_id) == 0
    _, cold = build(store)
    assert await seen(cold, session_id) == await seen(warm, session_id)
