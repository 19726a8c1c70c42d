"""Events: what the runtime announces of the records a turn appends, and the JSON body they show.

Each append carries an ``Event`` for every record worth announcing, written by the store in the
same transaction as the records (``stores.Event``):

    CallPaused                      -> "pause"
    CallAnswered (expire)           -> "expiry"
    CallAnswered (any other)        -> "answer"
    TurnEnded                       -> "turn_end"

Making one costs next to nothing on the hot path: its data is the record's JSON, already encoded
for the log, in a small envelope with the session's owner. Readers (the SSE feed, the webhook
sender) turn it into the public body (``event_body``) when they read it::

    {"id", "type", "at", "agent", "session_id", "owner", ...}
      pause:     "interrupt": PendingInterrupt
      answer, expiry: "entry": AuditEntry
      turn_end:  "turn", "finish_reason", "open_refs", "error"

No message text is ever in an event: a receiver reads what it needs through the API.
"""

from __future__ import annotations

import itertools
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeAlias

from pydantic import TypeAdapter

from ._records import CallAnswered, CallPaused, Record, TurnEnded
from ._rest import AUDIT, INTERRUPTS, dump
from ._views import audit_entry, pending_interrupt
from .stores import Event, LogEntry

__all__ = ["EVENT_KINDS", "EventKind", "announce", "event_body", "new_event_id"]

# An event id: this process's random 64 bits, then a counter. Unique across processes without
# asking the OS for randomness per event.
_PROCESS = secrets.token_hex(8)
_COUNTER = itertools.count(1)


def new_event_id() -> str:
    return f"{_PROCESS}{next(_COUNTER):08x}"


EventKind: TypeAlias = Literal["pause", "answer", "expiry", "turn_end"]
EVENT_KINDS: tuple[EventKind, ...] = ("pause", "answer", "expiry", "turn_end")


@dataclass(slots=True)
class _Envelope:
    owner: str | None
    record: Record


_ENVELOPE: TypeAdapter[_Envelope] = TypeAdapter(_Envelope)


def announce(
    session_id: str,
    agent: str,
    owner: str | None,
    records: Sequence[Record],
    entries: Sequence[LogEntry],
    now: datetime,
    targets: Mapping[str, tuple[str, ...]],
) -> list[Event]:
    """The events of an append of ``records`` (encoded as ``entries``); ``targets`` maps an
    event kind to the webhooks that want it."""
    events: list[Event] = []
    head: bytes | None = None
    for record, entry in zip(records, entries, strict=True):
        kind = _KINDS.get(type(record))
        if kind is None:
            continue
        if head is None:
            head = b'{"owner":' + (b"null" if owner is None else json.dumps(owner).encode()) + b',"record":'
        at = now
        if isinstance(record, CallPaused):
            at = record.at
        elif isinstance(record, CallAnswered):
            at = record.at
            if record.decision == "expire":
                kind = "expiry"
        events.append(Event(new_event_id(), kind, session_id, agent, at, head + entry.data + b"}", targets[kind]))
    return events


_KINDS: dict[type[Any], EventKind] = {CallPaused: "pause", CallAnswered: "answer", TurnEnded: "turn_end"}


def event_body(event: Event) -> dict[str, Any]:
    """The public JSON body of a stored event (what the feed and webhooks send)."""
    envelope = _ENVELOPE.validate_json(event.data)
    record = envelope.record
    body: dict[str, Any] = {
        "id": event.id,
        "type": event.kind,
        "at": event.at.isoformat(),
        "agent": event.agent,
        "session_id": event.session_id,
        "owner": envelope.owner,
    }
    if isinstance(record, CallPaused):
        body["interrupt"] = dump(INTERRUPTS, [pending_interrupt(record)])[0]
    elif isinstance(record, CallAnswered):
        body["entry"] = dump(AUDIT, [audit_entry(record)])[0]
    elif isinstance(record, TurnEnded):
        body.update(
            turn=record.turn, finish_reason=record.finish_reason, open_refs=record.open_refs, error=record.error
        )
    return body
