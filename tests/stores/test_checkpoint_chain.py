"""A small session's checkpoint is extended a few times before its base is written again whole
(``checkpoints._cache.MIN_EXTENSIONS``): a new base at every checkpoint was most of what
checkpoints cost a warm session, and a cold load of a base and a few small extensions reads the
same session."""

from __future__ import annotations

from pathlib import Path

from pausepoint.checkpoints import _cache as _checkpoint
from pausepoint.demo import build
from pausepoint.stores import SqliteSessionStore

from .test_checkpoints import cycle, seen


async def test_a_small_sessions_checkpoint_is_extended_up_to_min_extensions_then_based_again(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    _, agent = build(store)
    agent.checkpoint_every = None
    session_id = await cycle(agent)
    for _ in range(20):  # a session of some length, with no checkpoint yet
        await cycle(agent, session_id)
    agent.checkpoint_every = 8
    chains: list[int] = []
    for _ in range(12):
        await cycle(agent, session_id)
        await agent.sessions.settle()
        checkpoint = await store.read_checkpoint(session_id)
        assert checkpoint is not None
        chains.append(len(checkpoint.extensions))
    assert max(chains) == _checkpoint.MIN_EXTENSIONS  # extended that many times, never more
    assert 0 in chains[chains.index(max(chains)) :]  # then a new base
    _, cold = build(SqliteSessionStore(tmp_path / "s.db"))  # a process that never saw it
    assert await seen(cold, session_id) == await seen(agent, session_id)
    await store.close()
