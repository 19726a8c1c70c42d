"""The event stream and the delivery outbox of ``PostgresSessionStore``: their statements, the
queries a listing builds, and the rows they give.

An event's position is its transaction id times 65,536 + its place in the append; readers take
only the events of transactions older than every transaction still running (``_SETTLED``), so a
reader following positions misses none (see ``postgres.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._base import Delivery, DeliveryState, Event

if TYPE_CHECKING:
    import asyncpg

__all__ = ["deliveries_query", "delivery", "event", "outbox_statements"]

# Positions of events whose transaction ended before every transaction still running began.
_SETTLED = "pg_snapshot_xmin(pg_current_snapshot())::text::bigint * 65536"

_EVENT_COLUMNS = "e.pos, e.id, e.kind, e.session_id, e.agent, e.at, e.data"
_DELIVERY_COLUMNS = "d.id, d.target, d.state, d.attempts, d.due_at, d.updated_at, d.last_error, d.lease, " + ", ".join(
    f"{column} AS e_{column[2:]}" for column in _EVENT_COLUMNS.split(", ")
)

_CLAIM = """
WITH due AS (
    SELECT id FROM {s}.pausepoint_deliveries
    WHERE state = 'pending' AND target = ANY($1::text[]) AND due_at <= $2
    ORDER BY due_at, id LIMIT $3
    FOR UPDATE SKIP LOCKED
)
UPDATE {s}.pausepoint_deliveries AS d SET due_at = $4, lease = $5
FROM due, {s}.pausepoint_events AS e
WHERE d.id = due.id AND e.pos = d.event_pos
RETURNING {columns}
"""


def outbox_statements(s: str) -> dict[str, str]:
    """The statements of the event stream and the outbox, for the quoted schema name ``s``."""
    return {
        "read_events": f"SELECT {_EVENT_COLUMNS} FROM {s}.pausepoint_events AS e WHERE e.pos > $1 "
        f"AND e.pos < {_SETTLED} ORDER BY e.pos LIMIT $2",
        "last_event": f"SELECT coalesce(max(pos) FILTER (WHERE pos < {_SETTLED}), 0), coalesce(max(pos), 0) "
        f"FROM {s}.pausepoint_events",
        "claim": _CLAIM.format(s=s, columns=_DELIVERY_COLUMNS),
        "settle": f"UPDATE {s}.pausepoint_deliveries SET state = $3, attempts = attempts + 1, "
        "due_at = coalesce($4, due_at), updated_at = $5, last_error = $6, lease = NULL "
        "WHERE id = $1 AND lease = $2 AND state = 'pending'",
        "deliveries": f"SELECT {_DELIVERY_COLUMNS} FROM {s}.pausepoint_deliveries AS d "
        f"JOIN {s}.pausepoint_events AS e ON e.pos = d.event_pos",
        "requeue": f"UPDATE {s}.pausepoint_deliveries SET state = 'pending', attempts = 0, due_at = $2, "
        "updated_at = $2, lease = NULL WHERE id = $1 AND state = 'failed'",
        "prune_deliveries": f"DELETE FROM {s}.pausepoint_deliveries WHERE state = 'delivered' "
        f"AND event_pos IN (SELECT pos FROM {s}.pausepoint_events WHERE at < $1)",
        "prune_events": f"DELETE FROM {s}.pausepoint_events AS e WHERE e.at < $1 AND NOT EXISTS "
        f"(SELECT 1 FROM {s}.pausepoint_deliveries AS d WHERE d.event_pos = e.pos)",
        # the schema's secret (``StoreSecret``), made by the first process that asks for it
        "make_secret": f"INSERT INTO {s}.pausepoint_meta (key, value) VALUES ('secret', $1) ON CONFLICT DO NOTHING",
        "secret": f"SELECT value FROM {s}.pausepoint_meta WHERE key = 'secret'",
    }


def deliveries_query(
    deliveries: str, *, state: DeliveryState | None, target: str | None, limit: int, offset: int
) -> tuple[str, list[Any]]:
    """The statement ``deliveries`` narrowed by the filters, newest first, and its parameters."""
    where: list[str] = []
    args: list[Any] = []
    if state is not None:
        args.append(state)
        where.append(f"d.state = ${len(args)}")
    if target is not None:
        args.append(target)
        where.append(f"d.target = ${len(args)}")
    sql = deliveries + (" WHERE " + " AND ".join(where) if where else "")
    args += [limit, offset]
    sql += f" ORDER BY d.id DESC LIMIT ${len(args) - 1} OFFSET ${len(args)}"
    return sql, args


def event(row: asyncpg.Record, prefix: str = "") -> Event:
    return Event(
        id=row[prefix + "id"],
        kind=row[prefix + "kind"],
        session_id=row[prefix + "session_id"],
        agent=row[prefix + "agent"],
        at=row[prefix + "at"],
        data=row[prefix + "data"],
        seq=row[prefix + "pos"],
    )


def delivery(row: asyncpg.Record) -> Delivery:
    return Delivery(
        id=row["id"],
        target=row["target"],
        event=event(row, "e_"),
        state=row["state"],
        attempts=row["attempts"],
        due_at=row["due_at"],
        updated_at=row["updated_at"],
        last_error=row["last_error"],
        lease=row["lease"],
    )
