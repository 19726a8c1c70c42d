"""SQLite files as earlier versions of pausepoint laid them out, for the migration tests."""

from __future__ import annotations

import sqlite3

from pausepoint.stores._sqlite_schema import MIGRATIONS

__all__ = ["SCHEMA_V1", "migrate_to", "rewind_to_version_1"]

# pausepoint schema version 1, as released (copied verbatim from ``stores/sqlite.py`` as it was).
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

_SESSION_COLUMNS = "id, agent, owner, version, created_us, updated_us, pending, next_expiry_us, turn"


def rewind_to_version_1(conn: sqlite3.Connection) -> None:
    """Turn a file of today's schema into what version 1 held: its sessions and their records
    in version 1's tables, every later table gone."""
    conn.executescript(
        f"""
        BEGIN;
        DROP TABLE pausepoint_events;
        DROP TABLE pausepoint_deliveries;
        DROP TABLE pausepoint_checkpoints;
        DROP TABLE pausepoint_checkpoint_extensions;
        DROP INDEX pausepoint_sessions_owner;
        DROP INDEX pausepoint_sessions_pending;
        DROP INDEX pausepoint_sessions_expiry;
        ALTER TABLE pausepoint_sessions RENAME TO today_sessions;
        ALTER TABLE pausepoint_records RENAME TO today_records;
        {SCHEMA_V1}
        INSERT INTO pausepoint_sessions ({_SESSION_COLUMNS}) SELECT {_SESSION_COLUMNS} FROM today_sessions;
        INSERT INTO pausepoint_records (session_id, version, kind, data)
            SELECT s.id, r.key & 2147483647, r.kind, r.data
            FROM today_records AS r JOIN today_sessions AS s ON s.n = r.key >> 31;
        DROP TABLE today_records;
        DROP TABLE today_sessions;
        UPDATE pausepoint_meta SET value = '1' WHERE key = 'schema_version';
        COMMIT;
        """
    )


def migrate_to(conn: sqlite3.Connection, version: int) -> None:
    """Take a version-1 file up to ``version`` with the migrations as released, as the
    pausepoint of that version left it."""
    found = int(conn.execute("SELECT value FROM pausepoint_meta WHERE key = 'schema_version'").fetchone()[0])
    conn.execute("BEGIN")
    for script in MIGRATIONS[found:version]:
        for statement in script.split(";"):
            if statement.strip():
                conn.execute(statement)
    conn.execute("UPDATE pausepoint_meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    conn.execute("COMMIT")
