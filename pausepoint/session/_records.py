"""The records of a session's append-only log, and their one JSON codec.

A session is nothing but these records in order. Every turn appends only the records it adds;
the session's state (``_state.SessionState``) is a fold over them. Tool messages are not
stored: they are derived when the last result of a batch of tool calls arrives, so a tool result
is written exactly once.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field, TypeAdapter

from ..content._messages import Message
from ..errors import InvalidAnswer, InvalidMessage, ModelOutputError

__all__ = [
    "AbortRequested",
    "ApprovalGiven",
    "ApprovalPaused",
    "ApprovalRequest",
    "Approver",
    "CallAnswered",
    "CallCompleted",
    "CallDecided",
    "CallPaused",
    "Decision",
    "EscalationStep",
    "GrantAdded",
    "GrantRevoked",
    "MessageAdded",
    "PauseEscalated",
    "Record",
    "SessionStarted",
    "TurnEnded",
    "TurnStarted",
    "decode_record",
    "encode_record",
    "encoded_given",
    "encoded_reply",
    "new_ref",
]

Decision: TypeAlias = Literal["respond", "deny", "restart", "cancel", "expire"]


def new_ref() -> str:
    """A ref the runtime mints — for a tool call, a pause, a grant: unguessable, unique in
    practice (96 random bits). Hex, so a ref is safe anywhere: in a URL path, a file name, a
    command-line argument (a base64 ref could start with "-" and read as an option)."""
    return secrets.token_hex(12)


@dataclass(slots=True)
class SessionStarted:
    """A session began: its agent, its ``owner`` (the principal that created it, by the name
    its credentials give, unique within its tenant) and its ``tenant`` (the owner's; None: the
    session belongs to no tenant, as every session of a single-tenant setup)."""

    agent: str
    owner: str | None
    at: datetime
    tenant: str | None = None
    kind: Literal["session_started"] = "session_started"


@dataclass(slots=True)
class MessageAdded:
    """A user or model message (tool messages are derived, see module docstring).

    ``at`` is when the message was recorded: for a model message asking for tools, when its
    calls started running. A user message names its sender like an answer names who gave it:
    ``principal`` and ``via`` (None in logs written before senders were recorded), and the
    ``idempotency_key`` it was sent with, if any, with the ``request_hash`` a retry must match.
    """

    message: Message
    at: datetime | None = None
    principal: str | None = None
    via: str | None = None
    idempotency_key: str | None = None
    request_hash: str | None = None
    kind: Literal["message"] = "message"


@dataclass(slots=True)
class CallCompleted:
    """A tool call finished (normally or with an error handed to the model)."""

    call_ref: str
    name: str
    output: Any
    is_error: bool = False
    kind: Literal["call_completed"] = "call_completed"


@dataclass(slots=True)
class CallPaused:
    """A tool call paused.

    ``call_ref`` is the call's ref (the only ref callers see); ``ref`` is this pause's own id,
    minted by the runtime (``PendingInterrupt.pause_id``), telling apart the pauses of a call
    that paused again after a restart. Logs written before refs were per call showed ``ref``
    as the pause's ref; answers naming it are still understood (see ``_answers``).
    """

    ref: str
    call_ref: str
    name: str
    input: Any
    metadata: dict[str, Any] | None
    fingerprint: str
    turn: int
    at: datetime
    expires_at: datetime | None = None
    trace: str | None = None  # the pause span's context (W3C traceparent), when traced
    kind: Literal["call_paused"] = "call_paused"


@dataclass(slots=True)
class EscalationStep:
    """Who a pause is handed to when nobody decided it in time, and how long they then have."""

    to: list[str]
    ttl_seconds: float


@dataclass(slots=True)
class ApprovalRequest:
    """What deciding a pause takes, as the approval policy said when the call paused.

    ``required`` distinct approvals (a quorum when more than one); ``roles`` whose members may
    decide (None: whoever may answer the session); ``requester``, the principal who sent the
    message that led to the call, who may not approve it when ``separate`` (separation of
    duties); ``gated``: the runtime paused the call before it ran, so approving runs it with
    exactly the input shown; ``decisions`` that may be given; ``grantable``: an approval may
    grant later calls of the tool in the session; ``offer``: the grant a yes gives (an
    interrupt that approves the call it describes); ``rule``: the rule that asked for a
    person; ``escalation``: the steps left when nobody decides in time.
    """

    required: int = 1
    roles: list[str] | None = None
    requester: str | None = None
    separate: bool = False
    gated: bool = False
    decisions: list[str] = field(default_factory=lambda: ["approve", "edit", "deny", "respond"])
    grantable: bool = False
    offer: dict[str, Any] | None = None
    rule: str | None = None
    escalation: list[EscalationStep] = field(default_factory=list)


@dataclass(slots=True)
class ApprovalPaused(CallPaused):
    """A pause the approval policy governs: a call paused before it ran (``requires_approval``, a
    rule that asks), or any pause whose answer the policy constrains (roles, separation of
    duties, a grant offered). A kind of its own, so that a process too old to know approvals
    refuses to read the session rather than answer the pause without its policy."""

    kind: Literal["approval_paused"] = "approval_paused"  # type: ignore[assignment]
    approval: ApprovalRequest = field(default_factory=ApprovalRequest)


@dataclass(slots=True)
class Approver:
    """One approval counted towards a pause's quorum."""

    principal: str
    at: datetime
    via: str = "python"


@dataclass(slots=True)
class ApprovalGiven:
    """One person's approval of a pause that needs several: counted, and the pause stays open.

    The approval that completes the quorum is not one of these: it is the ``CallAnswered`` that
    resolves the pause (its ``approvals`` lists every approval counted), appended together with
    nothing else in between — the count and the resolution are one conditional append.
    """

    ref: str
    call_ref: str
    name: str
    at: datetime
    principal: str
    via: str = "python"
    metadata: dict[str, Any] | None = None
    idempotency_key: str | None = None
    request_hash: str | None = None
    kind: Literal["approval_given"] = "approval_given"


@dataclass(slots=True)
class CallDecided:
    """The approval policy decided a call without a person, before it ran: approved by a rule
    (``rule``) or by a grant (``grant``), or denied by a rule (its result, the denial the model
    sees, follows as ``CallCompleted``)."""

    call_ref: str
    name: str
    decision: Literal["approve", "deny"]
    at: datetime
    rule: str | None = None
    grant: str | None = None
    reason: str | None = None
    kind: Literal["call_decided"] = "call_decided"


@dataclass(slots=True)
class GrantAdded:
    """A person approved more than one call: later calls of ``tool`` in this session whose
    input is within ``bounds`` are approved by this grant (at most ``uses`` of them, until
    ``expires_at``; None: no limit). ``ref`` / ``call_ref`` name the pause whose answer gave it.
    ``roles``: those of the grantor's roles that approved ``tool`` when they gave it (None: no
    role decided it), read where who holds a role cannot be known later (a token's roles).
    """

    id: str
    tool: str
    at: datetime
    principal: str | None
    via: str = "python"
    bounds: dict[str, dict[str, Any]] | None = None
    uses: int | None = None
    expires_at: datetime | None = None
    ref: str = ""
    call_ref: str = ""
    roles: list[str] | None = None
    kind: Literal["grant_added"] = "grant_added"


@dataclass(slots=True)
class GrantRevoked:
    """The grant ``id`` approves nothing any more."""

    id: str
    at: datetime
    principal: str | None = None
    via: str = "python"
    reason: str = ""
    kind: Literal["grant_revoked"] = "grant_revoked"


@dataclass(slots=True)
class PauseEscalated:
    """Nobody decided the pause ``ref`` in time: it is handed to the members of ``to`` (they
    decide it now, in place of the roles before), until ``expires_at``."""

    ref: str
    call_ref: str
    name: str
    at: datetime
    to: list[str]
    expires_at: datetime
    level: int = 1
    kind: Literal["pause_escalated"] = "pause_escalated"


@dataclass(slots=True)
class CallAnswered:
    """An answer to a pause: the claim that makes it exactly-once, and its audit entry.

    ``ref`` is the id of the pause answered (``CallPaused.ref``), ``call_ref`` its call's ref.

    For every decision but ``restart`` the ``output`` is the call's result; a restart's result
    arrives later as ``CallCompleted`` or a new ``CallPaused``. ``approvals`` lists every
    approval counted when the answer completes a quorum, or those counted by then when a pause
    for approval is cancelled or expires (None otherwise).
    """

    ref: str
    call_ref: str
    name: str
    decision: Decision
    at: datetime
    principal: str | None = None
    via: str = "python"
    output: Any = None
    replace_input: Any = None
    resumed_metadata: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    reason: str | None = None
    idempotency_key: str | None = None
    request_hash: str | None = None
    approvals: list[Approver] | None = None
    kind: Literal["call_answered"] = "call_answered"


@dataclass(slots=True)
class TurnEnded:
    """The end of one call of send/resume/cancel: what it returned, replayable by idempotency key.

    ``open_refs`` are the ids of the pauses open at the end (``CallPaused.ref``). ``began`` and
    ``at`` are when the call began and ended; ``started`` is the version of the ``TurnStarted``
    record of the detached turn this ends. (Records written before these fields have none.)
    """

    turn: int
    finish_reason: str
    open_refs: list[str] = field(default_factory=list)
    error: str | None = None
    idempotency_key: str | None = None
    message_index: int | None = None
    began: datetime | None = None
    at: datetime | None = None
    started: int | None = None
    kind: Literal["turn_ended"] = "turn_ended"


@dataclass(slots=True)
class TurnStarted:
    """A detached turn began (``Chat.detach``); it runs in the background of the process that
    wrote this record, and its version names it (the turn id) until its ``TurnEnded``.

    ``message`` is the user message it was sent, if any: the history gets it with the model's
    first reply, as in any turn (a turn aborted or failed before that leaves the history as it was).
    ``idempotency_key`` (and the request's hash) is the key it was sent with: a retry with it,
    from any process, is told the turn runs (``ResumeInProgress``), then gets its outcome.
    """

    at: datetime
    principal: str | None = None
    message: Message | None = None
    idempotency_key: str | None = None
    request_hash: str | None = None
    kind: Literal["turn_started"] = "turn_started"


@dataclass(slots=True)
class AbortRequested:
    """Someone asked the detached turn ``turn`` (its ``TurnStarted`` version) to stop.

    The process running it sees this record (it polls for it, and a write of its own collides
    with it) and stops before its next model call, cancelling a model call in progress.
    """

    turn: int
    at: datetime
    principal: str | None = None
    via: str = "python"
    kind: Literal["abort_requested"] = "abort_requested"


Record: TypeAlias = Annotated[
    SessionStarted
    | MessageAdded
    | CallCompleted
    | CallPaused
    | CallAnswered
    | TurnEnded
    | TurnStarted
    | AbortRequested
    | ApprovalPaused
    | ApprovalGiven
    | CallDecided
    | GrantAdded
    | GrantRevoked
    | PauseEscalated,
    Field(discriminator="kind"),
]

_CODEC: TypeAdapter[Record] = TypeAdapter(Record)
# Encoding with the record's own type skips the union's search for the matching member; the
# serializer itself skips TypeAdapter's argument handling (a third of the cost of a small record).
_ENCODERS: dict[type[Any], Any] = {
    kind: TypeAdapter(kind).serializer
    for kind in (
        SessionStarted,
        MessageAdded,
        CallCompleted,
        CallPaused,
        CallAnswered,
        TurnEnded,
        TurnStarted,
        AbortRequested,
        ApprovalPaused,
        ApprovalGiven,
        CallDecided,
        GrantAdded,
        GrantRevoked,
        PauseEscalated,
    )
}


def encode_record(record: Record) -> bytes:
    """Serialise a record to the compact JSON a store keeps.

    Fields added since a kind was first written are left out while empty, so records that do
    not use them are byte for byte what earlier versions wrote.
    """
    return _ENCODE[type(record)](record)


def encoded_reply(record: MessageAdded, max_record_bytes: int) -> bytes:
    """The model's reply, encoded — or a ``ModelOutputError`` when its record would not fit the
    store's limit (each string under it, the whole over it: many long tool calls), so that the
    turn fails as on any reply it cannot record, before anything of it is written."""
    data = encode_record(record)
    if len(data) > max_record_bytes:
        raise ModelOutputError(
            f"the model's reply cannot be recorded: its record of {len(data)} bytes exceeds the store's limit "
            f"of {max_record_bytes} bytes",
            path="$",
            rule="max_record_bytes",
            limit=max_record_bytes,
        )
    return data


def encoded_given(record: Record, max_record_bytes: int) -> bytes:
    """A record of what a caller gave (their message, an answer), encoded — or, when it would not
    fit the store's limit (each string under it, the whole over it), the refusal of data no
    session can keep: ``InvalidMessage`` for a message, ``InvalidAnswer`` (naming the paused
    call's ``ref``) for an answer, each with ``path`` "$", ``rule`` "max_record_bytes" and the ``limit``,
    before anything is written — as ``encoded_reply`` refuses a model's reply. (Found by a probe:
    the store's ``PayloadTooLarge``, a ``StoreError``, came instead, with no rule.)"""
    data = encode_record(record)
    if len(data) <= max_record_bytes:
        return data
    said = f"cannot be recorded: its record of {len(data)} bytes exceeds the store's limit of {max_record_bytes} bytes"
    details: dict[str, Any] = {"path": "$", "rule": "max_record_bytes", "limit": max_record_bytes}
    if isinstance(record, MessageAdded | TurnStarted):
        raise InvalidMessage(f"the message {said}", **details)
    ref = getattr(record, "call_ref", None)  # the paused call's ref, as the caller names the pause
    raise InvalidAnswer(f"the answer {said}", **({"ref": ref} if isinstance(ref, str) else {}), **details)


_NO_SENDER = {"principal", "via", "idempotency_key", "request_hash"}
_NO_KEY = {"idempotency_key", "request_hash"}
_NO_APPROVALS = {"approvals"}
_NO_TENANT = {"tenant"}


def _message(record: MessageAdded) -> bytes:
    if record.via is None:  # a model message: no sender
        return _ENCODERS[MessageAdded].to_json(record, exclude=_NO_SENDER)  # type: ignore[no-any-return]
    if record.idempotency_key is None:  # sent without a key
        return _ENCODERS[MessageAdded].to_json(record, exclude=_NO_KEY)  # type: ignore[no-any-return]
    return _ENCODERS[MessageAdded].to_json(record)  # type: ignore[no-any-return]


def _answer(record: CallAnswered) -> bytes:
    if record.approvals is None:
        return _ENCODERS[CallAnswered].to_json(record, exclude=_NO_APPROVALS)  # type: ignore[no-any-return]
    return _ENCODERS[CallAnswered].to_json(record)  # type: ignore[no-any-return]


def _started(record: SessionStarted) -> bytes:
    if record.tenant is None:  # no tenant
        return _ENCODERS[SessionStarted].to_json(record, exclude=_NO_TENANT)  # type: ignore[no-any-return]
    return _ENCODERS[SessionStarted].to_json(record)  # type: ignore[no-any-return]


def _approval_paused(record: ApprovalPaused) -> bytes:
    return _ENCODERS[ApprovalPaused].to_json(record, exclude=_lean(record))  # type: ignore[no-any-return]


# Each kind's encoder, looked up by type: the kinds with fields left out while empty have their
# own; the others go straight to their serializer.
_ENCODE: dict[type[Any], Callable[[Any], bytes]] = {kind: serializer.to_json for kind, serializer in _ENCODERS.items()}
_ENCODE.update(
    {MessageAdded: _message, CallAnswered: _answer, SessionStarted: _started, ApprovalPaused: _approval_paused}
)


_REQUEST_DEFAULTS = {f.name: (f.default_factory() if callable(f.default_factory) else f.default)
                     for f in fields(ApprovalRequest)}  # fmt: skip


def _lean(record: ApprovalPaused) -> dict[str, Any]:
    """What an ``ApprovalPaused`` need not write: what is as its defaults say (a new kind: no
    reader expects those fields)."""
    request = record.approval
    exclude: dict[str, Any] = {"approval": {n for n, d in _REQUEST_DEFAULTS.items() if getattr(request, n) == d}}
    for name in ("expires_at", "trace"):
        if getattr(record, name) is None:
            exclude[name] = True
    return exclude


def decode_record(data: bytes | str) -> Record:
    """Parse a record written by ``encode_record`` (by this or any other process)."""
    return _CODEC.validator.validate_json(data)  # type: ignore[no-any-return]
