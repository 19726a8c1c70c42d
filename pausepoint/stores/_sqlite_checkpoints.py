"""The checkpoints of ``SqliteSessionStore``, as statements on its connection: one per session, a
base and its extensions (see ``stores._base``).

A base is a row of ``pausepoint_checkpoints`` — its bytes in the row, or, when large, in a file
beside the database that the row names (``_checkpoint_files``); its extensions are rows of
``pausepoint_checkpoint_extensions``, oldest first. The checkpoint is at its latest extension's
version, or at its base's when it has none (the base's row is never updated to move the head:
SQLite would rewrite its blob). A checkpoint is never the source of truth: nothing here waits
for stable storage.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from typing import NamedTuple

from ._checkpoint_files import CheckpointFiles
from ._sqlite_rows import transaction

__all__ = [
    "StoredCheckpoint",
    "base_due",
    "drop",
    "extend",
    "files_named",
    "files_of",
    "holds",
    "read",
    "write_base",
    "write_file",
]

log = logging.getLogger("pausepoint")

# The version a session's checkpoint is at: its latest extension's, or its base's (NULL: none).
_CHECKPOINT_HEAD = (
    "SELECT COALESCE((SELECT MAX(version) FROM pausepoint_checkpoint_extensions WHERE session_id = ?1), "
    "(SELECT version FROM pausepoint_checkpoints WHERE session_id = ?1))"
)


class StoredCheckpoint(NamedTuple):
    """A checkpoint as its rows hold it: ``file`` names the file of a base kept beside the
    database (its ``data`` is then empty)."""

    head: int
    data: bytes
    file: str | None
    extensions: tuple[bytes, ...]


def holds(conn: sqlite3.Connection, session_id: str, version: int) -> bool:
    """Whether the session exists with at least ``version`` records."""
    row = conn.execute("SELECT version FROM pausepoint_sessions WHERE id = ?", (session_id,)).fetchone()
    return row is not None and row[0] >= version


def base_due(conn: sqlite3.Connection, session_id: str, version: int) -> bool:
    """Whether a base at ``version`` would be kept: the log holds that version, and the
    checkpoint, if any, is older."""
    head = conn.execute(_CHECKPOINT_HEAD, (session_id,)).fetchone()[0]
    return holds(conn, session_id, version) and (head is None or head < version)


def write_base(
    conn: sqlite3.Connection, session_id: str, version: int, data: bytes, file: str | None
) -> tuple[bool, str | None]:
    """In one transaction, a new base (``data``, or the ``file`` holding it) in place of the
    checkpoint, if due, dropping the old one's extensions: whether it was kept, and the file of
    the base it replaced."""
    with transaction(conn):
        if not base_due(conn, session_id, version):
            return False, None
        row = conn.execute("SELECT file FROM pausepoint_checkpoints WHERE session_id = ?", (session_id,))
        replaced = (row.fetchone() or (None,))[0]
        conn.execute(
            "INSERT INTO pausepoint_checkpoints (session_id, version, data, file) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (session_id) DO UPDATE SET version = excluded.version, data = excluded.data, "
            "file = excluded.file",
            (session_id, version, b"" if file else data, file),
        )
        conn.execute("DELETE FROM pausepoint_checkpoint_extensions WHERE session_id = ?", (session_id,))
    return True, replaced


def extend(conn: sqlite3.Connection, session_id: str, after: int, version: int, data: bytes, replaces: int) -> bool:
    """In one transaction, the extension, in place of the last ``replaces``, only if the
    checkpoint is at ``after``, has that many, and the log holds ``version``; whether it was kept."""
    with transaction(conn):
        head = conn.execute(_CHECKPOINT_HEAD, (session_id,)).fetchone()[0]
        if head != after or not holds(conn, session_id, version):
            return False
        if replaces:
            last = conn.execute(
                "SELECT version FROM pausepoint_checkpoint_extensions WHERE session_id = ? "
                "ORDER BY version DESC LIMIT ?",
                (session_id, replaces),
            ).fetchall()
            if len(last) < replaces:
                return False
            conn.execute(
                "DELETE FROM pausepoint_checkpoint_extensions WHERE session_id = ? AND version >= ?",
                (session_id, last[-1][0]),
            )
        conn.execute(
            "INSERT INTO pausepoint_checkpoint_extensions (session_id, version, data) VALUES (?, ?, ?)",
            (session_id, version, data),
        )
    return True


def read(conn: sqlite3.Connection, session_id: str) -> StoredCheckpoint | None:
    """The session's checkpoint, from one snapshot; None if it has none."""
    # One read transaction, so the base and the extensions come from one snapshot (and the
    # base's blob is not copied through a sort, as one ordered statement would).
    conn.execute("BEGIN")
    try:
        row = conn.execute(
            "SELECT version, data, file FROM pausepoint_checkpoints WHERE session_id = ?", (session_id,)
        ).fetchone()
        extensions = conn.execute(
            "SELECT version, data FROM pausepoint_checkpoint_extensions WHERE session_id = ? ORDER BY version",
            (session_id,),
        ).fetchall()
    finally:
        conn.execute("COMMIT")
    if row is None:
        return None
    version, data, file = row
    # A row of other types than these writes (edited by hand, say) is no checkpoint: the log is folded.
    if (
        type(version) is not int
        or not isinstance(data, bytes | None)
        or not isinstance(file, str | None)
        or any(type(e[0]) is not int or not isinstance(e[1], bytes) for e in extensions)
    ):
        log.warning("the checkpoint of session %s has cells of the wrong type: ignored", session_id)
        return None
    head = extensions[-1][0] if extensions else version
    return StoredCheckpoint(head, bytes(data or b""), file, tuple(e[1] for e in extensions))


def files_named(conn: sqlite3.Connection) -> set[str]:
    """The checkpoint files the database names."""
    return {row[0] for row in conn.execute("SELECT file FROM pausepoint_checkpoints WHERE file IS NOT NULL")}


def files_of(conn: sqlite3.Connection, session_id: str) -> list[str]:
    """The checkpoint files the session's rows name."""
    row = conn.execute("SELECT file FROM pausepoint_checkpoints WHERE session_id = ?", (session_id,))
    return [name for (name,) in row.fetchall() if name is not None]


def drop(conn: sqlite3.Connection, session_id: str) -> None:
    """Delete the session's checkpoint (not its file): part of a deletion's transaction."""
    conn.execute("DELETE FROM pausepoint_checkpoints WHERE session_id = ?", (session_id,))
    conn.execute("DELETE FROM pausepoint_checkpoint_extensions WHERE session_id = ?", (session_id,))


async def write_file(files: CheckpointFiles, session_id: str, version: int, data: bytes) -> str:
    """Write a checkpoint file in a worker thread; its name. Cancelled, the file is removed once
    written."""
    writing = asyncio.get_running_loop().run_in_executor(None, files.write, session_id, version, data)
    try:
        return await asyncio.shield(writing)
    except asyncio.CancelledError:

        def discard(done: asyncio.Future[str]) -> None:
            if not done.cancelled() and done.exception() is None:
                files.remove(done.result())

        writing.add_done_callback(discard)
        raise
