"""SQLite keeps a large checkpoint base in a file beside the database and reads it mapped.

Real files in a temporary folder, real SQLite databases, the banking agent through its public
API: a file is written for a large base and only for one, replaced and removed with its row,
survives as a reader's map after another store replaced it, and a missing, torn or stray file
never changes what a cold agent sees.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from pausepoint import Agent
from pausepoint.checkpoints._books import books
from pausepoint.checkpoints._lazy_list import LazyList
from pausepoint.demo import build
from pausepoint.errors import AlreadyResolved, StoreError
from pausepoint.stores import Checkpoint, SqliteSessionStore
from pausepoint.testing.stores import put, summary

from .test_checkpoints import cycle, flipped_items


def files(path: Path) -> list[Path]:
    folder = Path(f"{path}-checkpoints")
    return sorted(folder.iterdir()) if folder.is_dir() else []


async def until(condition: Callable[[], bool], seconds: float = 30) -> None:
    """Wait until ``condition()`` holds, or ``seconds`` have passed."""
    for _ in range(int(seconds / 0.001)):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"still not so after {seconds}s")


async def seen(agent: Agent, session_id: str) -> tuple[object, ...]:
    chat = agent.chat(session_id)
    return await chat.history(), await chat.audit_trail(), [i.ref for i in await chat.interrupts()]


def test_the_threshold_is_checked(tmp_path: Path) -> None:
    assert SqliteSessionStore(tmp_path / "a.db").checkpoint_file_bytes == 256 * 1024
    assert SqliteSessionStore(tmp_path / "a.db", checkpoint_file_bytes=None).checkpoint_file_bytes is None
    for bad in ("1", 1.5, True):
        with pytest.raises(TypeError, match="checkpoint_file_bytes"):
            SqliteSessionStore(tmp_path / "a.db", checkpoint_file_bytes=bad)  # type: ignore[arg-type]
    for bad in (0, -1):
        with pytest.raises(ValueError, match="checkpoint_file_bytes"):
            SqliteSessionStore(tmp_path / "a.db", checkpoint_file_bytes=bad)


async def test_a_large_base_is_a_file_and_a_small_one_a_row(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteSessionStore(path, checkpoint_file_bytes=100)
    try:
        await put(store, summary("small", 3), 3)
        await put(store, summary("large", 3), 3)
        assert await store.write_checkpoint("small", 1, b"s" * 99) is True
        assert files(path) == []
        large = bytes(range(256)) * 2
        assert await store.write_checkpoint("large", 1, large) is True
        [file] = files(path)
        assert file.read_bytes() == large
        assert await store.extend_checkpoint("large", 1, 2, b"an extension stays a row") is True
        assert files(path) == [file]
        assert await store.read_checkpoint("small") == Checkpoint(1, b"s" * 99)
        assert await store.read_checkpoint("large") == Checkpoint(2, large, (b"an extension stays a row",))
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:  # the row names the file and holds no copy of it
        rows = dict(conn.execute("SELECT session_id, length(data) FROM pausepoint_checkpoints").fetchall())
    conn.close()
    assert rows == {"small": 99, "large": 0}
    unlimited = SqliteSessionStore(tmp_path / "rows.db", checkpoint_file_bytes=None)
    try:
        await put(unlimited, summary("s1", 1), 1)
        assert await unlimited.write_checkpoint("s1", 1, large) is True
        assert files(tmp_path / "rows.db") == []
    finally:
        await unlimited.close()


async def test_a_new_base_or_a_deletion_removes_the_file_and_a_refused_base_leaves_none(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteSessionStore(path, checkpoint_file_bytes=10)
    try:
        await put(store, summary("s1", 5), 5)
        assert await store.write_checkpoint("s1", 2, b"first base, large") is True
        [first] = files(path)
        assert await store.write_checkpoint("s1", 2, b"the same version again") is False
        assert await store.write_checkpoint("s1", 9, b"a version past the log") is False
        assert await store.write_checkpoint("ghost", 1, b"a session that is not there") is False
        assert files(path) == [first]
        assert await store.write_checkpoint("s1", 4, b"second base, large") is True
        [second] = files(path)
        assert second != first and second.read_bytes() == b"second base, large"
        assert await store.write_checkpoint("s1", 5, b"small") is True  # back to a row
        assert files(path) == []
        assert await store.write_checkpoint("s1", 4, b"older") is False
        assert await store.read_checkpoint("s1") == Checkpoint(5, b"small")
        await put(store, summary("s2", 1), 1)
        assert await store.write_checkpoint("s2", 1, b"a large base of s2") is True
        assert len(files(path)) == 1
        assert await store.delete("s2") is True
        assert files(path) == []
        assert await store.read_checkpoint("s2") is None
    finally:
        await store.close()


async def test_a_reader_keeps_the_base_it_mapped_after_another_store_replaced_it(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    reader = SqliteSessionStore(path, checkpoint_file_bytes=10)
    writer = SqliteSessionStore(path, checkpoint_file_bytes=10)  # another process, in effect
    try:
        await put(writer, summary("s1", 3), 3)
        old = b"the old base " * 1000
        assert await writer.write_checkpoint("s1", 1, old) is True
        mapped = await reader.read_checkpoint("s1")
        assert mapped is not None
        assert await writer.write_checkpoint("s1", 3, b"the new base " * 1000) is True
        assert len(files(path)) == 1  # the old file is gone from the folder
        assert mapped.data == old  # and the reader's map of it is whole
        assert await reader.read_checkpoint("s1") == Checkpoint(3, b"the new base " * 1000)
        assert await writer.delete("s1") is True
        assert mapped.data == old
    finally:
        await reader.close()
        await writer.close()


@pytest.mark.parametrize("damage", ["missing", "torn", "empty", "head", "items"])
async def test_a_damaged_or_missing_file_makes_a_cold_agent_fold_the_log(tmp_path: Path, damage: str) -> None:
    """A file missing, torn, or damaged where every load checks it (the text and the chunk
    sums) is refused at once. Damage in the items (or their bounds) is found when a chunk of
    them is first read: that call may fail with ``StoreError`` (once), and the log is folded
    after."""
    path = tmp_path / "s.db"
    _, writer = build(SqliteSessionStore(path, checkpoint_file_bytes=1000))
    sid = await cycle(writer)
    for _ in range(6):
        await cycle(writer, sid)
    await writer.sessions.settle()
    [file] = files(path)
    data = file.read_bytes()
    if damage == "missing":
        file.unlink()
    elif damage == "torn":
        file.write_bytes(data[: len(data) // 2])
    elif damage == "empty":
        file.write_bytes(b"")
    elif damage == "head":
        at = data.index(b"\n") + 2
        file.write_bytes(data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :])
    else:
        file.write_bytes(flipped_items(data))

    _, cold = build(SqliteSessionStore(path, checkpoint_file_bytes=1000))
    try:
        first = await seen(cold, sid)
    except StoreError:
        assert damage == "items"
        first = await seen(cold, sid)
    assert first == await seen(writer, sid)
    state = cold.sessions.cached(sid)
    assert state is not None and books(state).checkpointed == 0  # folded from the log
    cold.checkpoint_every = 1
    await cycle(cold, sid)  # and writes a sound checkpoint in place of the damaged one
    await cold.sessions.settle()
    _, again = build(SqliteSessionStore(path, checkpoint_file_bytes=1000))
    assert await seen(again, sid) == await seen(cold, sid)
    state = again.sessions.cached(sid)
    assert state is not None and books(state).checkpointed > 0
    assert len(files(path)) == 1
    for agent in (writer, cold, again):
        await agent.store.close()


async def test_a_cold_agent_loads_a_long_session_from_its_file(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    ledger: list[str] = []
    _, writer = build(SqliteSessionStore(path, checkpoint_file_bytes=4096), ledger)
    sid = await cycle(writer)
    for _ in range(30):
        await cycle(writer, sid)
    await writer.sessions.settle()
    assert len(files(path)) == 1
    _, cold = build(SqliteSessionStore(path, checkpoint_file_bytes=4096), ledger)
    assert await seen(cold, sid) == await seen(writer, sid)
    state = cold.sessions.cached(sid)
    assert state is not None and books(state).checkpointed > 0  # loaded from the file
    chat = cold.chat(sid)
    paused = await chat.send("Transfer $7 to savings.")
    [interrupt] = paused.interrupts
    await chat.resume(respond=[interrupt.respond({"approved": True})])
    assert ledger.count("7->savings") == 1
    stale = writer.chat(sid)  # the writer's cached state is behind: it reads the store again
    with pytest.raises(AlreadyResolved):
        await stale.resume(respond=[interrupt.respond({"approved": True})])
    assert ledger.count("7->savings") == 1
    for agent in (writer, cold):
        await agent.store.close()


async def test_stray_files_are_removed_once_old(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteSessionStore(path, checkpoint_file_bytes=10)
    await put(store, summary("s1", 1), 1)
    assert await store.write_checkpoint("s1", 1, b"a base in a file") is True
    await store.close()
    [named] = files(path)
    folder = named.parent
    old, young, other = folder / "0-1-00000000.ppck", folder / "0-2-00000000.ppck", folder / "notes.txt"
    for stray in (old, young, other):
        stray.write_bytes(b"left behind")
    hours_ago = time.time() - 2 * 3600
    for kept in (old, named, other):
        os.utime(kept, (hours_ago, hours_ago))
    again = SqliteSessionStore(path, checkpoint_file_bytes=10)
    try:
        assert await again.read_checkpoint("s1") == Checkpoint(1, b"a base in a file")
        assert sorted(p.name for p in folder.iterdir()) == sorted([named.name, young.name, other.name])
    finally:
        await again.close()


async def test_a_base_that_cannot_be_a_file_is_kept_in_the_database(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    (tmp_path / "s.db-checkpoints").write_bytes(b"a file where the folder would be")
    store = SqliteSessionStore(path, checkpoint_file_bytes=10)
    try:
        await put(store, summary("s1", 1), 1)
        assert await store.write_checkpoint("s1", 1, b"a base too large for a row") is True
        assert await store.read_checkpoint("s1") == Checkpoint(1, b"a base too large for a row")
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT file, length(data) FROM pausepoint_checkpoints").fetchall() == [(None, 26)]
    conn.close()


async def test_damage_found_in_a_turn_fails_that_call_once_then_the_log_is_folded(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    ledger: list[str] = []
    _, writer = build(SqliteSessionStore(path, checkpoint_file_bytes=1000), ledger)
    writer.checkpoint_every = 1  # the checkpoint is at the log's head: a load folds nothing after it
    sid = await cycle(writer)
    for _ in range(6):
        await cycle(writer, sid)
    await writer.sessions.settle()
    [file] = files(path)
    file.write_bytes(flipped_items(file.read_bytes()))

    _, cold = build(SqliteSessionStore(path, checkpoint_file_bytes=1000), ledger)
    with pytest.raises(StoreError, match="damaged"):
        await cold.chat(sid).history()  # the load checks the head; reading the history finds the damage
    assert await seen(cold, sid) == await seen(writer, sid)  # read again, from the log
    state = cold.sessions.cached(sid)
    assert state is not None and books(state).checkpointed == 0
    before = len(ledger)
    await cycle(cold, sid)
    assert len(ledger) == before + 1  # and it goes on, exactly once
    for agent in (writer, cold):
        await agent.store.close()


async def test_a_base_write_cancelled_midway_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteSessionStore(path, checkpoint_file_bytes=10)
    try:
        await put(store, summary("s1", 1), 1)
        writing = asyncio.create_task(store.write_checkpoint("s1", 1, b"x" * (256 * 1024 * 1024)))
        await until(lambda: bool(files(path)))  # the file is being written, in a worker thread
        writing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await writing
        await until(lambda: not files(path))  # removed once the thread is done
        assert files(path) == []
        assert await store.read_checkpoint("s1") is None
    finally:
        await store.close()


class HeldBases:
    """A real SQLite store whose checkpoint bases are written only once ``release`` is set;
    once ``armed``, the next append sets it (the base is then written while that call runs)."""

    def __init__(self, store: SqliteSessionStore) -> None:
        self.store = store
        self.release = asyncio.Event()
        self.armed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def append(self, *args: Any, **options: Any) -> int:
        if self.armed:
            self.release.set()
        return await self.store.append(*args, **options)

    async def write_checkpoint(self, session_id: str, version: int, data: bytes) -> bool:
        await self.release.wait()
        return await self.store.write_checkpoint(session_id, version, data)


async def test_a_base_written_while_a_call_runs_is_where_the_next_call_starts(tmp_path: Path) -> None:
    """A new base is written while a call uses the session, so that call's state cannot be
    swapped for the one the base holds: the next call starts from the base and the records
    after it instead (its lists then copied whole into the next base), and sees the same
    session."""
    path = tmp_path / "s.db"
    ledger: list[str] = []
    store = HeldBases(SqliteSessionStore(path, checkpoint_file_bytes=1000))
    _, agent = build(cast(SqliteSessionStore, store), ledger)
    agent.checkpoint_every = 8
    sid = await cycle(agent)  # a checkpoint is due: its base waits
    chat = agent.chat(sid)
    store.armed = True  # the base is written once the next call appends
    paused = await chat.send("Transfer $5 to savings.")
    assert store.release.is_set()
    await agent.sessions.settle()
    [pending] = await chat.interrupts()  # the next call
    state = agent.sessions.cached(sid)
    assert state is not None and isinstance(state.messages, LazyList)  # started from the base
    assert state.messages.packed() is not None
    assert pending.ref == paused.interrupts[0].ref
    _, cold = build(SqliteSessionStore(path, checkpoint_file_bytes=1000), ledger)
    assert await seen(cold, sid) == await seen(agent, sid)
    await chat.resume(respond=[pending.respond({"approved": True})])
    assert ledger == ["5->savings", "5->savings"]
    await store.store.close()
    await cold.store.close()


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE pausepoint_checkpoints SET data = 'hello'",
        "UPDATE pausepoint_checkpoints SET data = ''",
        "UPDATE pausepoint_checkpoints SET file = X'00ff'",
        "UPDATE pausepoint_checkpoints SET version = 'three'",
        "INSERT INTO pausepoint_checkpoint_extensions (session_id, version, data) "
        "SELECT session_id, version + 1, 'hello' FROM pausepoint_checkpoints",
    ],
)
async def test_checkpoint_cells_of_another_type_are_no_checkpoint(tmp_path: Path, edit: str) -> None:
    """Rows edited by hand so that a cell holds another type than the store writes: the log is
    folded, every time (found by a probe: a TypeError on every call, from every process)."""
    path = tmp_path / "s.db"
    _, writer = build(SqliteSessionStore(path))
    writer.checkpoint_every = 1
    sid = await cycle(writer)
    for _ in range(3):
        await cycle(writer, sid)
    await writer.sessions.settle()
    with sqlite3.connect(path) as conn:
        assert conn.execute(edit).rowcount >= 1
    for _ in range(2):
        _, cold = build(SqliteSessionStore(path))
        assert await seen(cold, sid) == await seen(writer, sid)
        state = cold.sessions.cached(sid)
        assert state is not None and books(state).checkpointed == 0  # folded from the log
