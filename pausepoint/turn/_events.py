"""Events: what the runtime announces of the records a turn appends, and the JSON body they show.

Each append carries an ``Event`` for every record worth announcing, written by the store in the
same transaction as the records (``stores.Event``), with a delivery for each webhook that wants
it (its kind, its agent, and — for a webhook limited to some tenants — the session's tenant):

    CallPaused, ApprovalPaused      -> "pause"
    CallAnswered (expire)           -> "expiry"
    CallAnswered (any other)        -> "answer"
    TurnEnded                       -> "turn_end"
    ApprovalGiven                   -> "approval"    (one approval of several counted; still paused)
    CallDecided                     -> "decision"    (the approval policy approved or denied a call)
    GrantAdded, GrantRevoked        -> "grant"
    PauseEscalated                  -> "escalation"  (handed to other approvers)

Making one costs next to nothing on the hot path: its data is the record's JSON, already encoded
for the log, in a small envelope with the session's owner and tenant (the tenant only when the
session has one: a single-tenant setup's events keep the bytes they always had; and, for an
answer, the input of the pause it answered; for a turn end, the refs of the calls left paused).
Readers (the SSE feed, the webhook sender) turn it into the public body (``event_body``) when
they read it, with the pause's ``view`` when they know the agent::

    {"id", "type", "at", "agent", "session_id", "owner", "tenant", ...}
      pause:     "interrupt": PendingInterrupt (+ "view")
      answer, expiry, approval, decision, grant, escalation: "entry": AuditEntry (+ "view")
      turn_end:  "turn", "finish_reason", "open_refs" (the paused calls' refs), "error"

No message text is ever in an event: a receiver reads what it needs through the API.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from hashlib import blake2b
from json.encoder import encode_basestring_ascii
from typing import Any, Literal, Protocol, TypeAlias, assert_never

from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python

from ..session._interrupts import PendingInterrupt
from ..session._json import AUDIT, INTERRUPTS, dump
from ..session._records import (
    AbortRequested,
    ApprovalGiven,
    ApprovalPaused,
    CallAnswered,
    CallCompleted,
    CallDecided,
    CallPaused,
    GrantAdded,
    GrantRevoked,
    MessageAdded,
    PauseEscalated,
    Record,
    SessionStarted,
    TurnEnded,
    TurnStarted,
)
from ..session._state import SessionState
from ..session._views import answered_pause, approvals_counted, approving, audit_entry, pending_interrupt
from ..stores import Event, LogEntry
from ..tools._display import PauseView

__all__ = ["EVENT_KINDS", "EventKind", "announce", "event_body", "new_event_id"]

# An event id: this process's random 64 bits, then a counter sealed with a key of the process
# (a keyed BLAKE2b of it: distinct, and counting nothing a reader could read — a counter as it is
# would tell one tenant how many events the process made for the others). Unique across
# processes without asking the OS for randomness per event.
_PROCESS = secrets.token_hex(8)
_KEY = secrets.token_bytes(16)
_COUNTER = itertools.count(1)


def new_event_id() -> str:
    return _PROCESS + blake2b(next(_COUNTER).to_bytes(8, "big"), digest_size=8, key=_KEY).hexdigest()


EventKind: TypeAlias = Literal["pause", "answer", "expiry", "turn_end", "approval", "decision", "grant", "escalation"]
EVENT_KINDS: tuple[EventKind, ...] = (
    "pause",
    "answer",
    "expiry",
    "turn_end",
    "approval",
    "decision",
    "grant",
    "escalation",
)


@dataclass(slots=True)
class _Envelope:
    owner: str | None
    record: Record
    tenant: str | None = None  # the session's (written only when it has one)
    input: Any = None  # an answer's: the input of the pause it answered
    open: list[str] | None = None  # a turn end's: the refs of the calls left paused
    count: int = 0  # an approval's: how many approvals the pause has with it
    required: int = 0  # ... and how many it needs
    approves: bool = False  # an answer's: whether it approved the call (the audit's "approve")
    grantor: str | None = None  # a decision by a grant's: who granted it
    paused_at: datetime | None = None  # what happened to a pause: when it paused
    expires_at: datetime | None = None  # ... and when it would expire (only when it had a TTL)
    tool: str | None = None  # a revocation's: the tool of the grant it revokes


_ENVELOPE: TypeAdapter[_Envelope] = TypeAdapter(_Envelope)


def announce(
    state: SessionState,
    records: Sequence[Record],
    entries: Sequence[LogEntry],
    now: datetime,
    targets: Mapping[str, tuple[str, ...]],
    tenants: Mapping[str, frozenset[str]] | None = None,
) -> list[Event]:
    """The events of an append of ``records`` (encoded as ``entries``, already folded into
    ``state``); ``targets`` maps an event kind to the webhooks that want it, and ``tenants``
    a webhook limited to some tenants to those (a session of another tenant, or of none, is
    not announced to it)."""
    events: list[Event] = []
    head: bytes | None = None
    for record, entry in zip(records, entries, strict=True):
        announced = _announced(record, state, now)
        if announced is None:
            continue
        kind, at, tail = announced
        if head is None:
            head = _head(state.owner, state.tenant)
        wanted = targets[kind]
        if tenants and wanted:
            wanted = tuple(t for t in wanted if t not in tenants or state.tenant in tenants[t])
        event = Event(new_event_id(), kind, state.session_id, state.agent, at, head + entry.data + tail, wanted)
        events.append(event)
    return events


def _head(owner: str | None, tenant: str | None) -> bytes:
    """The envelope's start: the session's owner, its tenant when it has one, then the record."""
    head = b'{"owner":' + (b"null" if owner is None else _json_string(owner))
    if tenant is not None:
        head += b',"tenant":' + _json_string(tenant)
    return head + b',"record":'


def _announced(record: Record, state: SessionState, now: datetime) -> tuple[EventKind, datetime, bytes] | None:
    """The event a record makes — its kind, its time and the end of its envelope — or None for
    a record nobody is told of. Every record kind is matched here, exhaustively."""
    match record:  # the commonest kinds first: a case costs a test per kind before it
        case MessageAdded() | CallCompleted():
            return None
        case TurnEnded():
            calls = [state.pauses[pause].record.call_ref for pause in record.open_refs]
            return "turn_end", now, b',"open":[' + b", ".join(map(_json_string, calls)) + b"]}"
        case CallPaused():  # an ApprovalPaused too
            return "pause", record.at, b"}"
        case CallAnswered() | ApprovalGiven() | PauseEscalated():
            kind: EventKind = "escalation" if isinstance(record, PauseEscalated) else "approval"
            if isinstance(record, CallAnswered):
                kind = "expiry" if record.decision == "expire" else "answer"
            return kind, record.at, _about_a_pause(record, state)
        case CallDecided():
            tail = b',"input":' + _INPUT(state.calls[record.call_ref].request.input)
            if record.grant is not None and record.grant in state.grants:
                tail += b',"grantor":' + _INPUT(state.grants[record.grant].record.principal)
            return "decision", record.at, tail + b"}"
        case GrantAdded():
            return "grant", record.at, b"}"
        case GrantRevoked():  # named by the tool of the grant it revokes, as the trail names it
            granted = state.grants.get(record.id)
            return (
                "grant",
                record.at,
                (b"}" if granted is None else b',"tool":' + _json_string(granted.record.tool) + b"}"),
            )
        case SessionStarted() | TurnStarted() | AbortRequested():
            return None
        case _:
            assert_never(record)


def _about_a_pause(record: CallAnswered | ApprovalGiven | PauseEscalated, state: SessionState) -> bytes:
    """The envelope's end for what happened to a pause: the pause's input, whether an answer
    approved the call, and a quorum's count (the audit trail's story, without the state)."""
    pause = state.pauses[record.ref]
    tail = b',"input":' + _INPUT(pause.record.input) + b',"paused_at":' + _INPUT(pause.record.at)
    if pause.expires_at is not None:
        tail += b',"expires_at":' + _INPUT(pause.expires_at)
    if isinstance(record, CallAnswered) and approving(pause, record):
        tail += b',"approves":true'
    if isinstance(pause.record, ApprovalPaused):
        count = approvals_counted(record, pause) if isinstance(record, CallAnswered) else len(pause.approvals)
        tail += f',"count":{count},"required":{pause.record.approval.required}'.encode()
    return tail + b"}"


# The serializer itself, as in ``encode_record``: TypeAdapter's argument handling costs more than
# encoding a small input.
_INPUT = TypeAdapter(Any).serializer.to_json


def _json_string(text: str) -> bytes:
    """``text`` as ``json.dumps`` writes it (ASCII, escaped), without building an encoder per call:
    event bodies keep the bytes they always had (a list of strings: ``[`` + ``", "``-joined + ``]``)."""
    return encode_basestring_ascii(text).encode()


class ViewOf(Protocol):
    """An agent's view of a pause of a session of ``tenant`` (``Agent.view``), whose members it
    names as who may decide the pause."""

    def __call__(self, interrupt: PendingInterrupt, *, tenant: str | None) -> PauseView: ...


def _entry_json(
    record: CallAnswered | ApprovalGiven | CallDecided | GrantAdded | GrantRevoked | PauseEscalated,
    envelope: _Envelope,
    view: ViewOf | None,
) -> dict[str, Any]:
    """An event's audit entry, as the session's trail reads it (what the envelope kept of the
    state stands in for the state), with the pause's view when there is one."""
    entry = audit_entry(record)
    if envelope.input is not None:
        entry = replace(entry, input=envelope.input)
    if envelope.required:
        entry = replace(entry, approvals=envelope.count, required=envelope.required)
    if envelope.approves:
        entry = replace(entry, decision="approve")
    if envelope.grantor is not None:
        entry = replace(entry, principal=envelope.grantor)
    if envelope.paused_at is not None:
        entry = replace(entry, paused_at=envelope.paused_at, expires_at=envelope.expires_at)
    if envelope.tool is not None:
        entry = replace(entry, name=envelope.tool)
    shown: dict[str, Any] = dump(AUDIT, [entry])[0]
    shown["view"] = None
    if view is not None and entry.name and not isinstance(record, GrantAdded | GrantRevoked):
        shown["view"] = asdict(view(answered_pause(entry), tenant=envelope.tenant))
    return shown


def event_body(event: Event, view: ViewOf | None = None) -> dict[str, Any]:
    """The public JSON body of a stored event (what the feed and webhooks send); with ``view``
    (the event's agent's ``Agent.view``), a pause and an answer carry the pause's view (its
    session's tenant's members named as who may decide it, as the REST API names them). An
    answer's entry reads as the session's audit trail reads it."""
    envelope = _ENVELOPE.validate_json(event.data)
    record = envelope.record
    body: dict[str, Any] = {
        "id": event.id,
        "type": event.kind,
        "at": to_jsonable_python(event.at),  # as every other time in the API (UTC as Z)
        "agent": event.agent,
        "session_id": event.session_id,
        "owner": envelope.owner,
        "tenant": envelope.tenant,
    }
    match record:
        case CallPaused():
            pause = pending_interrupt(record)
            body["interrupt"] = dump(INTERRUPTS, [pause])[0]
            if view is not None:
                body["interrupt"]["view"] = asdict(view(pause, tenant=envelope.tenant))
        case TurnEnded():
            open_refs = envelope.open if envelope.open is not None else record.open_refs
            body.update(turn=record.turn, finish_reason=record.finish_reason, open_refs=open_refs, error=record.error)
        case CallAnswered() | ApprovalGiven() | CallDecided() | GrantAdded() | GrantRevoked() | PauseEscalated():
            body["entry"] = _entry_json(record, envelope, view)
        case _:  # no other record is announced (``_announced``)
            raise ValueError(f"an event of a {record.kind} record")
    return body
