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
    "CallAnswered",
    "CallCompleted",
    "CallPaused",
    "Decision",
    "MessageAdded",
    "Record",
    "SessionStarted",
    "TurnEnded",
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
    calls started running.
    """

    message: Message
    at: datetime | None = None
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
    """A tool call paused; ``ref`` is the pause's own ref, minted by the runtime."""

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
    """The end of one call of send/resume/cancel: what it returned, replayable by idempotency key."""

    turn: int
    finish_reason: str
    open_refs: list[str] = field(default_factory=list)
    error: str | None = None
    idempotency_key: str | None = None
    message_index: int | None = None
    kind: Literal["turn_ended"] = "turn_ended"


Record: TypeAlias = Annotated[
    SessionStarted | MessageAdded | CallCompleted | CallPaused | CallAnswered | TurnEnded,
    Field(discriminator="kind"),
]

_CODEC: TypeAdapter[Record] = TypeAdapter(Record)
# Encoding with the record's own type skips the union's search for the matching member.
_ENCODERS: dict[type[Any], TypeAdapter[Any]] = {
    kind: TypeAdapter(kind)
    for kind in (SessionStarted, MessageAdded, CallCompleted, CallPaused, CallAnswered, TurnEnded)
}


def encode_record(record: Record) -> bytes:
    """Serialise a record to the compact JSON a store keeps."""
    return _ENCODERS[type(record)].dump_json(record)


def decode_record(data: bytes | str) -> Record:
    """Parse a record written by ``encode_record`` (by this or any other process)."""
    return _CODEC.validate_json(data)
