"""Redis replies as pausepoint's values, for ``RedisSessionStore``: summaries, events and
deliveries read back from the hashes and members the scripts write (see the layout in
``redis.py``), and times as the epoch microseconds they are kept in.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ._base import Delivery, Event, SessionSummary

__all__ = ["delivery", "event", "moment", "summary", "text", "us"]


def us(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000)


def moment(micros: bytes | str) -> datetime:
    return datetime.fromtimestamp(int(micros) / 1_000_000, tz=UTC)


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def event(member: bytes) -> Event:
    seq, event_id, kind, session_id, agent, at, data = member.split(b"\n", 6)
    return Event(
        id=event_id.decode(),
        kind=kind.decode(),
        session_id=session_id.decode(),
        agent=agent.decode(),
        at=moment(at),
        data=data,
        seq=int(seq),
    )


def delivery(row: list[Any]) -> Delivery:
    number, flat, member = row
    fields = {text(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}
    error = fields.get("error")
    lease = fields.get("lease")
    return Delivery(
        id=int(number),
        target=text(fields["target"]),
        event=event(member),
        state=text(fields["state"]),  # type: ignore[arg-type]
        attempts=int(fields["attempts"]),
        due_at=moment(fields["due_us"]),
        updated_at=moment(fields["updated_us"]),
        last_error=None if error is None else text(error),
        lease=None if lease is None else text(lease),
    )


def summary(session_id: str, fields: Mapping[str, bytes | str]) -> SessionSummary:
    owner = fields.get("owner")
    tenant = fields.get("tenant")
    expiry = fields.get("expiry_us")
    return SessionSummary(
        session_id=session_id,
        agent=text(fields["agent"]),
        owner=None if owner is None else text(owner),
        version=int(fields["version"]),
        created_at=moment(fields["created_us"]),
        updated_at=moment(fields["updated_us"]),
        pending=int(fields["pending"]),
        next_expiry=None if expiry is None else moment(expiry),
        turn=int(fields["turn"]),
        tenant=None if tenant is None else text(tenant),
    )
