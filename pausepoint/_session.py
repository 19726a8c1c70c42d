"""A session's state: a pure fold over its log records.

Nothing here does I/O. ``SessionState.apply`` is the only way state changes, so a process that
reads the log from the store rebuilds exactly the state the writer had.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, overload

from ._messages import Message, ToolRequestPart, ToolResponsePart
from ._records import (
    CallAnswered,
    CallCompleted,
    CallPaused,
    MessageAdded,
    Record,
    SessionStarted,
    TurnEnded,
)
from .stores import SessionSummary

__all__ = ["Batch", "Call", "HistoryView", "Pause", "SessionState"]


class HistoryView(Sequence[Message]):
    """The first ``length`` messages of an append-only list, without copying it.

    A model request holds one of these: it costs the same whatever the history's length, and
    later appends to the session do not change what the request shows.
    """

    __slots__ = ("_length", "_messages")

    def __init__(self, messages: list[Message]) -> None:
        self._messages = messages
        self._length = len(messages)

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return self._messages[: self._length][index]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("history index out of range")
        return self._messages[index]

    def __repr__(self) -> str:
        return f"HistoryView({self._length} messages)"


@dataclass(slots=True)
class Call:
    """A tool call the model asked for. ``status`` is where its result stands."""

    request: ToolRequestPart
    turn: int
    status: Literal["running", "completed", "paused"] = "running"
    started_at: datetime | None = None  # when it last started running (None: not known)
    pause: str | None = None  # the id of its latest pause (``CallPaused.ref``), if it paused


@dataclass(slots=True)
class Pause:
    record: CallPaused
    answer: CallAnswered | None = None


@dataclass(slots=True)
class Batch:
    """The tool calls of the latest model message, until every one has a result."""

    refs: list[str]
    results: dict[str, ToolResponsePart] = field(default_factory=dict)


@dataclass(slots=True)
class KeyedOutcome:
    """What a resume with an idempotency key asked for, and how it ended (once it has)."""

    request_hash: str
    ended: TurnEnded | None = None
    ended_version: int = 0


class SessionState:
    """Everything the runtime needs to know about a session, folded from its records."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.version = 0
        self.durable_version = 0  # how many of the folded records the store holds
        self.agent = ""
        self.owner: str | None = None
        self.created_at: datetime | None = None
        self.turn = 0
        self.messages: list[Message] = []
        self.calls: dict[str, Call] = {}
        self.pauses: dict[str, Pause] = {}
        self.open: dict[str, Pause] = {}
        self.batch: Batch | None = None
        self.awaiting_model = False
        self.audit: list[CallAnswered] = []
        self.keys: dict[str, KeyedOutcome] = {}
        self.last_end: TurnEnded | None = None
        self.last_end_version = 0

    # -- the fold -------------------------------------------------------------------------------

    def apply(self, record: Record) -> None:
        self.version += 1
        if isinstance(record, MessageAdded):
            self._add_message(record.message, record.at)
        elif isinstance(record, CallCompleted):
            call = self.calls[record.call_ref]
            call.status = "completed"
            self._add_result(call, record.output, record.is_error)
        elif isinstance(record, CallPaused):
            pause = Pause(record)
            self.pauses[record.ref] = pause
            self.open[record.ref] = pause
            call = self.calls[record.call_ref]
            call.status = "paused"
            call.pause = record.ref
        elif isinstance(record, CallAnswered):
            self._answer(record)
        elif isinstance(record, TurnEnded):
            self.last_end = record
            self.last_end_version = self.version
            if record.idempotency_key is not None:
                keyed = self.keys[record.idempotency_key]
                keyed.ended, keyed.ended_version = record, self.version
            else:  # an unkeyed end (e.g. recovery after a crash) ends every keyed call still open
                for outcome in self.keys.values():
                    if outcome.ended is None:
                        outcome.ended, outcome.ended_version = record, self.version
        elif isinstance(record, SessionStarted):
            self.agent = record.agent
            self.owner = record.owner
            self.created_at = record.at

    def _add_message(self, message: Message, at: datetime | None) -> None:
        self.messages.append(message)
        if message.role == "user":
            self.turn += 1
            self.awaiting_model = False
        elif message.role == "model":
            self.awaiting_model = False
            requests = message.tool_requests
            if requests:
                self.batch = Batch([r.ref for r in requests])
                for request in requests:
                    self.calls[request.ref] = Call(request, self.turn, started_at=at)

    def _add_result(self, call: Call, output: Any, is_error: bool) -> None:
        batch = self.batch
        if batch is None:
            raise ValueError(f"result for call {call.request.ref!r} outside a batch")
        request = call.request
        batch.results[request.ref] = ToolResponsePart(
            request.name, output, request.ref, call_id=request.call_id, is_error=is_error
        )
        if len(batch.results) == len(batch.refs):
            # The last result derives the tool message; the model loop may continue.
            self.messages.append(Message("tool", [batch.results[ref] for ref in batch.refs]))
            self.batch = None
            self.awaiting_model = True

    def _answer(self, record: CallAnswered) -> None:
        pause = self.pauses[record.ref]
        pause.answer = record
        self.open.pop(record.ref, None)
        self.audit.append(record)
        if record.idempotency_key is not None and record.idempotency_key not in self.keys:
            self.keys[record.idempotency_key] = KeyedOutcome(record.request_hash or "")
        call = self.calls[record.call_ref]
        if record.decision == "restart":
            call.status = "running"
            call.started_at = record.at
        else:
            call.status = "completed"
            self._add_result(call, record.output, False)

    # -- questions ------------------------------------------------------------------------------

    @property
    def running(self) -> list[str]:
        """Refs of calls in the current batch that have neither a result nor an open pause."""
        if self.batch is None:
            return []
        return [r for r in self.batch.refs if r not in self.batch.results and self.calls[r].status == "running"]

    def abandoned(self, now: datetime, after: timedelta) -> list[Call] | None:
        """The running calls of the batch, if every one of them started longer than ``after``
        ago (their process is presumed gone); None while any may still be running somewhere."""
        calls = [self.calls[ref] for ref in self.running]
        if any(c.started_at is not None and now - c.started_at < after for c in calls):
            return None
        return calls

    def open_refs(self) -> list[str]:
        """The refs of the calls paused now (each call's ref, as every surface shows it)."""
        return [p.record.call_ref for p in self.open.values()]

    def expired(self, now: datetime) -> list[Pause]:
        return [p for p in self.open.values() if p.record.expires_at is not None and p.record.expires_at <= now]

    def last_model_index(self) -> int | None:
        for index in range(len(self.messages) - 1, -1, -1):
            if self.messages[index].role == "model":
                return index
        return None

    def summary(self, now: datetime) -> SessionSummary:
        expiries = [p.record.expires_at for p in self.open.values() if p.record.expires_at is not None]
        return SessionSummary(
            session_id=self.session_id,
            agent=self.agent,
            owner=self.owner,
            version=self.version,
            created_at=self.created_at or now,
            updated_at=now,
            pending=len(self.open),
            next_expiry=min(expiries) if expiries else None,
            turn=self.turn,
        )
