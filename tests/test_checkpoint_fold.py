"""A checkpoint plus the records after it folds to the same state as the whole log.

The logs are made by the banking agent itself, driven by a random sequence of what its users
do (plain messages, transfers that pause, several pauses at once, answers of every kind, keyed
retries, cancellations, detached turns), so every record kind the runtime writes for them —
and any field a later change adds to the folded state — takes part. For each log the state is
checkpointed after a random record, loaded back and brought up to date with the rest; it must
equal folding the whole log, field by field (through the checkpoint's own codec, which is
derived from the state's types) and in which objects it shares between fields.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pausepoint import AgentFinishReason
from pausepoint.checkpoints import _cache as _checkpoint
from pausepoint.checkpoints import _key_index
from pausepoint.checkpoints._books import books
from pausepoint.checkpoints._decode import decode_chain, decode_state
from pausepoint.checkpoints._encode import encode, encode_state
from pausepoint.checkpoints._format import record_digest
from pausepoint.checkpoints._lazy_dict import LazyDict
from pausepoint.checkpoints._lazy_list import LazyList
from pausepoint.demo import build
from pausepoint.session._records import decode_record
from pausepoint.session._state import SessionState
from pausepoint.stores import Checkpoint, InMemorySessionStore, LogEntry

ACTIONS = st.lists(
    st.sampled_from(["plain", "transfer", "two_transfers", "approve", "deny", "restart", "keyed", "cancel", "detach"]),
    min_size=1,
    max_size=12,
)


async def make_log(actions: list[str]) -> list[LogEntry]:
    """The log of one session of the banking agent after ``actions``."""
    store = InMemorySessionStore()
    _, agent = build(store)
    agent.checkpoint_every = None
    chat = agent.chat()
    await chat.send("hello")
    for n, action in enumerate(actions):
        pending = await chat.interrupts()
        if action == "plain" and not pending:
            await chat.send(f"hello {n}")
        elif action == "transfer" and not pending:
            await chat.send(f"Transfer ${n + 1} to savings.")
        elif action == "two_transfers" and not pending:
            await chat.send(f"Transfer ${n + 1} to savings and ${n + 2} to checking.")
        elif action == "approve" and pending:
            await chat.resume(respond=[pending[0].respond({"approved": True})])
        elif action == "deny" and pending:
            await chat.resume(respond=[pending[0].deny("no")])
        elif action == "restart" and pending:
            await chat.resume(restart=[pending[0].restart()])
        elif action == "keyed" and pending:
            answer = [p.respond({"approved": True}) for p in pending]
            first = await chat.resume(respond=answer, idempotency_key=f"key-{n}")
            again = await chat.resume(respond=answer, idempotency_key=f"key-{n}")
            assert again.finish_reason == first.finish_reason
        elif action == "cancel" and pending:
            await chat.cancel_pending("changed my mind")
        elif action == "detach" and not pending:
            turn = await chat.detach(f"in the background {n}")
            response = await turn.wait()
            assert response.finish_reason == AgentFinishReason.STOP
    found = await store.read(chat.session_id)
    assert found is not None
    return found.entries


def fold(session_id: str, entries: list[LogEntry]) -> SessionState:
    state = SessionState(session_id)
    for entry in entries:
        state.apply(decode_record(entry.data))
    state.durable_version = state.version
    return state


def sharing(state: SessionState) -> set[frozenset[tuple[str, Any]]]:
    """Which places of the state (field, key) hold one and the same object."""
    places: dict[int, set[tuple[str, Any]]] = {}
    for f in dataclasses.fields(state):
        value = getattr(state, f.name)
        if isinstance(value, dict):
            items = list(value.items())
        elif isinstance(value, list):
            items = list(enumerate(value))
        else:
            items = [(None, value)]
        for key, item in items:
            if dataclasses.is_dataclass(item):
                places.setdefault(id(item), set()).add((f.name, key))
    return {frozenset(p) for p in places.values() if len(p) > 1}


def materialised(state: SessionState) -> SessionState:
    """The state with every lazy item decoded (the codec then encodes them from objects)."""
    for f in dataclasses.fields(state):
        value = getattr(state, f.name)
        if isinstance(value, LazyList | LazyDict):
            list(value.values()) if isinstance(value, LazyDict) else list(value)
    return state


def check_cut(entries: list[LogEntry], cut: int) -> None:
    """Checkpoint after record ``cut``, load it, fold the rest: the same as folding them all."""
    whole = fold("s", entries)
    head = fold("s", entries[:cut])
    checkpoint = encode_state(head, record_digest(entries[cut - 1].data))
    loaded = decode_state("s", checkpoint)
    assert loaded is not None and loaded.version == cut
    for entry in entries[cut:]:
        loaded.apply(decode_record(entry.data))

    # Equal field by field: both encoded by the codec (items never read are copied as written).
    assert encode_state(loaded, b"d") == encode_state(whole, b"d")
    assert encode_state(materialised(loaded), b"d") == encode_state(whole, b"d")
    assert sharing(loaded) == sharing(whole)
    # And what every surface reads from the state agrees.
    assert list(loaded.messages) == whole.messages
    assert loaded.open_refs() == whole.open_refs()
    assert loaded.summary(whole.created_at) == whole.summary(whole.created_at)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=ACTIONS, where=st.floats(min_value=0, max_value=1))
@example(actions=["transfer"], where=1.0)
@example(actions=["two_transfers", "approve"], where=1.0)
@example(actions=["plain", "detach"], where=0.9)
def test_checkpoint_plus_tail_equals_the_whole_fold(actions: list[str], where: float) -> None:
    entries = asyncio.run(make_log(actions))
    check_cut(entries, max(1, math.ceil(where * len(entries))))


@pytest.mark.parametrize(
    "actions",
    [
        ["two_transfers", "approve", "restart", "approve", "deny"],
        ["transfer", "keyed", "two_transfers", "cancel", "plain"],
        ["detach", "transfer", "deny", "detach"],
    ],
)
@pytest.mark.parametrize("keys_per_bucket", [_key_index.KEYS_PER_BUCKET, 1])
def test_every_cut_of_some_logs(actions: list[str], keys_per_bucket: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_key_index, "KEYS_PER_BUCKET", keys_per_bucket)  # 1: buckets of one key, and empty ones
    entries = asyncio.run(make_log(actions))
    for cut in range(1, len(entries) + 1):
        check_cut(entries, cut)


def test_every_field_of_the_state_is_in_the_checkpoint() -> None:
    """A field added to ``SessionState`` is checkpointed without anyone listing it, and a field
    set outside the dataclass's declaration would be lost: there must be none."""
    entries = asyncio.run(make_log(["transfer", "approve", "two_transfers", "keyed", "plain"]))
    state = fold("s", entries)
    declared = {f.name for f in dataclasses.fields(SessionState)}
    assert set(vars(state)) == declared


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=ACTIONS)
@example(actions=["transfer", "keyed", "transfer", "approve", "plain"])
def test_the_indexes_a_turn_scans_are_what_scanning_everything_gives(actions: list[str]) -> None:
    """A turn looks for a grant among the live ones and an unkeyed end ends the unended keys,
    instead of scanning every grant and key the session ever had: the same answer."""
    state = fold("s", asyncio.run(make_log(actions)))
    assert state.live_grants == tuple(
        grant_id
        for grant_id, grant in state.grants.items()
        if grant.revoked is None and (grant.record.uses is None or grant.used < grant.record.uses)
    )
    assert state.unended_keys == tuple(key for key, outcome in state.keys.items() if outcome.ended is None)


def check_chain(
    entries: list[LogEntry], cuts: list[int], idle: list[bool], reads: list[bool], merges: list[int]
) -> None:
    """A base after record ``cuts[0]``, then an extension at each later cut, written the way the
    runtime writes them: from the writer's state, which goes on folding (and, where ``reads``
    says so, reading its whole history) between cuts, and which takes the extension back in
    when ``idle`` (nothing used it meanwhile) or only notes it otherwise (a record was folded
    after the extension was encoded); each replaces the last ``merges`` extensions (as many as
    there are, at most), as a store keeps them. A cold load of base plus extensions, folded to
    the end, must equal the whole fold; so must the writer, and a cold loader that writes the
    next extension, merged with the last one."""
    whole = fold("s", entries)

    def digest(version: int) -> bytes:
        return record_digest(entries[version - 1].data)

    base = encode_state(fold("s", entries[: cuts[0]]), digest(cuts[0]))
    writer = decode_state("s", base)
    assert writer is not None
    extensions: list[bytes] = []
    reached = cuts[0]
    for cut, quiet, read, merge in zip(cuts[1:], idle, reads, merges, strict=False):
        for entry in entries[writer.version : cut]:
            writer.apply(decode_record(entry.data))
        if read:
            materialised(writer)
        assert books(writer).chain is not None
        replaces = min(merge, len(extensions))
        written = encode(writer, digest(cut), books(writer).chain, replaces)
        assert written is not None
        extensions[len(extensions) - replaces :] = [written.data]
        reached = cut
        busy = not quiet and cut < len(entries)
        if busy:  # a call folded a record while the extension was being written
            writer.apply(decode_record(entries[cut].data))
        _checkpoint._extended(writer, written, not busy)
        assert writer.durable_version != -1

    loaded = decode_chain("s", Checkpoint(cuts[-1], base, tuple(extensions)))
    assert loaded is not None
    assert loaded.version == reached
    if loaded.version < len(entries):  # the loading process writes the next extension
        assert books(loaded).chain is not None
        cut = (loaded.version + len(entries) + 1) // 2
        for entry in entries[loaded.version : cut]:
            loaded.apply(decode_record(entry.data))
        written = encode(loaded, digest(cut), books(loaded).chain, min(1, len(extensions)))
        assert written is not None
        merged = (*extensions[: len(extensions) - written.replaces], written.data)
        loaded = decode_chain("s", Checkpoint(cut, base, merged))
        assert loaded is not None and loaded.version == cut
    for state in (loaded, writer):
        for entry in entries[state.version :]:
            state.apply(decode_record(entry.data))
        assert encode_state(state, b"d") == encode_state(whole, b"d")
        assert sharing(state) == sharing(whole)
        assert encode_state(materialised(state), b"d") == encode_state(whole, b"d")
        assert sharing(state) == sharing(whole)
        assert state.open_refs() == whole.open_refs()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    actions=ACTIONS,
    wheres=st.lists(st.floats(min_value=0, max_value=1), min_size=2, max_size=5),
    idle=st.lists(st.booleans(), min_size=4, max_size=4),
    reads=st.lists(st.booleans(), min_size=4, max_size=4),
    merges=st.lists(st.integers(min_value=0, max_value=3), min_size=4, max_size=4),
)
@example(
    actions=["two_transfers", "approve", "approve"],
    wheres=[0.2, 0.5, 1.0],
    idle=[True] * 4,
    reads=[False] * 4,
    merges=[0] * 4,
)
@example(
    actions=["transfer", "keyed", "detach"], wheres=[0.1, 0.6, 0.9], idle=[False] * 4, reads=[True] * 4, merges=[0] * 4
)
@example(
    actions=["two_transfers", "approve", "restart", "approve", "cancel", "transfer", "deny"],
    wheres=[0.1, 0.3, 0.5, 0.7, 0.9],
    idle=[False, True, False, True],
    reads=[False, True, False, False],
    merges=[0, 1, 0, 2],
)
def test_a_base_plus_extensions_plus_tail_equals_the_whole_fold(
    actions: list[str], wheres: list[float], idle: list[bool], reads: list[bool], merges: list[int]
) -> None:
    entries = asyncio.run(make_log(actions))
    cuts = sorted({max(1, math.ceil(w * len(entries))) for w in wheres})
    check_chain(entries, cuts, idle, reads, merges)


@pytest.mark.parametrize("keys_per_bucket", [_key_index.KEYS_PER_BUCKET, 1])
def test_every_extension_of_some_logs(keys_per_bucket: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_key_index, "KEYS_PER_BUCKET", keys_per_bucket)
    for actions in (["two_transfers", "approve", "restart", "approve", "deny"], ["detach", "transfer", "keyed"]):
        entries = asyncio.run(make_log(actions))
        for first in range(1, len(entries)):
            for quiet, merge in ((True, 0), (False, 0), (True, 2), (False, 1)):
                check_chain(
                    entries,
                    [first, *range(first + 1, len(entries) + 1)],
                    [quiet] * len(entries),
                    [False] * len(entries),
                    [merge] * len(entries),
                )
