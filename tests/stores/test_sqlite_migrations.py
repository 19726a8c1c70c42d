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

from .sqlite_layouts import SCHEMA_V1, migrate_to


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


def old_file(path: Path, version: int) -> sqlite3.Connection:
    """A connection to the version-1 file at ``path`` taken up to ``version`` as that release did."""
    conn = sqlite3.connect(path, isolation_level=None)
    migrate_to(conn, version)
    return conn


async def test_a_version_2_file_gains_checkpoints(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    session_id, _ = await make_version_1_file(path)
    with contextlib.closing(old_file(path, 2)):
        pass
    assert "pausepoint_checkpoints" not in tables(path)
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
    with contextlib.closing(old_file(path, 3)) as conn:  # with the checkpoint version 3 wrote
        conn.execute("INSERT INTO pausepoint_checkpoints VALUES (?, 1, ?)", (session_id, b"base"))
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
    with contextlib.closing(old_file(path, 4)) as conn:  # with a checkpoint and an extension of it
        conn.execute("INSERT INTO pausepoint_checkpoints VALUES (?, 1, ?)", (session_id, b"base"))
        conn.execute("INSERT INTO pausepoint_checkpoint_extensions VALUES (?, 2, ?)", (session_id, b"more"))
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


async def test_a_version_5_file_keeps_every_log_in_order_and_its_sessions_go_on(tmp_path: Path) -> None:
    """Version 6 gives each session a number and keys its records by it: every session's log
    is copied over whole and in order, however its records were interleaved with others'."""
    path = tmp_path / "v5.db"
    paused_id, ref = await make_version_1_file(path)
    logs: dict[str, list[tuple[int, str, bytes]]] = {}
    with contextlib.closing(old_file(path, 5)) as conn:
        # Three more sessions whose records were written turn about, as concurrent sessions' are,
        # one of them with an owner; then a checkpoint of one and an event.
        for turn in range(1, 5):
            for name in ("b", "a", "c"):
                logs.setdefault(name, []).append((turn, "message", b'{"turn": %d, "of": "%s"}' % (turn, name.encode())))
                conn.execute(
                    "INSERT INTO pausepoint_records VALUES (?, ?, ?, ?)", (name, turn, "message", logs[name][-1][2])
                )
        for name in ("b", "a", "c"):
            conn.execute(
                "INSERT INTO pausepoint_sessions VALUES (?, 'bankingAgent', ?, 4, 1, ?, 0, NULL, 2)",
                (name, "alice" if name == "a" else None, {"a": 3, "b": 2, "c": 1}[name]),
            )
        conn.execute("INSERT INTO pausepoint_checkpoints VALUES ('a', 4, ?, NULL)", (b"base",))
        conn.execute("INSERT INTO pausepoint_events VALUES (1, 'e1', 'pause', 'a', 'bankingAgent', 1, ?)", (b"{}",))
        paused_log = [tuple(row) for row in conn.execute(
            "SELECT version, kind, data FROM pausepoint_records WHERE session_id = ? ORDER BY version", (paused_id,)
        )]  # fmt: skip

    ledger: list[str] = []
    store = SqliteSessionStore(path)
    try:
        for name, log in logs.items():
            found = await store.read(name)
            assert found is not None and found.version == 4
            assert [(e.version, e.kind, e.data) for e in found.entries] == log
            later = await store.read(name, after_version=2)
            assert later is not None and [e.version for e in later.entries] == [3, 4]
        found = await store.read(paused_id)
        assert found is not None and [(e.version, e.kind, e.data) for e in found.entries] == paused_log
        assert [s.session_id for s in await store.list_sessions(has_pending=True)] == [paused_id]
        assert [s.session_id for s in await store.list_sessions(owner="alice")] == ["a"]
        assert await store.read_checkpoint("a") == Checkpoint(4, b"base")
        assert await store.last_event() == 1

        _, agent = build(store, ledger)  # the paused session goes on where it stopped
        chat = agent.chat(paused_id)
        [pending] = await chat.interrupts()
        assert pending.ref == ref
        done = await chat.resume(respond=[pending.respond({"approved": True})])
        assert done.finish_reason == AgentFinishReason.STOP and ledger == ["500->savings"]
        again = await agent.chat().send("Transfer $5 to bob.")  # a new session takes the next number
        assert again.finish_reason == AgentFinishReason.INTERRUPTED

        assert await store.delete("a") is True  # its records go, and no other session's
        assert await store.read("a") is None
        for name in ("b", "c"):
            found = await store.read(name)
            assert found is not None and [(e.version, e.kind, e.data) for e in found.entries] == logs[name]
    finally:
        await store.close()
    assert schema_version(path) == str(SCHEMA_VERSION)
    assert not {name for name in tables(path) if name.endswith("_6")}


async def test_a_version_6_file_gains_tenants(tmp_path: Path) -> None:
    """Version 7 gives each session a tenant: the sessions of a version-6 file have none, and go
    on; a new session of a tenant is listed by it."""
    path = tmp_path / "v6.db"
    paused_id, ref = await make_version_1_file(path)
    with contextlib.closing(old_file(path, 6)):
        pass
    ledger: list[str] = []
    store = SqliteSessionStore(path)
    try:
        [old] = await store.list_sessions(has_pending=True)
        assert (old.session_id, old.tenant) == (paused_id, None)
        _, agent = build(store, ledger)
        chat = agent.chat(paused_id)
        [pending] = await chat.interrupts()
        assert pending.ref == ref
        done = await chat.resume(respond=[pending.respond({"approved": True})])
        assert done.finish_reason == AgentFinishReason.STOP and ledger == ["500->savings"]
        assert (await store.get_summary(paused_id)).tenant is None  # type: ignore[union-attr]
        acme = agent.chat(principal="alice", tenant="acme")
        await acme.send("Transfer $5 to bob.")
        assert [s.session_id for s in await store.list_sessions(tenant="acme")] == [acme.session_id]
        assert [s.session_id for s in await store.list_sessions(has_pending=True)] == [acme.session_id]
    finally:
        await store.close()
    assert schema_version(path) == str(SCHEMA_VERSION)
