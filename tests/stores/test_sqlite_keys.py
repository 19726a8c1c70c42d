"""SQLite keys a record by its session's number and its version (schema 6): the limits that
sets — records a session holds, sessions a file numbers — are refused whole at their edge."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from pausepoint.errors import StoreError
from pausepoint.stores import LogEntry, SqliteSessionStore
from pausepoint.testing.stores import entries, summary

MOST_RECORDS = 2**31 - 1  # a session's
MOST_SESSIONS = 2**32 - 1  # a file's


def edit(path: Path, sql: str, *args: object) -> None:
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute(sql, args)


async def test_a_session_takes_records_up_to_the_last_version_and_no_further(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteSessionStore(path)
    await store.append("s1", 0, entries(0, 1), summary("s1", 1))
    await store.append("s2", 0, entries(0, 1), summary("s2", 1))  # the session numbered after it
    await store.close()
    edit(path, "UPDATE pausepoint_sessions SET version = ? WHERE id = 's1'", MOST_RECORDS - 1)  # a long life later

    store = SqliteSessionStore(path)
    try:
        near = MOST_RECORDS - 1
        with pytest.raises(StoreError, match="2,147,483,647"):
            await store.append("s1", near, entries(near, 2), summary("s1", near + 2))
        found = await store.read("s1", after_version=near - 1)
        assert found is not None and found.version == near and found.entries == []  # nothing written
        await store.append("s1", near, entries(near, 1), summary("s1", near + 1))
        found = await store.read("s1", after_version=near)
        assert found is not None and [e.version for e in found.entries] == [MOST_RECORDS]
        s2 = await store.read("s2")  # the next session's records are its own
        assert s2 is not None and [e.version for e in s2.entries] == [1]
    finally:
        await store.close()


async def test_a_file_numbers_sessions_up_to_its_last_number_and_no_further(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteSessionStore(path)
    await store.append("first", 0, entries(0, 1), summary("first", 1))
    await store.close()
    edit(path, "UPDATE pausepoint_sessions SET n = ? WHERE id = 'first'", MOST_SESSIONS - 1)
    edit(path, "UPDATE pausepoint_records SET key = ? + 1", (MOST_SESSIONS - 1) << 31)

    store = SqliteSessionStore(path)
    try:
        await store.append("last", 0, entries(0, 2), summary("last", 2))  # numbered MOST_SESSIONS
        await store.append("last", 2, entries(2, 1), summary("last", 3))
        found = await store.read("last")
        assert found is not None and [e.version for e in found.entries] == [1, 2, 3]
        with pytest.raises(StoreError, match="4,294,967,295"):
            await store.append("beyond", 0, entries(0, 1), summary("beyond", 1))
        assert await store.read("beyond") is None  # nothing written
        assert sorted(s.session_id for s in await store.list_sessions()) == ["first", "last"]
        first = await store.read("first")
        assert first is not None and [e.version for e in first.entries] == [1]
        assert await store.delete("last") is True
        first = await store.read("first")
        assert first is not None and [e.version for e in first.entries] == [1]
    finally:
        await store.close()


async def test_a_deleted_session_made_again_reads_only_its_new_records(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    try:
        await store.append("other", 0, entries(0, 1), summary("other", 1))
        await store.append("s", 0, entries(0, 3), summary("s", 3))  # the newest: its number is taken again
        assert await store.delete("s") is True
        await store.append("s", 0, [LogEntry(1, "message", b'{"again":1}')], summary("s", 1))
        found = await store.read("s")
        assert found is not None and [(e.version, e.data) for e in found.entries] == [(1, b'{"again":1}')]
        other = await store.read("other")
        assert other is not None and other.version == 1
    finally:
        await store.close()
