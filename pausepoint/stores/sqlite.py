"""``SqliteSessionStore``: the embedded durable default — one file, WAL, safe across processes.

Calls run inline on the event loop: each is a few indexed statements on a local file, cheaper
than a hop to a worker thread. The connection never waits on SQLite's busy handler (which
would block the loop); a write that finds the file locked by another process backs off with
``asyncio.sleep`` and tries again until ``busy_timeout`` seconds have passed.

Durability (``synchronous``): transactions commit with SQLite's ``synchronous=NORMAL`` in WAL
mode — written to the WAL, safe from a crash of any process, not yet on stable storage. With
``"FULL"`` (the default) every write that must survive a power loss — a durable append (see
``stores._base``), a deletion, a change to the outbox — then waits for an ``fsync`` of the WAL
file, which is what SQLite's own ``FULL`` does at each commit: the WAL is written in order, so
one ``fsync`` makes every commit before it durable. The ``fsync`` is shared by every writer
waiting for it (a group commit); it runs on the event loop while the disk syncs in under a
millisecond, and in a worker thread, so that the loop serves other requests meanwhile, when it
is slower (``stores._groupsync``). An append made with ``durable=False`` skips the wait: the
runtime's next durable append of that session covers it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import sqlite3
import sys
import time
from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timedelta
from typing import Literal, TypeVar

from ..errors import SchemaVersionError, StoreError, VersionConflict
from ._base import (
    DEFAULT_MAX_RECORD_BYTES,
    Checkpoint,
    Delivery,
    DeliveryState,
    Event,
    LogEntry,
    LogSlice,
    SessionSummary,
    check_entries,
    check_replaces,
    version_conflict,
)
from ._checkpoint_files import CheckpointFiles
from ._groupsync import GroupSync
from ._signal import Signal
from ._sqlite_rows import DeliveryRow, EventRow, SummaryRow, transaction, us

__all__ = ["DEFAULT_CHECKPOINT_FILE_BYTES", "SqliteSessionStore"]

log = logging.getLogger("pausepoint")

# Checkpoint bases of at least this many bytes are kept in files beside the database.
DEFAULT_CHECKPOINT_FILE_BYTES = 256 * 1024

# The schema as a list of migrations: the script at index i takes a file from version i to
# version i + 1, so a new file runs them all and an older one runs the ones it lacks. Never edit
# a script once released: append a new one.
_MIGRATIONS = [
    # 1: sessions and their logs.
    """
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
-- Partial indexes only: every append rewrites updated_us, and each index that holds it is
-- another page written per commit. Sessions without an owner, pauses or expiry cost none.
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
""",
    # 2: the event stream and the delivery outbox. A position is the rowid: the greatest plus
    # one. Pruning always keeps the latest event, so a position is never handed out twice
    # (AUTOINCREMENT would, at one more write per event).
    """
CREATE TABLE IF NOT EXISTS pausepoint_events (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    kind TEXT NOT NULL,
    session_id TEXT NOT NULL,
    agent TEXT NOT NULL,
    at_us INTEGER NOT NULL,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS pausepoint_deliveries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    event_seq INTEGER NOT NULL,
    target TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    due_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL,
    last_error TEXT,
    lease TEXT
);
CREATE INDEX IF NOT EXISTS pausepoint_deliveries_due ON pausepoint_deliveries (target, due_us)
    WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS pausepoint_deliveries_state ON pausepoint_deliveries (state, id);
""",
    # 3: one checkpoint per session (see stores._base).
    """
CREATE TABLE IF NOT EXISTS pausepoint_checkpoints (
    session_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    data BLOB NOT NULL
);
""",
    # 4: checkpoint extensions, oldest first (see stores._base). pausepoint_checkpoints.version is
    # the base's; the checkpoint is at its latest extension's version, or at the base's when it
    # has none. (The base's row is never updated to move the head: SQLite would rewrite its blob.)
    """
CREATE TABLE IF NOT EXISTS pausepoint_checkpoint_extensions (
    session_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (session_id, version)
);
""",
    # 5: a large base kept in a file beside the database (``_checkpoint_files``): its row names
    # the file, and its data is empty.
    """
ALTER TABLE pausepoint_checkpoints ADD COLUMN file TEXT;
""",
    # 6: a session's records side by side, under one integer key and no index beside them (see
    # _VERSION_BITS): a session gets a number (n), and the log is copied over in that order. An
    # append writes the pages at its session's end of the table and no index of random keys
    # (the records' index of (session_id, version) was 7 of the 27 pages a banking cycle wrote),
    # and a session's log is read as one run of the table.
    """
CREATE TABLE pausepoint_sessions_6 (
    n INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    agent TEXT NOT NULL,
    owner TEXT,
    version INTEGER NOT NULL,
    created_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL,
    pending INTEGER NOT NULL,
    next_expiry_us INTEGER,
    turn INTEGER NOT NULL
);
INSERT INTO pausepoint_sessions_6 (id, agent, owner, version, created_us, updated_us, pending, next_expiry_us, turn)
    SELECT id, agent, owner, version, created_us, updated_us, pending, next_expiry_us, turn
    FROM pausepoint_sessions ORDER BY rowid;
CREATE TABLE pausepoint_records_6 (
    key INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    data BLOB NOT NULL
);
INSERT INTO pausepoint_records_6 (key, kind, data)
    SELECT (s.n << 31) + r.version, r.kind, r.data
    FROM pausepoint_records AS r JOIN pausepoint_sessions_6 AS s ON s.id = r.session_id
    ORDER BY s.n, r.version;
DROP TABLE pausepoint_records;
DROP TABLE pausepoint_sessions;
ALTER TABLE pausepoint_sessions_6 RENAME TO pausepoint_sessions;
ALTER TABLE pausepoint_records_6 RENAME TO pausepoint_records;
CREATE INDEX pausepoint_sessions_owner ON pausepoint_sessions (owner, updated_us) WHERE owner IS NOT NULL;
CREATE INDEX pausepoint_sessions_pending ON pausepoint_sessions (updated_us) WHERE pending > 0;
CREATE INDEX pausepoint_sessions_expiry ON pausepoint_sessions (next_expiry_us) WHERE next_expiry_us IS NOT NULL;
""",
]
SCHEMA_VERSION = len(_MIGRATIONS)

# A record's key (schema 6): its session's number in the high bits, its version in the low
# _VERSION_BITS, so that a session's records are one run of the table, in order.
_VERSION_BITS = 31
_MAX_VERSION = (1 << _VERSION_BITS) - 1  # the records a session may hold
_MAX_SESSION_NUMBER = (1 << (63 - _VERSION_BITS)) - 1  # sessions a file may number
# How often a reader of the event stream checks whether another process wrote to the file.
_POLL_SECONDS = 0.05

# The version a session's checkpoint is at: its latest extension's, or its base's (NULL: none).
_CHECKPOINT_HEAD = (
    "SELECT COALESCE((SELECT MAX(version) FROM pausepoint_checkpoint_extensions WHERE session_id = ?1), "
    "(SELECT version FROM pausepoint_checkpoints WHERE session_id = ?1))"
)

_DELIVERY_COLUMNS = (
    "d.id, d.target, d.state, d.attempts, d.due_us, d.updated_us, d.last_error, d.lease, "
    "e.seq, e.id, e.kind, e.session_id, e.agent, e.at_us, e.data"
)
_DELIVERIES = (
    f"SELECT {_DELIVERY_COLUMNS} FROM pausepoint_deliveries AS d JOIN pausepoint_events AS e ON e.seq = d.event_seq"
)

_SUMMARY_COLUMNS = "id, agent, owner, version, created_us, updated_us, pending, next_expiry_us, turn"

T = TypeVar("T")


async def _written(files: CheckpointFiles, session_id: str, version: int, data: bytes) -> str:
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


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


class SqliteSessionStore:
    """Sessions in one SQLite file in WAL mode; several processes may share the file.

    ``synchronous`` is the durability promised when a call returns:

    - ``"FULL"`` (the default): what the runtime reports done — a pause, an answer, a tool
      call about to run, a turn's end — survives a crash of any process *and* a power loss or
      operating-system crash. Costs one ``fsync`` per durable append (about 0.1 to 1 ms on an
      SSD), shared by concurrent writers; run on the event loop while it takes under 1 ms,
      in a worker thread when the disk is slower.
    - ``"NORMAL"``: survives a crash of any process; a power loss or OS crash may lose the last
      commits (SQLite keeps the file consistent). That can include an answer whose tool already
      ran: after the restart the pause is open again, and answering it again runs the tool a
      second time — exactly once then no longer holds. Choose it only where a machine crash
      is not a concern (tests, caches) or the tools are idempotent.

    ``checkpoint_file_bytes``: a session's checkpoint base of at least this many bytes (a
    session of a few dozen approval cycles or more) is kept in a file of its own in the folder
    ``<path>-checkpoints``, and read through a memory map, so a cold load reads the pages it
    uses instead of the whole blob (``stores._checkpoint_files``). None keeps every base in the
    database. The files are a cache, as checkpoints are: safe to delete, or to leave out of a
    backup.

    A file numbers at most 4,294,967,295 sessions over its life, and a session holds at most
    2,147,483,647 records (a record's key is both: ``_VERSION_BITS``); an append past either
    raises ``StoreError`` and writes nothing.

    Raises ``SchemaVersionError`` on first use if the file holds a newer schema, and upgrades an
    older one (version 6 copies the log once: see the README's "Schema upgrades").
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        synchronous: Literal["NORMAL", "FULL"] = "FULL",
        busy_timeout: float = 30.0,
        checkpoint_file_bytes: int | None = DEFAULT_CHECKPOINT_FILE_BYTES,
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be 'FULL' or 'NORMAL', not {synchronous!r}")
        if checkpoint_file_bytes is not None and (
            not isinstance(checkpoint_file_bytes, int) or isinstance(checkpoint_file_bytes, bool)
        ):
            raise TypeError(f"checkpoint_file_bytes must be an int or None, not {checkpoint_file_bytes!r}")
        if checkpoint_file_bytes is not None and checkpoint_file_bytes < 1:
            raise ValueError(f"checkpoint_file_bytes must be at least 1, not {checkpoint_file_bytes}")
        self.path = os.fspath(path)
        self.checkpoint_file_bytes = checkpoint_file_bytes
        # No files beside an in-memory database: it has no folder, and no other process.
        in_memory = self.path in ("", ":memory:")
        self._files = None if in_memory else CheckpointFiles(os.path.abspath(self.path) + "-checkpoints")
        self.max_record_bytes = max_record_bytes
        self.synchronous = synchronous
        self._busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        self._signal = Signal()
        # Set on connecting: the group fsync of the WAL, when writes must reach stable storage.
        self._group: GroupSync | None = None
        self._synced_directory = False

    # -- connection ---------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=0)
        conn.execute("PRAGMA busy_timeout = 0")
        mode = str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
        if mode == "wal":
            # Commits write the WAL; durable writes then wait for our own fsync of it (_durable).
            conn.execute("PRAGMA synchronous = NORMAL")
            if self.synchronous == "FULL" and self._group is None:
                self._group = GroupSync(self._sync_wal)
        else:  # no WAL here (an in-memory database, a file system without shared memory)
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        return conn

    def _sync_wal(self) -> None:
        """Flush the WAL (every commit so far) to stable storage; runs in the group's thread."""
        try:
            fd = os.open(self.path + "-wal", os.O_RDWR)
        except FileNotFoundError:  # checkpointed into the database file and removed
            fd = os.open(self.path, os.O_RDWR)
        try:
            _fsync(fd)
        finally:
            os.close(fd)
        if not self._synced_directory and os.name == "posix":  # the WAL file's entry in its folder, once
            folder = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
            self._synced_directory = True

    async def _durable(self) -> None:
        """Wait until what this store committed so far is on stable storage (``FULL`` only)."""
        if self._group is not None:
            try:
                await self._group.wait()
            except OSError as exc:
                raise StoreError(f"could not flush {self.path} to stable storage: {exc}") from exc

    def _sweep_files(self, conn: sqlite3.Connection) -> None:
        """Remove the checkpoint files left behind by processes that stopped before naming them."""
        if self._files is None or not os.path.isdir(self._files.directory):
            return
        named = {row[0] for row in conn.execute("SELECT file FROM pausepoint_checkpoints WHERE file IS NOT NULL")}
        self._files.sweep(named)

    def _create_schema(self, conn: sqlite3.Connection) -> None:
        with transaction(conn):
            conn.execute("CREATE TABLE IF NOT EXISTS pausepoint_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = conn.execute("SELECT value FROM pausepoint_meta WHERE key = 'schema_version'").fetchone()
            found = 0 if row is None else int(row[0]) if str(row[0]).isdigit() else -1
            if row is not None and not 1 <= found <= SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"{self.path} holds pausepoint schema version {row[0]}; this version of pausepoint "
                    f"uses version {SCHEMA_VERSION} (and upgrades files from earlier ones)",
                    found=row[0],
                    expected=SCHEMA_VERSION,
                )
            upgrading = 0 < found < SCHEMA_VERSION
            if upgrading:
                log.info("upgrading %s from pausepoint schema version %d to %d", self.path, found, SCHEMA_VERSION)
            for script in _MIGRATIONS[found:]:
                for statement in script.split(";"):
                    if statement.strip():
                        conn.execute(statement)
            if found != SCHEMA_VERSION:
                conn.execute(
                    "INSERT INTO pausepoint_meta VALUES ('schema_version', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(SCHEMA_VERSION),),
                )
        if upgrading:
            # An upgrade may have copied the whole log (version 6): fold what it wrote to the WAL
            # into the file and empty the WAL, rather than leave a WAL the size of the log.
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    async def _run(self, op: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``op`` on the connection, backing off asynchronously while another process writes."""
        deadline = time.monotonic() + self._busy_timeout
        delay = 0.0005
        while True:
            try:
                if self._conn is None:
                    conn = self._connect()
                    try:
                        self._create_schema(conn)
                    except BaseException:
                        conn.close()
                        raise
                    self._conn = conn
                    self._sweep_files(conn)
                return op(self._conn)
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise StoreError(f"SQLite error on {self.path}: {exc}") from exc
                if time.monotonic() > deadline:
                    raise StoreError(f"{self.path} stayed locked for {self._busy_timeout}s") from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.05)

    # -- the contract -------------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        expected_version: int,
        entries: Sequence[LogEntry],
        summary: SessionSummary,
        events: Sequence[Event] = (),
        *,
        durable: bool = True,
    ) -> int:
        check_entries(expected_version, entries, self.max_record_bytes, events)
        new_version = expected_version + len(entries)
        if new_version > _MAX_VERSION:
            raise StoreError(
                f"session {session_id!r} would hold {new_version} records; a SQLite store keeps at most "
                f"{_MAX_VERSION:,} a session"
            )
        params = (
            summary.agent,
            summary.owner,
            new_version,
            us(summary.created_at),
            us(summary.updated_at),
            summary.pending,
            None if summary.next_expiry is None else us(summary.next_expiry),
            summary.turn,
        )

        def op(conn: sqlite3.Connection) -> int:
            with transaction(conn):
                # The conditional append: the version is checked and bumped under the write lock.
                if expected_version == 0:
                    try:
                        n = conn.execute(
                            f"INSERT INTO pausepoint_sessions ({_SUMMARY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            (session_id, *params),
                        ).lastrowid
                    except sqlite3.IntegrityError:
                        raise self._conflict(conn, session_id, expected_version) from None
                    if n is None or n > _MAX_SESSION_NUMBER:
                        raise StoreError(
                            f"{self.path} has numbered {_MAX_SESSION_NUMBER:,} sessions, the most a SQLite file "
                            "numbers: start another file"
                        )
                else:
                    row = conn.execute(
                        "SELECT n, version FROM pausepoint_sessions WHERE id = ?", (session_id,)
                    ).fetchone()
                    if row is None or row[1] != expected_version:
                        raise version_conflict(session_id, expected_version, row[1] if row else 0)
                    n = row[0]
                    conn.execute(
                        "UPDATE pausepoint_sessions SET agent = ?, owner = ?, version = ?, created_us = ?, "
                        "updated_us = ?, pending = ?, next_expiry_us = ?, turn = ? WHERE n = ?",
                        (*params, n),
                    )
                first = n << _VERSION_BITS
                conn.executemany(
                    "INSERT INTO pausepoint_records (key, kind, data) VALUES (?, ?, ?)",
                    [(first + e.version, e.kind, e.data) for e in entries],
                )
                for event in events:
                    seq = conn.execute(
                        "INSERT INTO pausepoint_events (id, kind, session_id, agent, at_us, data) "
                        "VALUES (?, ?, ?, ?, ?, ?)",
                        (event.id, event.kind, event.session_id, event.agent, us(event.at), event.data),
                    ).lastrowid
                    if event.targets:
                        due = us(summary.updated_at)
                        conn.executemany(
                            "INSERT INTO pausepoint_deliveries (event_seq, target, state, attempts, due_us, "
                            "updated_us) VALUES (?, ?, 'pending', 0, ?, ?)",
                            [(seq, target, due, due) for target in event.targets],
                        )
            return new_version

        version = await self._run(op)
        if events:
            self._signal.fire()
        if durable:
            await self._durable()
        return version

    async def read(self, session_id: str, after_version: int = 0) -> LogSlice | None:
        def op(conn: sqlite3.Connection) -> LogSlice | None:
            # One statement, so the session's version and its records come from one snapshot.
            rows = conn.execute(
                "SELECT s.version, r.key, r.kind, r.data FROM pausepoint_sessions AS s "
                "LEFT JOIN pausepoint_records AS r ON r.key > (s.n << ?1) + ?2 AND r.key <= (s.n << ?1) + ?3 "
                "WHERE s.id = ?4 ORDER BY r.key",
                (_VERSION_BITS, max(after_version, 0), _MAX_VERSION, session_id),
            ).fetchall()
            if not rows:
                return None
            entries = [LogEntry(key & _MAX_VERSION, k, bytes(d)) for _, key, k, d in rows if key is not None]
            return LogSlice(rows[0][0], entries)

        return await self._run(op)

    @staticmethod
    def _conflict(conn: sqlite3.Connection, session_id: str, expected_version: int) -> VersionConflict:
        row = conn.execute("SELECT version FROM pausepoint_sessions WHERE id = ?", (session_id,)).fetchone()
        return version_conflict(session_id, expected_version, row[0] if row else 0)

    async def write_checkpoint(self, session_id: str, version: int, data: bytes) -> bool:
        # One transaction: a new base, kept only for a version the log holds and only over an
        # older checkpoint, drops the extensions of the old one. Not waited for: a checkpoint is
        # never the source of truth. A large base is first written to a file and flushed to
        # stable storage, in a worker thread; its row then names the file, and the file of the
        # base it replaces is removed.
        def due(conn: sqlite3.Connection) -> bool:
            head = conn.execute(_CHECKPOINT_HEAD, (session_id,)).fetchone()[0]
            return self._holds(conn, session_id, version) and (head is None or head < version)

        name: str | None = None
        files = self._files
        if files is not None and self.checkpoint_file_bytes is not None and len(data) >= self.checkpoint_file_bytes:
            if not await self._run(due):  # not worth writing the file
                return False
            try:
                name = await _written(files, session_id, version, data)
            except OSError as exc:  # no room, or no right to write there: keep it in the database
                log.warning("could not write a checkpoint file in %s (%s); kept in the database", files.directory, exc)

        def op(conn: sqlite3.Connection) -> tuple[bool, str | None]:  # kept, and the file it replaced
            with transaction(conn):
                if not due(conn):
                    return False, None
                row = conn.execute("SELECT file FROM pausepoint_checkpoints WHERE session_id = ?", (session_id,))
                replaced = (row.fetchone() or (None,))[0]
                conn.execute(
                    "INSERT INTO pausepoint_checkpoints (session_id, version, data, file) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (session_id) DO UPDATE SET version = excluded.version, data = excluded.data, "
                    "file = excluded.file",
                    (session_id, version, b"" if name else data, name),
                )
                conn.execute("DELETE FROM pausepoint_checkpoint_extensions WHERE session_id = ?", (session_id,))
            return True, replaced

        try:
            kept, replaced = await self._run(op)
        except BaseException:
            if name is not None and files is not None:
                files.remove(name)
            raise
        if files is not None:
            for unused in (replaced, None if kept else name):
                if unused is not None:
                    files.remove(unused)
        return kept

    async def extend_checkpoint(
        self, session_id: str, after: int, version: int, data: bytes, *, replaces: int = 0
    ) -> bool:
        # One transaction: the extension is added, in place of the last ``replaces``, only if the
        # checkpoint is at ``after``, has that many, and the log holds ``version``. Not waited
        # for either.
        check_replaces(replaces)
        if not after < version:
            return False

        def op(conn: sqlite3.Connection) -> bool:
            with transaction(conn):
                head = conn.execute(_CHECKPOINT_HEAD, (session_id,)).fetchone()[0]
                if head != after or not self._holds(conn, session_id, version):
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

        return await self._run(op)

    @staticmethod
    def _holds(conn: sqlite3.Connection, session_id: str, version: int) -> bool:
        """Whether the session exists with at least ``version`` records."""
        row = conn.execute("SELECT version FROM pausepoint_sessions WHERE id = ?", (session_id,)).fetchone()
        return row is not None and row[0] >= version

    async def read_checkpoint(self, session_id: str) -> Checkpoint | None:
        def op(conn: sqlite3.Connection) -> tuple[int, bytes, str | None, tuple[bytes, ...]] | None:
            # One read transaction, so the base and the extensions come from one snapshot (and
            # the base's blob is not copied through a sort, as one ordered statement would).
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
            head = extensions[-1][0] if extensions else row[0]
            return int(head), bytes(row[1]), row[2], tuple(bytes(e[1]) for e in extensions)

        for _ in range(3):  # a file replaced by another process since the read: read again
            found = await self._run(op)
            if found is None:
                return None
            head, data, name, extensions = found
            if name is None or self._files is None:
                return Checkpoint(head, data, extensions)
            mapped = self._files.open(name)
            if mapped is not None:
                return Checkpoint(head, mapped, extensions)
        # Gone for good (deleted by hand, left out of a backup): of no use, the log is folded.
        return Checkpoint(head, b"", extensions)

    async def get_summary(self, session_id: str) -> SessionSummary | None:
        def op(conn: sqlite3.Connection) -> SessionSummary | None:
            row = conn.execute(
                f"SELECT {_SUMMARY_COLUMNS} FROM pausepoint_sessions WHERE id = ?", (session_id,)
            ).fetchone()
            return None if row is None else SummaryRow(*row).summary()

        return await self._run(op)

    async def list_sessions(
        self,
        *,
        owner: str | None = None,
        agent: str | None = None,
        has_pending: bool | None = None,
        expiring_before: datetime | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[SessionSummary]:
        where: list[str] = []
        args: list[object] = []
        if owner is not None:
            where.append("owner = ?")
            args.append(owner)
        if agent is not None:
            where.append("agent = ?")
            args.append(agent)
        if has_pending is not None:
            where.append("pending > 0" if has_pending else "pending = 0")
        if expiring_before is not None:
            where.append("next_expiry_us < ?")
            args.append(us(expiring_before))
        sql = f"SELECT {_SUMMARY_COLUMNS} FROM pausepoint_sessions"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY updated_us DESC, id DESC LIMIT ? OFFSET ?"
        args += [limit, offset]

        def op(conn: sqlite3.Connection) -> list[SessionSummary]:
            return [SummaryRow(*r).summary() for r in conn.execute(sql, args).fetchall()]

        return await self._run(op)

    async def delete(self, session_id: str) -> bool:
        named: list[str] = []

        def op(conn: sqlite3.Connection) -> bool:
            with transaction(conn):
                row = conn.execute("SELECT file FROM pausepoint_checkpoints WHERE session_id = ?", (session_id,))
                named[:] = [name for (name,) in row.fetchall() if name is not None]
                numbered = conn.execute("SELECT n FROM pausepoint_sessions WHERE id = ?", (session_id,)).fetchone()
                if numbered is not None:
                    conn.execute(
                        "DELETE FROM pausepoint_records WHERE key BETWEEN ?1 AND ?1 + ?2",
                        (numbered[0] << _VERSION_BITS, _MAX_VERSION),
                    )
                conn.execute("DELETE FROM pausepoint_checkpoints WHERE session_id = ?", (session_id,))
                conn.execute("DELETE FROM pausepoint_checkpoint_extensions WHERE session_id = ?", (session_id,))
                gone = conn.execute("DELETE FROM pausepoint_sessions WHERE id = ?", (session_id,)).rowcount
            return gone > 0

        deleted = await self._run(op)
        if self._files is not None:
            for name in named:
                self._files.remove(name)
        if deleted:
            await self._durable()
        return deleted

    async def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._group is not None:
            self._group.close()

    # -- the event stream and the outbox --------------------------------------------------------

    async def read_events(self, after: int = 0, limit: int = 100) -> list[Event]:
        def op(conn: sqlite3.Connection) -> list[Event]:
            rows = conn.execute(
                "SELECT seq, id, kind, session_id, agent, at_us, data FROM pausepoint_events WHERE seq > ? "
                "ORDER BY seq LIMIT ?",
                (after, limit),
            ).fetchall()
            return [EventRow(*r).event() for r in rows]

        return await self._run(op)

    async def last_event(self) -> int:
        def op(conn: sqlite3.Connection) -> int:
            row = conn.execute("SELECT max(seq) FROM pausepoint_events").fetchone()
            return 0 if row is None or row[0] is None else int(row[0])

        return await self._run(op)

    async def wait_for_events(self, after: int, max_wait: float) -> None:
        # Another process's commit shows as a change of data_version: cheap to poll, no I/O.
        deadline = time.monotonic() + max_wait
        generation = self._signal.generation
        seen = await self._run(_data_version)
        if await self.last_event() > after:
            return
        while (remaining := deadline - time.monotonic()) > 0:
            await self._signal.wait(generation, min(remaining, _POLL_SECONDS))
            if self._signal.generation != generation or await self._run(_data_version) != seen:
                return

    async def claim_deliveries(
        self, targets: Collection[str], now: datetime, lease: timedelta, limit: int = 50
    ) -> list[Delivery]:
        names = list(targets)
        if not names or limit <= 0:
            return []
        token = secrets.token_hex(8)
        marks = ", ".join("?" * len(names))

        def op(conn: sqlite3.Connection) -> list[Delivery]:
            with transaction(conn):
                conn.execute(
                    "UPDATE pausepoint_deliveries SET due_us = ?, lease = ? WHERE id IN (SELECT id FROM "
                    f"pausepoint_deliveries WHERE state = 'pending' AND target IN ({marks}) AND due_us <= ? "
                    "ORDER BY due_us, id LIMIT ?)",
                    (us(now + lease), token, *names, us(now), limit),
                )
                rows = conn.execute(_DELIVERIES + " WHERE d.lease = ? ORDER BY d.id", (token,)).fetchall()
            return [DeliveryRow.delivery(r) for r in rows]

        claimed = await self._run(op)
        if claimed:
            await self._durable()
        return claimed

    async def settle_delivery(
        self, delivery: Delivery, now: datetime, *, error: str | None = None, retry_at: datetime | None = None
    ) -> bool:
        state = "delivered" if error is None else ("pending" if retry_at is not None else "failed")
        due = None if state != "pending" or retry_at is None else us(retry_at)

        def op(conn: sqlite3.Connection) -> bool:
            return (
                conn.execute(
                    "UPDATE pausepoint_deliveries SET state = ?, attempts = attempts + 1, "
                    "due_us = coalesce(?, due_us), updated_us = ?, last_error = ?, lease = NULL "
                    "WHERE id = ? AND lease = ? AND state = 'pending'",
                    (state, due, us(now), error, delivery.id, delivery.lease),
                ).rowcount
                == 1
            )

        settled = await self._run(op)
        if settled:
            await self._durable()
        return settled

    async def list_deliveries(
        self, *, state: DeliveryState | None = None, target: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[Delivery]:
        where: list[str] = []
        args: list[object] = []
        if state is not None:
            where.append("d.state = ?")
            args.append(state)
        if target is not None:
            where.append("d.target = ?")
            args.append(target)
        sql = _DELIVERIES + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY d.id DESC LIMIT ? OFFSET ?"

        def op(conn: sqlite3.Connection) -> list[Delivery]:
            return [DeliveryRow.delivery(r) for r in conn.execute(sql, (*args, limit, offset)).fetchall()]

        return await self._run(op)

    async def requeue_delivery(self, delivery_id: int, now: datetime) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            return (
                conn.execute(
                    "UPDATE pausepoint_deliveries SET state = 'pending', attempts = 0, due_us = ?, updated_us = ?, "
                    "lease = NULL WHERE id = ? AND state = 'failed'",
                    (us(now), us(now), delivery_id),
                ).rowcount
                == 1
            )

        requeued = await self._run(op)
        if requeued:
            await self._durable()
        return requeued

    async def prune_events(self, before: datetime) -> int:
        def op(conn: sqlite3.Connection) -> int:
            with transaction(conn):
                conn.execute(
                    "DELETE FROM pausepoint_deliveries WHERE state = 'delivered' AND event_seq IN "
                    "(SELECT seq FROM pausepoint_events WHERE at_us < ?)",
                    (us(before),),
                )
                gone = conn.execute(
                    "DELETE FROM pausepoint_events WHERE at_us < ? AND NOT EXISTS "
                    "(SELECT 1 FROM pausepoint_deliveries AS d WHERE d.event_seq = pausepoint_events.seq) "
                    "AND seq < (SELECT max(seq) FROM pausepoint_events)",
                    (us(before),),
                ).rowcount
            return int(gone)

        pruned = await self._run(op)
        if pruned:
            await self._durable()
        return pruned


def _fsync(fd: int) -> None:
    if sys.platform == "darwin":  # fsync there reaches the drive, not its platter: ask for more
        import fcntl

        fcntl.fcntl(fd, fcntl.F_FULLFSYNC)
    else:
        os.fsync(fd)


def _data_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])
