"""``Chat``: the calls a caller makes on one session — send, resume, cancel, and reads."""

from __future__ import annotations

import asyncio
import functools
import re
import secrets
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from ..approval._answers import (
    AnswerContext,
    call_name,
    check_answers,
    escalations_due,
    expiry_claims,
    prepare_answers,
    request_hash,
)
from ..approval._approve import approval_by_ref
from ..content._intake import user_message
from ..content._jsondata import NotJsonData, json_text
from ..content._messages import Message, Part
from ..errors import (
    ConcurrentUpdate,
    GrantNotFound,
    IdempotencyKeyReused,
    InvalidAnswer,
    InvalidMessage,
    InvalidSessionId,
    NothingToResume,
    PendingInterrupts,
    ResumeInProgress,
    SessionNotFound,
    TurnInProgress,
    VersionConflict,
)
from ..session._grants import Grant, GrantInfo, grant_info
from ..session._interrupts import AuditEntry, PendingInterrupt, ToolResponse, ToolRestart
from ..session._records import (
    CallAnswered,
    GrantRevoked,
    MessageAdded,
    Record,
    SessionStarted,
    TurnStarted,
    decode_record,
    encode_record,
)
from ..session._response import AgentFinishReason, AgentResponse
from ..session._state import Call, SessionState
from ..session._views import audit_entry, pending_interrupt, response_for
from ..stores import LogEntry
from ..turn._streaming import Emit, TurnStream
from ..turn._turn import Turn
from ._detach import DetachedTurn, Launch, TurnStatus, abort_turn, end_status, lost_turn_end
from ._sync import SyncChat

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["Chat", "answer_by_ref", "check_session_id"]

_CLAIM_ATTEMPTS = 20

# A caller-chosen session id: safe in a URL path and on a command line (no leading "-" or ".").
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")

T = TypeVar("T")

#: an answer to the call a ref names, built from the name of the call's tool (``""``: no such call)
BuildAnswer = Callable[[str], ToolResponse | ToolRestart]


class Chat:
    """One session of an agent. Get one with ``agent.chat()`` or ``agent.chat(session_id=...)``.

    ``Chat(agent, session_id, principal, new=True)`` is for servers that let a caller name a
    new session: the first call creates it and never continues an existing one — if the id is
    taken (even meanwhile), it raises ``SessionNotFound``, as for a session the caller cannot see.
    """

    def __init__(self, agent: Agent, session_id: str | None, principal: str | None, *, new: bool = False) -> None:
        self.agent = agent
        # A new session: nothing to read before the first append (at version 0, which fails if
        # the id was taken meanwhile). With a caller's id, the id must not exist yet (``new``).
        self._is_new = session_id is None or new
        self._create_only = new
        # 128 random bits in hex: safe in URLs and on command lines (never starts with "-").
        self.session_id = session_id if session_id is not None else secrets.token_hex(16)
        self.principal = principal
        if new:
            check_session_id(self.session_id)

    def __repr__(self) -> str:
        return f"<Chat {self.agent.name} session={self.session_id}>"

    @property
    def sync(self) -> SyncChat:
        """This chat without ``await`` — for notebooks and synchronous code (see ``SyncChat``):
        ``agent.chat().sync.send("...")``. Works inside a running event loop (a Jupyter cell) too."""
        return SyncChat(self)

    # -- turns ----------------------------------------------------------------------------------

    async def send(
        self, message: str | Message | Sequence[Part], *, principal: str | None = None, via: str = "python"
    ) -> AgentResponse:
        """Send a user message and run the model (and tools) until it answers or a call pauses.

        The audit trail records who sent it (``principal``, or the chat's) and through what
        (``via``). Raises ``PendingInterrupts`` (nothing written) while calls of the last turn
        are paused and not expired: answer them with ``resume`` or drop them with
        ``cancel_pending``. Raises ``InvalidMessage`` (nothing written) for a message that is
        not text and media parts a session can keep (see ``JsonLimits``).
        """
        return await self._send(self._user_message(message, principal, via), principal, via, None)

    def send_stream(
        self, message: str | Message | Sequence[Part], *, principal: str | None = None, via: str = "python"
    ) -> TurnStream:
        """``send``, streamed: iterate the returned stream for chunks; ``await stream.response``."""
        user = self._user_message(message, principal, via)
        return self._stream(lambda emit: self._send(user, principal, via, emit))

    async def resume(
        self,
        *,
        respond: Sequence[ToolResponse] = (),
        restart: Sequence[ToolRestart] = (),
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        principal: str | None = None,
        via: str = "python",
    ) -> AgentResponse:
        """Answer paused calls, then continue the turn once every paused call is answered.

        Each answer must name a call paused now in this session; otherwise the whole resume is
        refused with a ``ResumeRefused`` subclass and nothing runs or is recorded. A call is
        answered at most once, even across processes (``AlreadyResolved``). A retry with the
        same ``idempotency_key`` by the same principal returns the first call's response; the key
        sent with another request or by another principal raises ``IdempotencyKeyReused``
        (nothing recorded). An empty resume continues a
        turn whose answers are all in (after a crash, say) and is refused while calls are paused.

        The agent's ``ApprovalPolicy`` decides who may answer what: ``principal`` (or the
        chat's) must hold a role that decides the pause (``ApprovalForbidden``), may not approve
        a call they asked for under separation of duties, and counts once towards a quorum
        (``AlreadyApproved``); an approval that is not the last one a call needs is recorded
        and the call stays paused (``res.interrupts`` shows it, "1 of 2 approvals").
        """
        return await self._resume(respond, restart, metadata, idempotency_key, principal, via, None)

    def resume_stream(
        self,
        *,
        respond: Sequence[ToolResponse] = (),
        restart: Sequence[ToolRestart] = (),
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        principal: str | None = None,
        via: str = "python",
    ) -> TurnStream:
        """``resume``, streamed (see ``send_stream``)."""
        return self._stream(
            lambda emit: self._resume(respond, restart, metadata, idempotency_key, principal, via, emit)
        )

    async def approve(
        self,
        ref: str,
        *,
        replace_input: Any = ...,
        grant: Grant | None = None,
        pause_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        principal: str | None = None,
        via: str = "python",
    ) -> AgentResponse:
        """Approve the paused call ``ref`` (``PendingInterrupt.ref``) in one call, as the console's
        Approve does (``agent.approval``): a yes fitted to an interrupt-only tool's output schema,
        or a run with ``resumed_metadata={"tool_approved": True}`` for a tool that paused itself
        or was paused for approval. Then the turn continues, as with ``resume``.

        The pause is looked up under the session's lock, in the operation that records the
        answer: of two approvers racing, in one process or several, exactly one resolves it.
        ``pause_id`` approves that pause of the call only; without it, the ref stands for the
        pause live now unless the call paused again showing another input or metadata than an
        earlier pause (``PauseChanged``, naming the live pause: the approver may have seen the
        earlier one). ``replace_input`` approves an edited input instead — for tools defined
        with ``allow_input_edits=True``; None is no input (``InvalidAnswer``). ``grant``
        approves later calls too (``Grant``).
        ``metadata``, ``idempotency_key``, ``principal`` and ``via`` are ``resume``'s: a retry
        with the same key returns the first call's response, and the approval policy decides
        who may approve (an approval that is not the last one a quorum needs is recorded and
        the call stays paused).

        Raises what ``resume`` raises for a pause that is not open now (``AlreadyResolved``,
        ``UnknownInterrupt``, ``NotPaused``, ...) and for an approver the policy refuses;
        ``InvalidAnswer`` when a yes cannot answer the tool (answer it with ``resume``);
        ``InputEditNotAllowed`` for an edited input of a tool that only asks a question.
        ``resume(restart=[pause.restart(...)])`` remains the Genkit-compatible way to answer.
        """
        build = self._approval(ref, replace_input, grant, pause_id)
        return await self._resume((), (), metadata, idempotency_key, principal, via, None, by_ref=(ref, build))

    def approve_stream(
        self,
        ref: str,
        *,
        replace_input: Any = ...,
        grant: Grant | None = None,
        pause_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        principal: str | None = None,
        via: str = "python",
    ) -> TurnStream:
        """``approve``, streamed (see ``send_stream``)."""
        build = self._approval(ref, replace_input, grant, pause_id)
        return self._stream(
            lambda emit: self._resume((), (), metadata, idempotency_key, principal, via, emit, by_ref=(ref, build))
        )

    async def cancel_pending(self, reason: str, *, principal: str | None = None, via: str = "python") -> AgentResponse:
        """Resolve every paused call as cancelled, so the history stays valid and ``send`` works.

        The model sees ``{"cancelled": True, "reason": reason}`` as each call's result; the audit
        trail records ``principal`` and the channel ``via``. Raises ``NothingToResume`` when
        nothing is paused, ``InvalidAnswer`` for a reason (or principal) a session cannot keep.
        """
        try:
            json_text(reason, self.agent.json_limits, path="$.reason")
            if principal is not None:
                json_text(principal, self.agent.json_limits, path="$.principal", name=True)
        except NotJsonData as exc:
            raise InvalidAnswer(f"the cancellation cannot be recorded: {exc}", **exc.details()) from None

        async def op(state: SessionState) -> AgentResponse:
            now = self.agent.clock()
            self._check_free(state, now)
            if not state.open:
                raise NothingToResume(f"nothing is paused in session {self.session_id!r}")
            claims = [
                CallAnswered(
                    ref=p.record.ref,
                    call_ref=p.record.call_ref,
                    name=p.record.name,
                    decision="cancel",
                    at=now,
                    principal=principal or self.principal,
                    via=via,
                    output={"cancelled": True, "reason": reason},
                    reason=reason,
                )
                for p in state.open.values()
            ]
            turn = self._turn(state, principal, None)
            self._end_lost_turn(turn, now)
            turn.journal.add(*claims)
            return await turn.end(AgentFinishReason.ABORTED)

        return await self._locked(op, operation="cancel")

    async def detach(
        self,
        message: str | Message | Sequence[Part] | None = None,
        *,
        respond: Sequence[ToolResponse] = (),
        restart: Sequence[ToolRestart] = (),
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        principal: str | None = None,
        via: str = "python",
    ) -> DetachedTurn:
        """Start a turn — a message sent, or answers given — that runs in the background.

        Returns once the turn is recorded as running (every process sees it: ``status()`` is
        ``pending``, other calls on the session get ``TurnInProgress``); its result lands in the
        session like any turn's. Refusals (``PendingInterrupts``, a ``ResumeRefused``) are raised
        here, with nothing written. ``DetachedTurn.abort()`` or ``chat.abort()`` stops it, from
        any process. Needs a store shared by the processes that should see it.
        """
        if (message is None) == (not respond and not restart):
            raise ValueError("detach() takes a message, or answers (respond= / restart=), not both or neither")
        launch = Launch(self)
        if message is not None:
            user = self._user_message(message, principal, via)
            run = self._send(user, principal, via, None, launch)
        else:
            run = self._resume(respond, restart, metadata, idempotency_key, principal, via, None, launch)
        task = asyncio.ensure_future(run)
        self.agent.sessions.keep(task)
        launch.running.task = task
        waiting: set[asyncio.Future[Any]] = {launch.started, task}
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if not launch.started.done():
            launch.started.cancel()
            task.result()  # the refusal, raised here
            raise AssertionError("a detached turn ended without starting")
        return DetachedTurn(self, launch.started.result(), task)

    async def abort(self, *, principal: str | None = None, via: str = "python") -> TurnStatus | None:
        """Stop the session's detached turn, from any process; returns its status before the call.

        ``pending``: it was running and stops now (a model call in progress is cancelled, no tool
        starts any more, a tool already running finishes and is recorded; it ends ``aborted``).
        ``expired``: its process was presumed lost (the next call on the session ends it).
        Otherwise the status of the session's last turn, unchanged (None: no turn yet).
        """
        state = await self._read()
        if state.running_turn is not None:
            return await abort_turn(self, state.running_turn.version, principal, via)
        return None if state.last_end is None else end_status(state.last_end.finish_reason)

    async def settle_expired(self) -> AgentResponse | None:
        """Resolve this session's expired pauses by the agent's expiry policy.

        When that answers the last paused call, the turn continues (the model sees the denial).
        Returns None when nothing had expired, or while a detached turn runs in the session.
        """
        if self.agent.sessions.running(self.session_id) is not None:
            return None

        async def op(state: SessionState) -> AgentResponse | None:
            now = self.agent.clock()
            if state.running_turn is not None and not state.lost(now, self.agent.abandon_after):
                return None
            claims: list[Record] = [
                *escalations_due(state, now),
                *expiry_claims(state, now, self.agent.on_expiry, limits=self.agent.json_limits),
            ]
            if not claims:
                return None
            turn = self._turn(state, None, None)
            self._end_lost_turn(turn, now)
            turn.journal.add(*claims)
            await turn.journal.flush(self.agent.clock(), durable=False)  # a claim (see Journal)
            return await turn.proceed()

        return await self._locked(op, operation="settle_expired")

    # -- reads ----------------------------------------------------------------------------------

    async def interrupts(self) -> list[PendingInterrupt]:
        """The calls paused now, in the order the model asked for them."""
        state = await self._read()
        return [pending_interrupt(p.record, p) for p in state.open.values()]

    async def history(self) -> list[Message]:
        """The conversation as the model sees it."""
        return list((await self._read()).messages)

    async def audit_trail(self) -> list[AuditEntry]:
        """Every answer given and every user message sent in this session, oldest first — and
        every decision the approval policy made: approvals counted, calls approved or denied by
        a rule or a grant, grants given and revoked, pauses escalated."""
        state = await self._read()
        return [audit_entry(r, state) for r in state.audit]

    async def grants(self) -> list[GrantInfo]:
        """The grants given in this session (active, revoked, expired or used up), oldest first."""
        state = await self._read()
        now = self.agent.clock()
        return [grant_info(g, now) for g in state.grants.values()]

    async def revoke_grant(
        self, grant_id: str, *, reason: str = "", principal: str | None = None, via: str = "python"
    ) -> GrantInfo:
        """Make the grant ``grant_id`` approve nothing more, from any process; returns it as it
        now stands. Revoking a grant revoked already changes nothing. A turn using the grant
        at this moment either wrote its approval first (that call was approved) or fails with
        ``ConcurrentUpdate`` before its call runs. Raises ``GrantNotFound``; ``InvalidAnswer``
        for a reason or principal a session cannot keep."""
        actor = principal or self.principal
        try:
            json_text(reason, self.agent.json_limits, path="$.reason")
            json_text(via, self.agent.json_limits, path="$.via", name=True)
            if actor is not None:
                json_text(actor, self.agent.json_limits, path="$.principal", name=True)
        except NotJsonData as exc:
            raise InvalidAnswer(f"the revocation cannot be recorded: {exc}", **exc.details()) from None
        agent = self.agent
        for _ in range(_CLAIM_ATTEMPTS):
            state = await self._peek()  # never waits for a turn running here: it may be the one to stop
            grant = state.grants.get(grant_id) if isinstance(grant_id, str) else None
            if grant is None:
                raise GrantNotFound(f"no grant {grant_id!r} in session {self.session_id!r}", grant_id=str(grant_id))
            now = agent.clock()
            if grant.revoked is None:
                record = GrantRevoked(grant_id, now, actor, via, reason)
                entry = LogEntry(state.version + 1, record.kind, encode_record(record))
                state.apply(record)
                try:
                    with agent.telemetry.store_call(agent.store, "append"):
                        await agent.sessions.appender.append(state, state.version - 1, [record], [entry], now)
                except VersionConflict:
                    continue
            return grant_info(grant, now)
        raise ConcurrentUpdate(f"session {self.session_id!r} kept changing; the grant was not revoked")

    async def last_response(self) -> AgentResponse | None:
        """The response of the latest call that ended on this session, rebuilt from the log."""
        state = await self._read()
        return None if state.last_end is None else response_for(state, state.last_end, state.last_end_version)

    # -- the operations -------------------------------------------------------------------------

    def _user_message(self, message: str | Message | Sequence[Part], principal: str | None, via: str) -> Message:
        limits = self.agent.json_limits
        user = user_message(message, limits)
        try:
            for key, value in (("principal", principal or self.principal), ("via", via)):
                if value is not None:
                    json_text(value, limits, path=f"$.{key}", name=True)
        except NotJsonData as exc:
            raise InvalidMessage(f"the message's sender cannot be recorded: {exc}", **exc.details()) from None
        return user

    async def _send(
        self, user: Message, principal: str | None, via: str, emit: Emit | None, launch: Launch | None = None
    ) -> AgentResponse:
        async def op(state: SessionState) -> AgentResponse:
            now = self.agent.clock()
            self._check_free(state, now)
            handed = escalations_due(state, now)
            if handed:  # recorded even when the send is refused: the pauses have new deciders now
                journal = self.agent.sessions.journal(state)
                journal.add(*handed)
                await journal.flush(now, rebase=False, durable=False)
            expired = {p.record.ref for p in state.expired(now)}
            live = [p.record.call_ref for ref, p in state.open.items() if ref not in expired]
            if live:
                raise PendingInterrupts(
                    f"{len(live)} call(s) are paused in session {self.session_id!r}: answer them with "
                    "resume() or drop them with cancel_pending()",
                    refs=live,
                )
            lost = self._abandoned(state, now)
            turn = self._turn(state, principal, emit)
            if state.version == 0:
                turn.journal.add(SessionStarted(self.agent.name, principal or self.principal, now))
            turn.journal.add(*expiry_claims(state, now, self.agent.on_expiry, limits=self.agent.json_limits))
            await turn.recover(lost)
            self._end_lost_turn(turn, now)
            sent = MessageAdded(user, at=now, principal=principal or self.principal, via=via)
            if launch is None:
                turn.journal.add(sent)
                return await turn.run_model()
            turn.journal.add(TurnStarted(at=now, principal=principal or self.principal, message=user))
            await turn.journal.flush(now, rebase=False)
            launch.begin(turn)

            async def body() -> AgentResponse:
                turn.journal.add(sent)
                return await turn.run_model()

            return await launch.run(turn, body)

        return await self._locked(op, operation="send", creating=True)

    async def _resume(
        self,
        respond: Sequence[ToolResponse],
        restart: Sequence[ToolRestart],
        metadata: dict[str, Any] | None,
        key: str | None,
        principal: str | None,
        via: str,
        emit: Emit | None,
        launch: Launch | None = None,
        *,
        by_ref: tuple[str, BuildAnswer] | None = None,
    ) -> AgentResponse:
        """Answer paused calls: the answers given, or — ``by_ref`` — the one answer built for the
        call that ref names, from the session as the locked operation finds it (so a pause is
        never looked up in a read made before the lock)."""
        limits = self.agent.json_limits
        actor = principal or self.principal
        answers, metadata = prepare_answers(respond, restart, metadata, limits, principal=actor, via=via, key=key)
        digest = request_hash(answers, metadata, actor) if key is not None else None

        def resolved(state: SessionState) -> tuple[list[ToolResponse | ToolRestart], str | None]:
            if by_ref is None:
                return answers, digest
            ref, build = by_ref
            answer = build(call_name(state, ref))
            single = ([answer], []) if isinstance(answer, ToolResponse) else ([], [answer])
            found, _ = prepare_answers(*single, None, limits)
            return found, request_hash(found, metadata, actor) if key is not None else None

        async def op(state: SessionState) -> AgentResponse:
            for _ in range(_CLAIM_ATTEMPTS):
                given, asked = resolved(state)
                if key is not None and key in state.keys:
                    return self._replay(state, key, asked)
                now = self.agent.clock()
                self._check_free(state, now)
                if not given:
                    return await self._continue(state, principal, emit)
                turn = self._turn(state, principal, emit, key)
                # Pauses whose time ran out are handed on first: their answers are checked
                # against their new deciders (a refusal writes nothing, escalations included).
                turn.journal.add(*escalations_due(state, now))
                context = AnswerContext(now, actor, via, metadata, key, asked, limits)
                records = check_answers(
                    state,
                    given,
                    self.agent.tools,
                    context,
                    allow_changed_tools=self.agent.allow_changed_tools,
                    policy=self.agent.approval_policy,
                )
                claims = [r for r in records if isinstance(r, CallAnswered)]
                self._end_lost_turn(turn, now)
                answered = {c.ref for c in claims}
                expired = [
                    c for c in expiry_claims(state, now, self.agent.on_expiry, limits=limits) if c.ref not in answered
                ]
                turn.journal.add(*records, *expired)
                if launch is not None:
                    turn.journal.add(TurnStarted(at=now, principal=actor))
                # The claim: once written, these answers are ours alone. Durable only if a tool
                # that must not run twice restarts right after it, or the caller is told a
                # detached turn runs; otherwise the turn's next durable append covers it.
                durable = launch is not None or turn.restarts_must_not_repeat(claims)
                try:
                    await turn.journal.flush(now, rebase=False, durable=durable)
                except ConcurrentUpdate:
                    state = await self.agent.sessions.reload(self.session_id)
                    continue
                if launch is None:
                    return await turn.after_answers(claims)
                launch.begin(turn)
                return await launch.run(turn, functools.partial(turn.after_answers, claims))
            raise ConcurrentUpdate(f"session {self.session_id!r} kept changing; try again")

        return await self._locked(op, operation="resume")

    def _approval(self, ref: str, replace_input: Any, grant: Grant | None, pause_id: str | None) -> BuildAnswer:
        """What ``approve`` answers, given the name of the call's tool (``approval_by_ref``)."""
        tools = self.agent.tools

        def build(name: str) -> ToolResponse | ToolRestart:
            return approval_by_ref(tools, ref, name, pause_id=pause_id, replace_input=replace_input, grant=grant)

        return build

    async def _continue(self, state: SessionState, principal: str | None, emit: Emit | None) -> AgentResponse:
        if state.open:
            raise NothingToResume(
                f"{len(state.open)} call(s) are paused in session {self.session_id!r}: a resume must answer "
                "at least one of them",
                refs=state.open_refs(),
            )
        now = self.agent.clock()
        lost = self._abandoned(state, now)
        if not (state.awaiting_model or lost or state.lost(now, self.agent.abandon_after)):
            raise NothingToResume(f"nothing is paused in session {self.session_id!r}")
        turn = self._turn(state, principal, emit)
        await turn.recover(lost)
        self._end_lost_turn(turn, now)
        if turn.state.awaiting_model:
            return await turn.proceed()
        await turn.journal.flush(now)  # only a lost detached turn to settle: its end is the answer
        ended = turn.state
        assert ended.last_end is not None
        return response_for(ended, ended.last_end, ended.last_end_version)

    def _check_free(self, state: SessionState, now: datetime) -> None:
        """Refuse to start a turn while a detached turn runs in the session (``TurnInProgress``);
        one presumed lost with its process does not count (``_end_lost_turn`` ends it)."""
        running = state.running_turn
        if running is not None and not state.lost(now, self.agent.abandon_after):
            raise TurnInProgress(
                f"a detached turn is running in session {self.session_id!r}: wait for it to end, or abort it",
                turn_id=running.version,
            )

    def _end_lost_turn(self, turn: Turn, now: datetime) -> None:
        """Record the end of a detached turn presumed lost with its process, if there is one."""
        state = turn.state
        if state.running_turn is not None and state.lost(now, self.agent.abandon_after):
            turn.journal.add(lost_turn_end(state, state.running_turn, now))

    def _abandoned(self, state: SessionState, now: datetime) -> list[Call]:
        """Calls of the session still running with no result, once presumed lost with their
        process; raises ``TurnInProgress`` while they may still be running somewhere."""
        if not state.running:
            return []
        lost = state.abandoned(now, self.agent.abandon_after)
        if lost is None:
            raise TurnInProgress(
                f"tool calls of session {self.session_id!r} are running in another process; try again when "
                f"they finish (or after {self.agent.abandon_after} they are presumed lost)",
                refs=state.running,
            )
        return lost

    def _replay(self, state: SessionState, key: str, digest: str | None) -> AgentResponse:
        outcome = state.keys[key]
        if outcome.request_hash != digest:
            raise IdempotencyKeyReused(
                f"idempotency key {key!r} was used for a different resume in this session, or by another "
                "principal: a key replays only the same request by the same principal",
                key=key,
            )
        if outcome.ended is None:
            raise ResumeInProgress(f"the resume with idempotency key {key!r} has not finished yet", key=key)
        return response_for(state, outcome.ended, outcome.ended_version)

    # -- plumbing -------------------------------------------------------------------------------

    def _turn(self, state: SessionState, principal: str | None, emit: Emit | None, key: str | None = None) -> Turn:
        agent = self.agent
        return Turn(
            agent,
            agent.sessions.journal(state),
            principal=principal or self.principal,
            emit=emit,
            idempotency_key=key,
            began=agent.clock(),
        )

    async def _locked(self, op: Callable[[SessionState], Awaitable[T]], *, operation: str, creating: bool = False) -> T:
        running = self.agent.sessions.running(self.session_id)
        if running is not None:  # a detached turn holds the session here: say so rather than wait
            raise TurnInProgress(
                f"a detached turn is running in session {self.session_id!r}: wait for it to end, or abort it",
                turn_id=running.turn_id,
            )
        with self.agent.telemetry.turn(self.agent.name, self.session_id, operation) as traced:
            result = await self._locked_op(op, creating)
            traced.done(result)
            return result

    async def _locked_op(self, op: Callable[[SessionState], Awaitable[T]], creating: bool) -> T:
        sessions = self.agent.sessions
        async with sessions.lock(self.session_id):
            if creating and self._is_new and (self._create_only or sessions.cached(self.session_id) is None):
                # A new session: nothing to read. If the id was taken meanwhile, the
                # conditional append at version 0 fails.
                if self._create_only and await self.agent.store.get_summary(self.session_id) is not None:
                    raise SessionNotFound(f"no session {self.session_id!r}", session_id=self.session_id)
                state = SessionState(self.session_id)
            elif creating:
                try:
                    state = await sessions.refresh(self.session_id)
                except SessionNotFound:  # a caller-chosen id: the first send creates the session
                    check_session_id(self.session_id)
                    state = SessionState(self.session_id)
            else:
                state = await sessions.refresh(self.session_id)
            try:
                result = await op(state)
            except BaseException as exc:
                cached = sessions.cached(self.session_id)
                if cached is not None and cached.version != cached.durable_version:
                    sessions.forget(self.session_id)
                if isinstance(exc, ConcurrentUpdate) and self._create_only and state.durable_version == 0:
                    # The id was taken meanwhile: to this caller it is a session it cannot see.
                    raise SessionNotFound(f"no session {self.session_id!r}", session_id=self.session_id) from None
                raise
            self._is_new = self._create_only = False
            return result

    async def _read(self) -> SessionState:
        """The session as recorded. Never waits for a call running on it in this process: then
        it reads the store afresh (a running call's records are not durable yet)."""
        lock = self.agent.sessions.lock(self.session_id)
        if lock.locked():
            return await self._peek()
        async with lock:
            return await self.agent.sessions.refresh(self.session_id)

    async def _peek(self) -> SessionState:
        """The session as the store holds it, read afresh (no lock, no cache)."""
        found = await self.agent.store.read(self.session_id)
        if found is None:
            raise SessionNotFound(f"no session {self.session_id!r}", session_id=self.session_id)
        state = SessionState(self.session_id)
        for entry in found.entries:
            state.apply(decode_record(entry.data))
        state.durable_version = state.version
        return state

    def _stream(self, run: Callable[[Emit], Awaitable[AgentResponse]]) -> TurnStream:
        return TurnStream(run, self.agent.sessions.tasks)


def answer_by_ref(
    chat: Chat,
    ref: str,
    build: BuildAnswer,
    *,
    streamed: bool,
    metadata: dict[str, Any] | None = None,
    idempotency_key: str | None = None,
    principal: str | None = None,
    via: str = "python",
) -> Awaitable[AgentResponse] | TurnStream:
    """``chat.resume`` with the answer ``build(name)`` to the call ``ref`` names, ``name`` being
    its tool's (``""`` for a ref the session has no call of), looked up in the locked operation
    that records the answer — for callers that know a call by its ref only (the REST API's
    respond, deny and restart without a ``name``). Refused as ``resume`` refuses; a retry with
    the same ``idempotency_key`` gets the first outcome. ``streamed``: a ``TurnStream``, else
    the awaitable response."""
    by_ref = (ref, build)
    if streamed:
        return chat._stream(
            lambda emit: chat._resume((), (), metadata, idempotency_key, principal, via, emit, by_ref=by_ref)
        )
    return chat._resume((), (), metadata, idempotency_key, principal, via, None, by_ref=by_ref)


def check_session_id(session_id: str) -> str:
    """``session_id`` if a caller may name a new session so; ``InvalidSessionId`` otherwise."""
    if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
        raise InvalidSessionId(
            f"session id {session_id!r} is not valid: 1 to 128 characters, letters, digits and . _ : @ -, "
            "starting with a letter or a digit",
            session_id=session_id if isinstance(session_id, str) else repr(session_id),
        )
    return session_id
