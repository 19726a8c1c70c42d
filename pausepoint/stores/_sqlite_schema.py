"""The schema of ``SqliteSessionStore``: its migrations, the key a record is filed under, and
the upgrade a file gets when a store first opens it.

A file records its schema version in ``pausepoint_meta``; opening an older file runs the
migrations it lacks, in one transaction, and a newer or unknown version is refused with
``SchemaVersionError``.
"""

from __future__ import annotations

import logging
import sqlite3

from ..errors import SchemaVersionError
from ._sqlite_rows import transaction

__all__ = ["MAX_SESSION_NUMBER", "MAX_VERSION", "MIGRATIONS", "SCHEMA_VERSION", "VERSION_BITS", "create_schema"]

log = logging.getLogger("pausepoint")

# The schema as a list of migrations: the script at index i takes a file from version i to
# version i + 1, so a new file runs them all and an older one runs the ones it lacks. Never edit
# a script once released: append a new one.
MIGRATIONS = [
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
    # VERSION_BITS): a session gets a number (n), and the log is copied over in that order. An
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
    # 7: a session's tenant (its creator's; NULL: none), and a tenant's sessions by update time.
    # A partial index, as the others: sessions without a tenant (every session of a
    # single-tenant setup) cost no page more per append.
    """
ALTER TABLE pausepoint_sessions ADD COLUMN tenant TEXT;
CREATE INDEX pausepoint_sessions_tenant ON pausepoint_sessions (tenant, updated_us) WHERE tenant IS NOT NULL;
""",
]
SCHEMA_VERSION = len(MIGRATIONS)

# A record's key (schema 6): its session's number in the high bits, its version in the low
# VERSION_BITS, so that a session's records are one run of the table, in order.
VERSION_BITS = 31
MAX_VERSION = (1 << VERSION_BITS) - 1  # the records a session may hold
MAX_SESSION_NUMBER = (1 << (63 - VERSION_BITS)) - 1  # sessions a file may number


def create_schema(conn: sqlite3.Connection, path: str) -> None:
    """Bring the file at ``path`` to ``SCHEMA_VERSION``: create it, or upgrade an older one.

    Raises ``SchemaVersionError`` if the file holds a newer or unknown schema."""
    with transaction(conn):
        conn.execute("CREATE TABLE IF NOT EXISTS pausepoint_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        found = _version_found(conn, path)
        upgrading = 0 < found < SCHEMA_VERSION
        if upgrading:
            log.info("upgrading %s from pausepoint schema version %d to %d", path, found, SCHEMA_VERSION)
        for script in MIGRATIONS[found:]:
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


def _version_found(conn: sqlite3.Connection, path: str) -> int:
    """The schema version the file holds (0: a new file); refuses one this code cannot use."""
    row = conn.execute("SELECT value FROM pausepoint_meta WHERE key = 'schema_version'").fetchone()
    found = 0 if row is None else int(row[0]) if str(row[0]).isdigit() else -1
    if row is not None and not 1 <= found <= SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{path} holds pausepoint schema version {row[0]}; this version of pausepoint "
            f"uses version {SCHEMA_VERSION} (and upgrades files from earlier ones)",
            found=row[0],
            expected=SCHEMA_VERSION,
        )
    return found
