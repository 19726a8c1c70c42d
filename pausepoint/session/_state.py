"""A session's state: a pure fold over its log records.

Nothing here does I/O. ``SessionState.apply`` is the only way state changes, so a process that
reads the log from the store rebuilds exactly the state the writer had.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, assert_never, overload

from ..content._messages import Message, ToolRequestPart, ToolResponsePart
from ..stores import SessionSummary
from ._grants import GrantStatus
from ._records import (
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

__all__ = [
    "AuditRecord",
    "Batch",
    "Call",
    "Detached",
    "GrantState",
    "HistoryView",
    "Pause",
    "SessionState",
]

# The finish reasons of a turn that did not finish: a Genkit client continues from the turn before.
_UNFINISHED = frozenset({"failed", "aborted"})

# What the audit trail lists: every answer, approval, policy decision, grant, escalation, message.
AuditRecord = CallAnswered | MessageAdded | ApprovalGiven | CallDecided | GrantAdded | GrantRevoked | PauseEscalated


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
    approved: Any = None  # the input it was approved to run with (by a person, a rule or a grant)
    # Whether its pauses did not all show the same input and metadata: an answer naming it by
    # its ref alone may then be meant for an earlier pause, and must name the pause it answers.
    changed: bool = False


@dataclass(slots=True)
class Pause:
    """A pause and what happened to it: its answer, the approvals counted so far (with the
    version of each), and — after escalations — who decides it now and until when."""

    record: CallPaused | ApprovalPaused  # both named: a checkpoint restores the kind it was
    answer: CallAnswered | None = None
    approvals: list[tuple[int, ApprovalGiven]] = field(default_factory=list)
    expires_at: datetime | None = None
    roles: list[str] | None = None
    level: int = 0

    def approved_by(self, until: int | None = None) -> list[str]:
        """The principals whose approvals are counted (those recorded up to version ``until``)."""
        return [a.principal for version, a in self.approvals if until is None or version <= until]


@dataclass(slots=True)
class GrantState:
    """A grant, how many calls it approved, and its revocation."""

    record: GrantAdded
    used: int = 0
    revoked: GrantRevoked | None = None

    def status(self, now: datetime) -> GrantStatus:
        """Whether it approves calls now ("active"), or why not."""
        added = self.record
        if self.revoked is not None:
            return "revoked"
        if added.uses is not None and self.used >= added.uses:
            return "used"
        if added.expires_at is not None and added.expires_at <= now:
            return "expired"
        return "active"

    def active(self, now: datetime) -> bool:
        return self.status(now) == "active"


@dataclass(slots=True)
class Batch:
    """The tool calls of the latest model message, until every one has a result."""

    refs: list[str]
    results: dict[str, ToolResponsePart] = field(default_factory=dict)


@dataclass(slots=True)
class Detached:
    """A detached turn: its start (``version`` is its id), the abort asked of it, its end."""

    version: int
    started: TurnStarted
    abort: AbortRequested | None = None
    end: TurnEnded | None = None
    end_version: int = 0
    sent: bool = False  # whether the message it was sent is in the history yet


@dataclass(slots=True)
class KeyedOutcome:
    """What a message or resume sent with an idempotency key asked for, and how it ended (once
    it has)."""

    request_hash: str
    ended: TurnEnded | None = None
    ended_version: int = 0


@dataclass(eq=False, repr=False)  # identity equality, and no repr of a whole history
class SessionState:
    """Everything the runtime needs to know about a session, folded from its records.

    A dataclass so that its shape is declared in one place: the checkpoint codec
    (``_checkpoint``) derives its format and its schema fingerprint from these fields. Fields
    marked ``transient`` are this process's bookkeeping, never written to a checkpoint.
    """

    session_id: str
    version: int = 0
    # How many of the folded records the store holds: the journal's bookkeeping, not the session's.
    durable_version: int = field(default=0, metadata={"transient": True})
    agent: str = ""
    owner: str | None = None
    tenant: str | None = None
    created_at: datetime | None = None
    turn: int = 0
    messages: list[Message] = field(default_factory=list)
    calls: dict[str, Call] = field(default_factory=dict)
    pauses: dict[str, Pause] = field(default_factory=dict)
    open: dict[str, Pause] = field(default_factory=dict)
    batch: Batch | None = None
    awaiting_model: bool = False
    mid_turn: bool = False  # results await the model and no end was recorded since: a turn is mid-way
    audit: list[AuditRecord] = field(default_factory=list)
    keys: dict[str, KeyedOutcome] = field(default_factory=dict)
    unended_keys: tuple[str, ...] = ()  # the keys whose outcome has not ended (what an unkeyed end ends)
    last_end: TurnEnded | None = None
    last_end_version: int = 0
    end_versions: list[int] = field(default_factory=list)  # where every TurnEnded is in the log, in order
    end_reasons: list[str] = field(default_factory=list)  # and the finish reason of each
    detached: dict[int, Detached] = field(default_factory=dict)
    running_turn: Detached | None = None  # the detached turn that has not ended, if any
    last_activity: datetime | None = None  # the latest time a turn recorded doing something
    requester: str | None = None  # who sent the latest user message (calls it leads to are theirs)
    grants: dict[str, GrantState] = field(default_factory=dict)
    live_grants: tuple[str, ...] = ()  # the grants neither revoked nor used up, oldest first

    # -- the fold -------------------------------------------------------------------------------

    def apply(self, record: Record) -> None:
        """Fold one record in: the only way the state changes. Every record kind is matched
        here, exhaustively (a kind added to ``Record`` and forgotten fails the type check)."""
        self.version += 1
        match record:  # the commonest kinds first: a case costs a test per kind before it
            case MessageAdded():
                self._message(record)
            case CallCompleted():
                call = self.calls[record.call_ref]
                call.status = "completed"
                self._add_result(call, record.output, record.is_error)
            case TurnEnded():
                self._ended(record)
            case CallPaused():  # an ApprovalPaused too
                self._paused(record)
            case CallAnswered():
                self._answer(record)
                self._active(record.at)
            case CallDecided():
                self._decided(record)
            case GrantAdded():
                self.grants[record.id] = GrantState(record)
                self.live_grants += (record.id,)
                self.audit.append(record)
            case SessionStarted():
                self.agent, self.owner, self.created_at = record.agent, record.owner, record.at
                self.tenant = record.tenant
                self._active(record.at)
            case ApprovalGiven():
                self.pauses[record.ref].approvals.append((self.version, record))
                self.audit.append(record)
                self._keyed(record.idempotency_key, record.request_hash)
                self._active(record.at)
            case TurnStarted():
                self.running_turn = self.detached[self.version] = Detached(self.version, record)
                self._active(record.at)
                self._keyed(record.idempotency_key, record.request_hash)
            case AbortRequested():
                target = self.detached.get(record.turn)
                if target is not None and target.abort is None:
                    target.abort = record
            case GrantRevoked():
                self.grants[record.id].revoked = record
                self.live_grants = _without(self.live_grants, record.id)
                self.audit.append(record)
            case PauseEscalated():
                handed = self.pauses[record.ref]
                handed.roles, handed.expires_at, handed.level = list(record.to), record.expires_at, record.level
                self.audit.append(record)
                self._active(record.at)
            case _:
                assert_never(record)

    def _message(self, record: MessageAdded) -> None:
        self._add_message(record.message, record.at)
        self._active(record.at)
        if record.message.role == "user":
            self.audit.append(record)  # who sent it: the audit trail names every sender
            self.requester = record.principal
            if self.running_turn is not None:
                self.running_turn.sent = True
            self._keyed(record.idempotency_key, record.request_hash)

    def _paused(self, record: CallPaused) -> None:
        pause = Pause(record, expires_at=record.expires_at)
        if isinstance(record, ApprovalPaused):
            pause.roles = record.approval.roles
        call = self.calls[record.call_ref]
        if call.pause is not None and not call.changed:
            shown = self.pauses[call.pause].record
            call.changed = shown.input != record.input or shown.metadata != record.metadata
        self.pauses[record.ref] = pause
        self.open[record.ref] = pause
        call.status = "paused"
        call.pause = record.ref
        self._active(record.at)

    def _ended(self, record: TurnEnded) -> None:
        self.last_end = record
        self.last_end_version = self.version
        self.mid_turn = False
        self.end_versions.append(self.version)
        self.end_reasons.append(record.finish_reason)
        self._active(record.at)
        detached = self.detached.get(record.started) if record.started is not None else None
        if detached is not None:
            detached.end, detached.end_version = record, self.version
            if self.running_turn is detached:
                self.running_turn = None
        # Every keyed call still open joined this turn: the end is its outcome too — a keyed
        # answer another process's answer completed the batch of (its call gave this end),
        # a keyed call a recovery ended.
        ended = self.unended_keys if record.idempotency_key is None else (*self.unended_keys, record.idempotency_key)
        for key in ended:
            outcome = self.keys[key]
            outcome.ended, outcome.ended_version = record, self.version
        self.unended_keys = ()

    def _decided(self, record: CallDecided) -> None:
        if record.decision == "approve":
            call = self.calls[record.call_ref]
            call.approved = call.request.input
        if record.grant is not None:
            grant = self.grants[record.grant]
            grant.used += 1
            if grant.record.uses is not None and grant.used >= grant.record.uses:
                self.live_grants = _without(self.live_grants, record.grant)
        self.audit.append(record)
        self._active(record.at)

    def _active(self, at: datetime | None) -> None:
        if at is not None and (self.last_activity is None or at > self.last_activity):
            self.last_activity = at

    def _add_message(self, message: Message, at: datetime | None) -> None:
        self.messages.append(message)
        if message.role == "user":
            self.turn += 1
            self.awaiting_model = self.mid_turn = False
        elif message.role == "model":
            self.awaiting_model = self.mid_turn = False
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
            self.awaiting_model = self.mid_turn = True

    def _answer(self, record: CallAnswered) -> None:
        pause = self.pauses[record.ref]
        pause.answer = record
        self.open.pop(record.ref, None)
        self.audit.append(record)
        self._keyed(record.idempotency_key, record.request_hash)
        call = self.calls[record.call_ref]
        if record.decision == "restart":
            call.status = "running"
            call.started_at = record.at
            paused = pause.record
            if isinstance(paused, ApprovalPaused) and paused.approval.gated:
                call.approved = paused.input if record.replace_input is None else record.replace_input
        else:
            call.status = "completed"
            self._add_result(call, record.output, False)

    def _keyed(self, key: str | None, request_hash: str | None) -> None:
        if key is not None and key not in self.keys:
            self.keys[key] = KeyedOutcome(request_hash or "")
            self.unended_keys += (key,)

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
        return [p.record.call_ref for p in self.open_in_call_order()]

    def open_in_call_order(self) -> list[Pause]:
        """The pauses open now, in the order the model asked for their calls: a call that paused
        again (a restart) keeps its place before the calls asked after it, though its new pause
        came last. What every surface lists (``open`` itself keeps the order they paused in)."""
        pauses = list(self.open.values())
        if len(pauses) > 1 and self.batch is not None:
            position = {ref: i for i, ref in enumerate(self.batch.refs)}
            pauses.sort(key=lambda pause: position.get(pause.record.call_ref, len(position)))
        return pauses

    def expired(self, now: datetime) -> list[Pause]:
        return [p for p in self.open.values() if p.expires_at is not None and p.expires_at <= now]

    def parent_end(self, version: int) -> int | None:
        """The version of the last turn end before ``version`` (a snapshot's parent), if any."""
        index = bisect_left(self.end_versions, version)
        return self.end_versions[index - 1] if index > 0 else None

    def first_end_after(self, version: int) -> int | None:
        """The version of the first turn end after ``version``, if any."""
        index = bisect_right(self.end_versions, version)
        return self.end_versions[index] if index < len(self.end_versions) else None

    def end_reason(self, version: int) -> str | None:
        """The finish reason of the turn end at ``version``; None if no turn ended there."""
        index = bisect_left(self.end_versions, version)
        if index < len(self.end_versions) and self.end_versions[index] == version:
            return self.end_reasons[index]
        return None

    def ended_unfinished_since(self, version: int) -> bool:
        """Whether every turn that ended after the turn end at ``version`` ended ``failed`` or
        ``aborted`` (and at least one did): ``version`` is then the latest turn that finished."""
        index = bisect_left(self.end_versions, version)
        if index >= len(self.end_versions) or self.end_versions[index] != version:
            return False
        later = self.end_reasons[index + 1 :]
        return bool(later) and all(reason in _UNFINISHED for reason in later)

    def still(self, now: datetime, after: timedelta) -> bool:
        """Whether nothing was recorded in the session for ``after`` (``Agent.abandon_after``):
        whatever process was working on it is presumed gone."""
        return self.last_activity is None or now - self.last_activity >= after

    def lost(self, now: datetime, after: timedelta) -> bool:
        """Whether the running detached turn is presumed lost with its process: nothing was
        recorded in the session for ``after`` (``Agent.abandon_after``)."""
        return self.running_turn is not None and self.still(now, after)

    def last_model_index(self) -> int | None:
        for index in range(len(self.messages) - 1, -1, -1):
            if self.messages[index].role == "model":
                return index
        return None

    def summary(self, now: datetime) -> SessionSummary:
        """The session's summary as of ``now`` (made on every append: its fields are given by
        position, which costs much less than by keyword, and no expiry is looked for while no
        call is paused)."""
        paused = self.open
        expiries = [p.expires_at for p in paused.values() if p.expires_at is not None] if paused else None
        return SessionSummary(
            self.session_id,
            self.agent,
            self.owner,
            self.version,
            self.created_at or now,  # created_at
            now,  # updated_at
            len(paused),  # pending
            min(expiries) if expiries else None,  # next_expiry
            self.turn,
            self.tenant,
        )

def _without(keys: tuple[str, ...], key: str) -> tuple[str, ...]:
    return tuple(k for k in keys if k != key) if key in keys else keys
