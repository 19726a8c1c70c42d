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

This module holds the store: its connection, its durability and the contract's calls. Their
statements live beside it, one concept each: the schema and its migrations (``_sqlite_schema``),
sessions and their logs (``_sqlite_log``), checkpoints (``_sqlite_checkpoints``), the event
stream and the outbox (``_sqlite_outbox``), and the rows they read (``_sqlite_rows``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import sqlite3
import sys
import time
import weakref
from collections.abc import Callable, Collection, Hashable, Sequence
from datetime import datetime, timedelta
from typing import Literal, TypeVar

from ..errors import StoreError
from . import _sqlite_checkpoints, _sqlite_log, _sqlite_outbox
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
)
from ._checkpoint_files import CheckpointFiles
from ._groupsync import GroupSync
from ._signal import Signal
from ._sqlite_rows import SummaryRow, us
from ._sqlite_schema import SCHEMA_VERSION as SCHEMA_VERSION  # the schema's version, named beside its store
from ._sqlite_schema import create_schema

__all__ = ["DEFAULT_CHECKPOINT_FILE_BYTES", "SqliteSessionStore"]

log = logging.getLogger("pausepoint")

# Checkpoint bases of at least this many bytes are kept in files beside the database.
DEFAULT_CHECKPOINT_FILE_BYTES = 256 * 1024

# How often a reader of the event stream checks whether another process wrote to the file.
_POLL_SECONDS = 0.05
# The session numbers a store remembers (``_numbers``) before it forgets them all and starts again.
_NUMBERS_KEPT = 4096

T = TypeVar("T")


def _is_busy(exc: sqlite3.Error) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


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
    2,147,483,647 records (a record's key is both: ``_sqlite_schema.VERSION_BITS``); an append past either
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
        # Session id -> its number in the file, as this store's last append to it found it:
        # the next append moves the session's row in one statement (``_sqlite_log._advance``).
        self._numbers: dict[str, int] = {}
        self._signal = Signal()
        # Set on connecting: the group fsync of the WAL, when writes must reach stable storage.
        self._group: GroupSync | None = None
        self._synced_directory = False
        self._secret: bytes | None = None
        _STORES.add(self)

    def _forked(self) -> None:
        """In a forked child: the parent's connection is never used (SQLite's rule: a connection
        does not cross ``fork()``; its locks are the parent's), nor closed (closing it could end
        the WAL the parent writes): it is set aside, and the child opens its own on first use.
        An in-memory database is the connection itself: the child keeps its copy."""
        if self._files is None:
            return
        if self._conn is not None:
            _INHERITED.append(self._conn)
        self._conn = None
        self._numbers = {}
        self._group = None
        self._signal = Signal()

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
        self._files.sweep(_sqlite_checkpoints.files_named(conn))

    def _open(self) -> sqlite3.Connection:
        """The connection, opened on first use with the file's schema brought up to date."""
        if self._conn is None:
            conn = self._connect()
            try:
                create_schema(conn, self.path)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
            self._sweep_files(conn)
        return self._conn

    @property
    def _name(self) -> str:
        return os.path.basename(self.path)

    @property
    def event_source(self) -> Hashable | None:
        """Its file, wherever it is named from (``stores.event_stream``); None in memory."""
        return None if self._files is None else ("sqlite", os.path.realpath(self.path))

    async def _run(self, op: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``op`` on the connection, backing off asynchronously while another process writes."""
        deadline = time.monotonic() + self._busy_timeout
        delay = 0.0005
        while True:
            try:
                return op(self._open())
            except sqlite3.IntegrityError:  # a constraint: the operation's own to read
                raise
            except (sqlite3.DatabaseError, sqlite3.InterfaceError) as exc:  # busy, or no database file, say
                # The file's name, not its path: the message may reach an HTTP client.
                if not _is_busy(exc):
                    raise StoreError(f"SQLite error on {self._name}: {exc}") from exc
                if time.monotonic() > deadline:
                    raise StoreError(f"{self._name} stayed locked for {self._busy_timeout}s") from exc
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
        _sqlite_log.check_capacity(session_id, new_version)
        row = SummaryRow.written(session_id, summary, new_version)
        known = self._numbers.get(session_id)
        n = await self._run(
            lambda conn: _sqlite_log.append(conn, expected_version, row, entries, events, self.path, known)
        )
        if known != n:
            if len(self._numbers) >= _NUMBERS_KEPT:
                self._numbers.clear()
            self._numbers[session_id] = n
        if events:
            self._signal.fire()
        if durable:
            await self._durable()
        return new_version

    async def read(self, session_id: str, after_version: int = 0) -> LogSlice | None:
        return await self._run(lambda conn: _sqlite_log.read(conn, session_id, after_version))

    async def write_checkpoint(self, session_id: str, version: int, data: bytes) -> bool:
        # One transaction: a new base, kept only for a version the log holds and only over an
        # older checkpoint, drops the extensions of the old one. Not waited for: a checkpoint is
        # never the source of truth. A large base is first written to a file and flushed to
        # stable storage, in a worker thread; its row then names the file, and the file of the
        # base it replaces is removed.
        name: str | None = None
        files = self._files
        if files is not None and self.checkpoint_file_bytes is not None and len(data) >= self.checkpoint_file_bytes:
            if not await self._run(lambda conn: _sqlite_checkpoints.base_due(conn, session_id, version)):
                return False  # not worth writing the file
            try:
                name = await _sqlite_checkpoints.write_file(files, session_id, version, data)
            except OSError as exc:  # no room, or no right to write there: keep it in the database
                log.warning("could not write a checkpoint file in %s (%s); kept in the database", files.directory, exc)
        try:
            kept, replaced = await self._run(
                lambda conn: _sqlite_checkpoints.write_base(conn, session_id, version, data, name)
            )
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
        # One transaction (``_sqlite_checkpoints.extend``). Not waited for either.
        check_replaces(replaces)
        if not after < version:
            return False
        return await self._run(
            lambda conn: _sqlite_checkpoints.extend(conn, session_id, after, version, data, replaces)
        )

    async def read_checkpoint(self, session_id: str) -> Checkpoint | None:
        for _ in range(3):  # a file replaced by another process since the read: read again
            found = await self._run(lambda conn: _sqlite_checkpoints.read(conn, session_id))
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
        return await self._run(lambda conn: _sqlite_log.get_summary(conn, session_id))

    async def list_sessions(
        self,
        *,
        owner: str | None = None,
        agent: str | None = None,
        has_pending: bool | None = None,
        expiring_before: datetime | None = None,
        limit: int = 100,
        offset: int = 0,
        tenant: str | None = None,
    ) -> list[SessionSummary]:
        return await self._run(
            lambda conn: _sqlite_log.list_sessions(
                conn, owner, agent, has_pending, expiring_before, limit, offset, tenant
            )
        )

    async def delete(self, session_id: str) -> bool:
        self._numbers.pop(session_id, None)
        deleted, named = await self._run(lambda conn: _sqlite_log.delete(conn, session_id))
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
        return await self._run(lambda conn: _sqlite_outbox.read_events(conn, after, limit))

    async def last_event(self) -> int:
        return await self._run(_sqlite_outbox.last_event)

    async def secret(self) -> bytes:
        if self._secret is None:
            self._secret = await self._run(_sqlite_outbox.secret)
        return self._secret

    async def wait_for_events(self, after: int, max_wait: float) -> None:
        # Another process's commit shows as a change of data_version: cheap to poll, no I/O.
        deadline = time.monotonic() + max_wait
        generation = self._signal.generation
        seen = await self._run(_sqlite_outbox.data_version)
        if await self.last_event() > after:
            return
        while (remaining := deadline - time.monotonic()) > 0:
            await self._signal.wait(generation, min(remaining, _POLL_SECONDS))
            if self._signal.generation != generation or await self._run(_sqlite_outbox.data_version) != seen:
                return

    async def claim_deliveries(
        self, targets: Collection[str], now: datetime, lease: timedelta, limit: int = 50
    ) -> list[Delivery]:
        names = list(targets)
        if not names or limit <= 0:
            return []
        token = secrets.token_hex(8)
        claimed = await self._run(lambda conn: _sqlite_outbox.claim(conn, names, now, now + lease, limit, token))
        if claimed:
            await self._durable()
        return claimed

    async def settle_delivery(
        self, delivery: Delivery, now: datetime, *, error: str | None = None, retry_at: datetime | None = None
    ) -> bool:
        state = "delivered" if error is None else ("pending" if retry_at is not None else "failed")
        due = None if state != "pending" or retry_at is None else us(retry_at)
        settled = await self._run(lambda conn: _sqlite_outbox.settle(conn, delivery, state, due, now, error))
        if settled:
            await self._durable()
        return settled

    async def list_deliveries(
        self, *, state: DeliveryState | None = None, target: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[Delivery]:
        return await self._run(lambda conn: _sqlite_outbox.list_deliveries(conn, state, target, limit, offset))

    async def requeue_delivery(self, delivery_id: int, now: datetime) -> bool:
        requeued = await self._run(lambda conn: _sqlite_outbox.requeue(conn, delivery_id, now))
        if requeued:
            await self._durable()
        return requeued

    async def prune_events(self, before: datetime) -> int:
        """As the protocol says; on a file, in a worker thread on a connection of its own, so
        that a large outbox never holds the event loop (its writers back off while it writes)."""
        self._open()  # the schema, on the loop's connection first
        if self._files is None:  # in memory: only this connection sees the database
            pruned = await self._run(lambda conn: _sqlite_outbox.prune(conn, before))
        else:
            pruned = await asyncio.to_thread(self._prune_apart, before)
        if pruned:
            await self._durable()
        return pruned

    def _prune_apart(self, before: datetime) -> int:
        conn = self._connect()
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")  # this thread may wait
            return _sqlite_outbox.prune(conn, before)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"SQLite error on {self._name}: {exc}") from exc
        finally:
            conn.close()


_STORES: weakref.WeakSet[SqliteSessionStore] = weakref.WeakSet()
_INHERITED: list[sqlite3.Connection] = []  # the parent's, in a forked child: never used, never closed


def _after_fork_in_child() -> None:
    for store in list(_STORES):
        store._forked()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _fsync(fd: int) -> None:
    if sys.platform == "darwin":  # fsync there reaches the drive, not its platter: ask for more
        import fcntl

        fcntl.fcntl(fd, fcntl.F_FULLFSYNC)
    else:
        os.fsync(fd)
