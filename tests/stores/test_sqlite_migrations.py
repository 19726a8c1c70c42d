"""A SQLite file made by an earlier pausepoint is upgraded in place, its sessions intact.

The version-1 file here is built with the schema pausepoint 1 shipped (copied verbatim below
from ``stores/sqlite.py`` as it was then) and holds a real session: the records and summary a
paused banking turn writes. Opening it with today's store runs the migrations it lacks.
"""

from __future__ import annotations

import contextlib
import sqlite3
from datetime import datetime
from pathlib import Path

from pausepoint import AgentFinishReason
from pausepoint.demo import build
from pausepoint.stores import Checkpoint, InMemorySessionStore, SqliteSessionStore
from pausepoint.stores.sqlite import SCHEMA_VERSION

# pausepoint schema version 1, as released.
SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS pausepoint_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pausepoint_sessions (
    id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    owner TEXT,
    version INTEGER NOT NULL,
    created_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL,
    pending INTEGER NOT NULL,
    next_expiry_us INTEGER,
    turn INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS pausepoint_sessions_owner ON pausepoint_sessions (owner, updated_us)
    WHERE owner IS NOT NULL;
CREATE INDEX IF NOT EXISTS pausepoint_sessions_pending ON pausepoint_sessions (updated_us)
    WHERE pending > 0;
CREATE INDEX IF NOT EXISTS pausepoint_sessions_expiry ON pausepoint_sessions (next_expiry_us)
    WHERE next_expiry_us IS NOT NULL;
CREATE TABLE IF NOT EXISTS pausepoint_records (
    session_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    kind TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (session_id, version)
);
"""


def us(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


async def make_version_1_file(path: Path) -> tuple[str, str]:
    """A version-1 file holding one paused banking session; its id and the paused call's ref."""
    source = InMemorySessionStore()
    _, agent = build(source)
    chat = agent.chat()
    paused = await chat.send("Transfer $500 to savings.")
    assert paused.finish_reason == AgentFinishReason.INTERRUPTED
    log = await source.read(chat.session_id)
    summary = await source.get_summary(chat.session_id)
    assert log is not None and summary is not None
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.executescript(SCHEMA_V1)
        conn.execute("INSERT INTO pausepoint_meta VALUES ('schema_version', '1')")
        conn.execute(
            "INSERT INTO pausepoint_sessions (id, agent, owner, version, created_us, updated_us, pending, "
            "next_expiry_us, turn) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (summary.session_id, summary.agent, summary.owner, summary.version, us(summary.created_at),
             us(summary.updated_at), summary.pending, None, summary.turn),
        )  # fmt: skip
        conn.executemany(
            "INSERT INTO pausepoint_records (session_id, version, kind, data) VALUES (?, ?, ?, ?)",
            [(chat.session_id, e.version, e.kind, e.data) for e in log.entries],
        )
    return chat.session_id, paused.interrupts[0].ref


def tables(path: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def schema_version(path: Path) -> str:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return str(conn.execute("SELECT value FROM pausepoint_meta WHERE key = 'schema_version'").fetchone()[0])


async def test_a_version_1_file_is_upgraded_and_its_sessions_go_on(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    session_id, ref = await make_version_1_file(path)
    assert tables(path) == {"pausepoint_meta", "pausepoint_sessions", "pausepoint_records"}

    ledger: list[str] = []
    store = SqliteSessionStore(path)
    try:
        _, agent = build(store, ledger)
        agent.checkpoint_every = 1
        chat = agent.chat(session_id)
        [pending] = await chat.interrupts()  # read from the upgraded file
        assert pending.ref == ref
        assert [s.session_id for s in await store.list_sessions(has_pending=True)] == [session_id]
        done = await chat.resume(respond=[pending.respond({"approved": True})])
        assert done.finish_reason == AgentFinishReason.STOP
        assert ledger == ["500->savings"]
        await agent.sessions.settle()
        assert await store.read_checkpoint(session_id) is not None  # the new tables work
        assert await store.last_event() > 0
    finally:
        await store.close()
    assert schema_version(path) == str(SCHEMA_VERSION)
    assert {
        "pausepoint_events",
        "pausepoint_deliveries",
        "pausepoint_checkpoints",
        "pausepoint_checkpoint_extensions",
    } <= tables(path)

    again = SqliteSessionStore(path)  # an upgraded file opens as any current one
    try:
        _, later = build(again)
        history = await later.chat(session_id).history()
        assert history[-1].text == "Transferred $500 to savings."
    finally:
        await again.close()


async def test_a_version_2_file_gains_checkpoints(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    session_id, _ = await make_version_1_file(path)
    store = SqliteSessionStore(path)
    await store.get_summary(session_id)  # upgrades to the current version
    await store.close()
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:  # back to what version 2 had
        conn.execute("DROP TABLE pausepoint_checkpoints")
        conn.execute("DROP TABLE pausepoint_checkpoint_extensions")
        conn.execute("UPDATE pausepoint_meta SET value = '2' WHERE key = 'schema_version'")
    store = SqliteSessionStore(path)
    try:
        assert await store.write_checkpoint(session_id, 1, b"state") is True
        assert (await store.read(session_id)) is not None
    finally:
        await store.close()
    assert schema_version(path) == str(SCHEMA_VERSION)


async def test_a_version_3_file_gains_checkpoint_extensions(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    session_id, _ = await make_version_1_file(path)
    store = SqliteSessionStore(path)
    assert await store.write_checkpoint(session_id, 1, b"base") is True  # upgrades to the current version
    await store.close()
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:  # back to what version 3 had
        conn.execute("DROP TABLE pausepoint_checkpoint_extensions")
        conn.execute("ALTER TABLE pausepoint_checkpoints DROP COLUMN file")
        conn.execute("UPDATE pausepoint_meta SET value = '3' WHERE key = 'schema_version'")
    assert "pausepoint_checkpoint_extensions" not in tables(path)
    store = SqliteSessionStore(path)
    try:
        log = await store.read(session_id)
        assert log is not None and log.version > 2  # a paused banking turn: several records
        assert await store.read_checkpoint(session_id) == Checkpoint(1, b"base")  # the version-3 checkpoint stays
        assert await store.extend_checkpoint(session_id, 1, 2, b"more") is True
        assert await store.read_checkpoint(session_id) == Checkpoint(2, b"base", (b"more",))
        assert await store.write_checkpoint(session_id, log.version, b"new base") is True
        assert await store.read_checkpoint(session_id) == Checkpoint(log.version, b"new base")
    finally:
        await store.close()
    assert schema_version(path) == str(SCHEMA_VERSION)
    assert "pausepoint_checkpoint_extensions" in tables(path)


async def test_a_version_4_file_keeps_its_checkpoints_and_gains_checkpoint_files(tmp_path: Path) -> None:
    path = tmp_path / "v4.db"
    session_id, _ = await make_version_1_file(path)
    store = SqliteSessionStore(path)
    assert await store.write_checkpoint(session_id, 1, b"base") is True  # upgrades to the current version
    assert await store.extend_checkpoint(session_id, 1, 2, b"more") is True
    await store.close()
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:  # back to what version 4 had
        conn.execute("ALTER TABLE pausepoint_checkpoints DROP COLUMN file")
        conn.execute("UPDATE pausepoint_meta SET value = '4' WHERE key = 'schema_version'")
    store = SqliteSessionStore(path, checkpoint_file_bytes=16)
    try:
        assert await store.read_checkpoint(session_id) == Checkpoint(2, b"base", (b"more",))  # kept as it was
        log = await store.read(session_id)
        assert log is not None
        large = b"a base of more than sixteen bytes"
        assert await store.write_checkpoint(session_id, log.version, large) is True
        assert await store.read_checkpoint(session_id) == Checkpoint(log.version, large)
    finally:
        await store.close()
    assert schema_version(path) == str(SCHEMA_VERSION)
    assert [p.read_bytes() for p in (tmp_path / "v4.db-checkpoints").iterdir()] == [large]
