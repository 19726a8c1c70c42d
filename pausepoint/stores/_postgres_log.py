"""Sessions and their logs in ``PostgresSessionStore``: the statements of the conditional append,
reads, summaries, listings and deletion, and the rows they give and take.

The append is one statement (see ``postgres.py``): a data-modifying ``WITH`` whose first part
claims the session row at the expected version and whose later parts, joined with it, write the
records, the events and their deliveries, and notify the listeners.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ._base import Event, LogEntry, SessionSummary

if TYPE_CHECKING:
    import asyncpg

__all__ = ["append_args", "log_statements", "sessions_query", "summary"]

# The records part of both appends (parameters $10..$20; $21, the session's tenant, is the first
# part's): the entries and events are joined with ``claimed``, so none is inserted when the
# version check matched no row. Reading ``claimed`` waits for its write, so the transaction has
# its id before an event's position is computed.
_WRITE_RECORDS = """
written AS (
    INSERT INTO {s}.pausepoint_records (session_id, version, kind, data)
    SELECT claimed.id, r.version, r.kind, r.data
    FROM claimed, unnest($10::bigint[], $11::text[], $12::bytea[]) AS r (version, kind, data)
),
announced AS (
    INSERT INTO {s}.pausepoint_events (pos, id, kind, session_id, agent, at, data)
    SELECT pg_current_xact_id()::text::bigint * 65536 + e.n, e.id, e.kind, claimed.id, e.agent, e.at, e.data
    FROM claimed, unnest($13::text[], $14::text[], $15::text[], $16::timestamptz[], $17::bytea[])
        WITH ORDINALITY AS e (id, kind, agent, at, data, n)
    RETURNING pos, id
),
queued AS (
    INSERT INTO {s}.pausepoint_deliveries (event_pos, target, state, attempts, due_at, updated_at)
    SELECT announced.pos, t.target, 'pending', 0, $6, $6
    FROM announced JOIN unnest($18::text[], $19::text[]) AS t (event_id, target) ON t.event_id = announced.id
),
notified AS (
    SELECT pg_notify($20, '') FROM claimed WHERE cardinality($13::text[]) > 0
)
SELECT (SELECT count(*) FROM claimed) + 0 * (SELECT count(*) FROM notified){relaxed}
"""

# An append made with durable=False commits without waiting for its WAL flush: the setting is
# local to the statement's own transaction, read by PostgreSQL when it commits.
_RELAXED = " + 0 * length(set_config('synchronous_commit', 'off', true))"

_APPEND_NEW = (
    """
WITH claimed AS (
    INSERT INTO {s}.pausepoint_sessions
        (id, agent, owner, version, created_at, updated_at, pending, next_expiry, turn, tenant)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $21)
    ON CONFLICT (id) DO NOTHING
    RETURNING id
),"""
    + _WRITE_RECORDS
)

_APPEND_NEXT = (
    """
WITH claimed AS (
    UPDATE {s}.pausepoint_sessions
    SET agent = $2, owner = $3, version = $4, created_at = $5, updated_at = $6, pending = $7,
        next_expiry = $8, turn = $9, tenant = $21
    WHERE id = $1 AND version = $22
    RETURNING id
),"""
    + _WRITE_RECORDS
)

# One statement, one snapshot: the version and the entries are read consistently. The LEFT JOIN
# yields one row (with NULL record columns) for a session that has no entries after the version.
_READ = """
SELECT s.version AS head, r.version, r.kind, r.data
FROM {s}.pausepoint_sessions AS s
LEFT JOIN {s}.pausepoint_records AS r ON r.session_id = s.id AND r.version > $2
WHERE s.id = $1
ORDER BY r.version
"""

_SUMMARY_COLUMNS = "id, agent, owner, version, created_at, updated_at, pending, next_expiry, turn, tenant"


def log_statements(s: str) -> dict[str, str]:
    """The statements of sessions and their logs, for the quoted schema name ``s``."""
    return {
        "append_new": _APPEND_NEW.format(s=s, relaxed=""),
        "append_next": _APPEND_NEXT.format(s=s, relaxed=""),
        "append_new_relaxed": _APPEND_NEW.format(s=s, relaxed=_RELAXED),
        "append_next_relaxed": _APPEND_NEXT.format(s=s, relaxed=_RELAXED),
        "read": _READ.format(s=s),
        "version": f"SELECT version FROM {s}.pausepoint_sessions WHERE id = $1",
        "summary": f"SELECT {_SUMMARY_COLUMNS} FROM {s}.pausepoint_sessions WHERE id = $1",
        "list": f"SELECT {_SUMMARY_COLUMNS} FROM {s}.pausepoint_sessions",
        "delete_session": f"DELETE FROM {s}.pausepoint_sessions WHERE id = $1",
        "delete_records": f"DELETE FROM {s}.pausepoint_records WHERE session_id = $1",
    }


def append_args(
    session_id: str,
    summary: SessionSummary,
    new_version: int,
    entries: Sequence[LogEntry],
    events: Sequence[Event],
    channel: str,
) -> list[Any]:
    """The parameters $1..$21 of an append (an append to an existing session adds $22, the
    version it expects)."""
    return [
        session_id,
        summary.agent,
        summary.owner,
        new_version,
        summary.created_at,
        summary.updated_at,
        summary.pending,
        summary.next_expiry,
        summary.turn,
        [e.version for e in entries],
        [e.kind for e in entries],
        [e.data for e in entries],
        [e.id for e in events],
        [e.kind for e in events],
        [e.agent for e in events],
        [e.at for e in events],
        [e.data for e in events],
        [e.id for e in events for _ in e.targets],
        [target for e in events for target in e.targets],
        channel,
        summary.tenant,
    ]


def sessions_query(
    listing: str,
    *,
    owner: str | None,
    agent: str | None,
    has_pending: bool | None,
    expiring_before: datetime | None,
    limit: int,
    offset: int,
    tenant: str | None = None,
) -> tuple[str, list[Any]]:
    """The statement ``listing`` (the ``list`` statement) narrowed by the filters, newest first,
    and its parameters."""
    where: list[str] = []
    args: list[Any] = []
    if owner is not None:
        args.append(owner)
        where.append(f"owner = ${len(args)}")
    if tenant is not None:
        args.append(tenant)
        where.append(f"tenant = ${len(args)}")
    if agent is not None:
        args.append(agent)
        where.append(f"agent = ${len(args)}")
    if has_pending is not None:
        where.append("pending > 0" if has_pending else "pending = 0")
    if expiring_before is not None:
        args.append(expiring_before)
        where.append(f"next_expiry < ${len(args)}")
    sql = listing
    if where:
        sql += " WHERE " + " AND ".join(where)
    args += [limit, offset]
    sql += f" ORDER BY updated_at DESC, id DESC LIMIT ${len(args) - 1} OFFSET ${len(args)}"
    return sql, args


def summary(row: asyncpg.Record) -> SessionSummary:
    return SessionSummary(
        session_id=row["id"],
        agent=row["agent"],
        owner=row["owner"],
        version=row["version"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        pending=row["pending"],
        next_expiry=row["next_expiry"],
        turn=row["turn"],
        tenant=row["tenant"],
    )
