"""The schema of ``PostgresSessionStore``: its migrations, and the upgrade a schema gets when a
store first uses it.

The schema records its version in ``pausepoint_meta``; a store's first call runs the
migrations it lacks, in one transaction under an advisory lock (processes starting together
take turns), and a newer or unknown version is refused with ``SchemaVersionError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import SchemaVersionError

if TYPE_CHECKING:
    import asyncpg
    from asyncpg.pool import PoolConnectionProxy

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "create_schema"]

# ``{s}`` is the quoted schema name, substituted once per store; values always go through $n.
# Identifiers use the "C" collation so that ordering by id matches the other backends (bytewise).
# Every append rewrites updated_at, and each index holding it is one more write per append, so
# only the listings the runtime makes get one: by agent (every agent's listing), by owner, the
# inbox of pending sessions, and expiring pauses. An unfiltered listing sorts.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS {s}.pausepoint_sessions (
    id text COLLATE "C" PRIMARY KEY,
    agent text COLLATE "C" NOT NULL,
    owner text COLLATE "C",
    version bigint NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    pending integer NOT NULL,
    next_expiry timestamptz,
    turn integer NOT NULL
);
CREATE INDEX IF NOT EXISTS pausepoint_sessions_owner ON {s}.pausepoint_sessions (owner, updated_at, id)
    WHERE owner IS NOT NULL;
CREATE INDEX IF NOT EXISTS pausepoint_sessions_agent ON {s}.pausepoint_sessions (agent, updated_at, id);
CREATE INDEX IF NOT EXISTS pausepoint_sessions_pending ON {s}.pausepoint_sessions (updated_at, id)
    WHERE pending > 0;
CREATE INDEX IF NOT EXISTS pausepoint_sessions_expiry ON {s}.pausepoint_sessions (next_expiry)
    WHERE next_expiry IS NOT NULL;
CREATE TABLE IF NOT EXISTS {s}.pausepoint_records (
    session_id text COLLATE "C" NOT NULL,
    version bigint NOT NULL,
    kind text NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (session_id, version)
);
"""

# Version 2. The deliveries' partial index holds only what is still to be sent.
_OUTBOX = """
CREATE TABLE IF NOT EXISTS {s}.pausepoint_events (
    pos bigint PRIMARY KEY,
    id text COLLATE "C" NOT NULL,
    kind text NOT NULL,
    session_id text COLLATE "C" NOT NULL,
    agent text COLLATE "C" NOT NULL,
    at timestamptz NOT NULL,
    data bytea NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.pausepoint_deliveries (
    id bigserial PRIMARY KEY,
    event_pos bigint NOT NULL,
    target text COLLATE "C" NOT NULL,
    state text NOT NULL,
    attempts integer NOT NULL,
    due_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    last_error text,
    lease text
);
CREATE INDEX IF NOT EXISTS pausepoint_deliveries_due ON {s}.pausepoint_deliveries (target, due_at)
    WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS pausepoint_deliveries_state ON {s}.pausepoint_deliveries (state, id);
CREATE INDEX IF NOT EXISTS pausepoint_deliveries_event ON {s}.pausepoint_deliveries (event_pos);
"""

# Version 3: one checkpoint per session (see stores._base).
_CHECKPOINTS = """
CREATE TABLE IF NOT EXISTS {s}.pausepoint_checkpoints (
    session_id text COLLATE "C" PRIMARY KEY,
    version bigint NOT NULL,
    data bytea NOT NULL
);
"""

# Version 4: checkpoint extensions, oldest first (see stores._base). pausepoint_checkpoints.version
# is the checkpoint's head: its latest extension's version, or its base's when it has none.
_EXTENSIONS = """
CREATE TABLE IF NOT EXISTS {s}.pausepoint_checkpoint_extensions (
    session_id text COLLATE "C" NOT NULL,
    version bigint NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (session_id, version)
);
"""

# Version 5: bases in a table of their own, by version, so that a process reading a base in part
# (``_partial``) still finds it after a newer one replaced it: a replaced base is deleted
# PARTIAL_BASE_KEPT seconds later (or once REPLACED_BASES_KEPT newer ones replaced it), by the
# next base written. Stored uncompressed, so that a range of it reads only the pages that hold
# it. The checkpoints of version 4 (their bases in pausepoint_checkpoints.data, without their
# version) are dropped: the next load folds the log and writes a new one.
_BASES = """
CREATE TABLE IF NOT EXISTS {s}.pausepoint_checkpoint_bases (
    session_id text COLLATE "C" NOT NULL,
    version bigint NOT NULL,
    data bytea NOT NULL,
    replaced_at timestamptz,
    PRIMARY KEY (session_id, version)
);
ALTER TABLE {s}.pausepoint_checkpoint_bases ALTER COLUMN data SET STORAGE EXTERNAL;
DELETE FROM {s}.pausepoint_checkpoint_extensions;
DELETE FROM {s}.pausepoint_checkpoints;
ALTER TABLE {s}.pausepoint_checkpoints DROP COLUMN data;
ALTER TABLE {s}.pausepoint_checkpoints ADD COLUMN base bigint NOT NULL;
"""

# Version 6: a session's tenant (its creator's; NULL: none), and a tenant's sessions by update
# time, for the inbox of a tenant's approvers. A partial index: sessions without a tenant (every
# session of a single-tenant setup) cost no index write more per append. ``IF NOT EXISTS``: a
# schema taken back to an older version by hand keeps the column.
_TENANTS = """
ALTER TABLE {s}.pausepoint_sessions ADD COLUMN IF NOT EXISTS tenant text COLLATE "C";
CREATE INDEX IF NOT EXISTS pausepoint_sessions_tenant ON {s}.pausepoint_sessions (tenant, updated_at, id)
    WHERE tenant IS NOT NULL;
"""

# The schema as a list of migrations: the script at index i takes a schema from version i to
# version i + 1, so a new schema runs them all and an older one the ones it lacks. Never edit a
# script once released: append a new one.
MIGRATIONS = [_SCHEMA, _OUTBOX, _CHECKPOINTS, _EXTENSIONS, _BASES, _TENANTS]
SCHEMA_VERSION = len(MIGRATIONS)

_META = "CREATE TABLE IF NOT EXISTS {s}.pausepoint_meta (key text PRIMARY KEY, value text NOT NULL)"


async def create_schema(conn: PoolConnectionProxy[asyncpg.Record], schema: str, quoted: str) -> None:
    """Bring ``schema`` (``quoted``: its name as an identifier) to ``SCHEMA_VERSION``: create it,
    or upgrade an older one.

    Raises ``SchemaVersionError`` if it holds a newer or unknown version."""
    async with conn.transaction():
        # Processes starting together take turns; the later ones find the tables made.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('pausepoint schema ' || $1))", schema)
        # Only ask for CREATE SCHEMA (a database privilege) when the schema is missing.
        if not await conn.fetchval("SELECT true FROM pg_namespace WHERE nspname = $1", schema):
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quoted}")
        await conn.execute(_META.format(s=quoted))
        found = await conn.fetchval(f"SELECT value FROM {quoted}.pausepoint_meta WHERE key = 'schema_version'")
        done = _version_done(schema, found)
        for script in MIGRATIONS[done:]:
            await conn.execute(script.format(s=quoted))
        if found is None:
            await conn.execute(
                f"INSERT INTO {quoted}.pausepoint_meta (key, value) VALUES ('schema_version', $1)", str(SCHEMA_VERSION)
            )
        elif done != SCHEMA_VERSION:
            await conn.execute(
                f"UPDATE {quoted}.pausepoint_meta SET value = $1 WHERE key = 'schema_version'", str(SCHEMA_VERSION)
            )


def _version_done(schema: str, found: str | None) -> int:
    """The schema version ``found`` in the schema (0: a new one); refuses one this code cannot use."""
    done = 0 if found is None else int(found) if found.isdigit() else -1
    if found is not None and not 1 <= done <= SCHEMA_VERSION:
        raise SchemaVersionError(
            f"PostgreSQL schema {schema!r} holds pausepoint schema version {found!r}; this "
            f"version of pausepoint uses version {SCHEMA_VERSION} (and upgrades earlier ones)",
            found=found,
            expected=SCHEMA_VERSION,
        )
    return done
