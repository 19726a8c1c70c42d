"""A small session's checkpoint is extended a few times before its base is written again whole
(``checkpoints._cache.MIN_EXTENSIONS``): a new base at every checkpoint was most of what
checkpoints cost a warm session, and a cold load of a base and a few small extensions reads the
same session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


class Delegating:
    """A store of one's own that wraps a built-in one through ``__getattr__`` (as a logging or
    metrics wrapper does): it has every method of the one it wraps, none on its class."""

    def __init__(self, store: SqliteSessionStore) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


async def test_a_store_that_delegates_through_getattr_keeps_its_checkpoints_extended(tmp_path: Path, caplog) -> None:
    """Found by a probe: whether ``extend_checkpoint`` takes ``replaces`` was looked up on the
    store's class, where a wrapper has no such method: every extension failed (logged), and
    the checkpoint stayed at its first base while the session grew."""
    store = SqliteSessionStore(tmp_path / "s.db")
    _, agent = build(Delegating(store))  # type: ignore[arg-type]
    agent.checkpoint_every = 8
    session_id = await cycle(agent)
    extended = 0
    for _ in range(12):
        await cycle(agent, session_id)
        await agent.sessions.settle()
        checkpoint = await store.read_checkpoint(session_id)
        assert checkpoint is not None
        extended = max(extended, len(checkpoint.extensions))
    summary = await store.get_summary(session_id)
    assert summary is not None and summary.version - checkpoint.version < 8
    assert extended > 0
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]
