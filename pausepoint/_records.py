"""The records of a session's append-only log, and their one JSON codec.

A session is nothing but these records in order. Every turn appends only the records it adds;
the session's state (``_session.SessionState``) is a fold over them. Tool messages are not
stored: they are derived when the last result of a batch of tool calls arrives, so a tool result
is written exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field, TypeAdapter

from ._messages import Message

__all__ = [
    "AbortRequested",
    "CallAnswered",
    "CallCompleted",
    "CallPaused",
    "Decision",
    "MessageAdded",
    "Record",
    "SessionStarted",
    "TurnEnded",
    "TurnStarted",
    "decode_record",
    "encode_record",
]

Decision: TypeAlias = Literal["respond", "deny", "restart", "cancel", "expire"]


@dataclass(slots=True)
class SessionStarted:
    agent: str
    owner: str | None
    at: datetime
    kind: Literal["session_started"] = "session_started"


@dataclass(slots=True)
class MessageAdded:
    """A user or model message (tool messages are derived, see module docstring).

    ``at`` is when the message was recorded: for a model message asking for tools, when its
    calls started running. A user message names its sender like an answer names who gave it:
    ``principal`` and ``via`` (None in logs written before senders were recorded).
    """

    message: Message
    at: datetime | None = None
    principal: str | None = None
    via: str | None = None
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
class CallAnswered:
    """An answer to a pause: the claim that makes it exactly-once, and its audit entry.

    ``ref`` is the id of the pause answered (``CallPaused.ref``), ``call_ref`` its call's ref.

    For every decision but ``restart`` the ``output`` is the call's result; a restart's result
    arrives later as ``CallCompleted`` or a new ``CallPaused``.
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
    """

    at: datetime
    principal: str | None = None
    message: Message | None = None
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
    | AbortRequested,
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
    )
}


_NO_SENDER = {"principal", "via"}


def encode_record(record: Record) -> bytes:
    """Serialise a record to the compact JSON a store keeps."""
    if type(record) is MessageAdded and record.via is None:  # a model message: no sender to keep
        return _ENCODERS[MessageAdded].to_json(record, exclude=_NO_SENDER)  # type: ignore[no-any-return]
    return _ENCODERS[type(record)].to_json(record)  # type: ignore[no-any-return]


def decode_record(data: bytes | str) -> Record:
    """Parse a record written by ``encode_record`` (by this or any other process)."""
    return _CODEC.validate_json(data)
