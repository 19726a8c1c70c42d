"""One session as the runtime works on it: the operations run under its lock — a message sent,
answers given, pauses cancelled or settled — the turn each runs, and reads of the session.

``SessionCalls`` is the engine under every chat: ``Chat`` (and, through it, ``SyncChat``)
gives it the public verbs; detached turns, the server and the MCP endpoint call its operations
directly. What it needs of its agent is a ``SessionHost`` (an ``Agent`` is one).
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

from ..approval._answers import message_hash, prepare_answers, request_hash
from ..approval._context import AnswerContext
from ..approval._fit import call_name
from ..content._messages import Message, Part
from ..errors import (
    AlreadyResolved,
    ConcurrentUpdate,
    NothingToResume,
    PausepointError,
    ResumeInProgress,
    SessionNotFound,
)
from ..session._grants import Grant
from ..session._ids import check_session_id
from ..session._interrupts import PendingInterrupt, ToolResponse, ToolRestart
from ..session._records import (
    CallAnswered,
    MessageAdded,
    Record,
    SessionStarted,
    TurnStarted,
    decode_record,
    encoded_given,
)
from ..session._response import AgentFinishReason, AgentResponse
from ..session._state import Call, SessionState
from ..session._views import response_for
from ..stores import SessionSummary
from ..tools._tool import refresh_definitions
from ..turn._host import TurnHost
from ..turn._streaming import Emit, InterruptChunk, TurnEndChunk, TurnStream
from ..turn._turn import Turn
from ..turn._waiting import other_writers_end
from ._arguments import checked_cancel, checked_message
from ._busy import (
    abandoned_calls,
    check_free,
    check_model_free,
    check_no_turn_elsewhere,
    check_not_paused,
    check_not_running_here,
    end_lost_turn,
    holding,
    key_reused,
    lost_beside,
)
from ._launch import Launch, lost_turn_end
from ._sessions import LocalSessions, of_another_agent
from ._stopped import earlier_turn_first

__all__ = ["CLAIM_ATTEMPTS", "BuildAnswer", "SessionCalls", "SessionHost", "answer_by_ref"]

CLAIM_ATTEMPTS = 20

T = TypeVar("T")

#: an answer to the call a ref names, built from the name of the call's tool (``""``: no such call)
BuildAnswer = Callable[[str], ToolResponse | ToolRestart]


class SessionHost(TurnHost, Protocol):
    """What the operations on a session read of its agent, beyond what a turn does."""

    @property
    def sessions(self) -> LocalSessions: ...
    @property
    def on_expiry(self) -> Callable[[PendingInterrupt], Any]: ...
    @property
    def allow_changed_tools(self) -> bool: ...
    @property
    def abort_poll(self) -> float: ...


class SessionCalls:
    """The operations on one session of an agent (see the module docstring).

    ``new=True`` is for servers that let a caller name a new session: the first call creates it
    and never continues an existing one — if the id is taken (even meanwhile), it raises
    ``SessionNotFound``, as for a session the caller cannot see (``ConcurrentUpdate`` when another
    call of the same principal just made it: ``_taken``).
    """

    def __init__(
        self, agent: SessionHost, session_id: str | None, principal: str | None, *, new: bool = False,
        tenant: str | None = None,
    ) -> None:  # fmt: skip
        self.agent = agent
        self.tenant = tenant  # a new session's (``SessionStarted.tenant``)
        # A new session: nothing to read before the first append (at version 0, which fails if
        # the id was taken meanwhile). With a caller's id, the id must not exist yet (``new``).
        self._is_new = session_id is None or new
        self._create_only = new
        # ``agent.chat()``'s own id, until a call on it succeeds: read as empty while no session has it.
        self._fresh = session_id is None
        # 128 random bits in hex: safe in URLs and on command lines (never starts with "-").
        self.session_id = session_id if session_id is not None else secrets.token_hex(16)
        self.principal = principal
        if new:
            check_session_id(self.session_id)

    def __repr__(self) -> str:
        return f"<SessionCalls {self.agent.name} session={self.session_id}>"

    # -- the operations ---------------------------------------------------------------------------

    def user_message(
        self, message: str | Message | Sequence[Part], principal: str | None, via: str, key: str | None = None
    ) -> Message:
        """The user message a send records (``checked_message``: ``InvalidMessage`` for one it cannot)."""
        actor = principal or self.principal
        return checked_message(message, self.agent.json_limits, key, principal=actor, via=via, tenant=self.tenant)

    async def send_turn(
        self,
        user: Message,
        principal: str | None,
        via: str,
        emit: Emit | None,
        launch: Launch | None = None,
        key: str | None = None,
    ) -> AgentResponse:
        """Send ``user`` (checked by ``user_message``); sent again with the same ``key`` by the
        same principal, it gets the first one's outcome (``_replay``), never a second turn."""
        digest = message_hash(user, principal or self.principal) if key is not None else None

        async def op(state: SessionState) -> AgentResponse:
            if key is not None and key in state.keys:
                return await self._replay(state, key, digest, principal, emit)
            now = self.agent.clock()
            check_free(state, now, self.agent.abandon_after)
            check_model_free(state, now, self.agent.abandon_after, self.agent.sessions.stopped)
            stopped, earlier = self.agent.sessions.stopped, lambda s: self._turn(s, principal, None)
            state = await earlier_turn_first(stopped, state, earlier)  # what a call here cut short goes on first
            now = self.agent.clock()
            handed = self.agent.approvals.escalations(state, now)
            if handed:  # recorded even when the send is refused: the pauses have new deciders now
                journal = self.agent.sessions.journal(state)
                journal.add(*handed)
                await journal.flush(now, rebase=False, durable=False)
            check_not_paused(state, now, via)
            lost, known = abandoned_calls(state, now, self.agent.abandon_after, self.agent.sessions.stopped)
            turn = self._turn(state, principal, emit, key)
            if state.version == 0:
                turn.journal.add(SessionStarted(self.agent.name, principal or self.principal, now, self.tenant))
            turn.journal.add(*self.agent.approvals.expiries(state, now, self.agent.on_expiry, self.agent.json_limits))
            await turn.recover(lost, known)
            if turn.state.open:  # a lost call of an interrupt, run again, asked its question again:
                await turn.end(AgentFinishReason.INTERRUPTED)  # answered before any message
                check_not_paused(turn.state, now, via)
            end_lost_turn(turn, now, self.agent.abandon_after)
            if turn.state.awaiting_model and turn.state.unended_keys:  # a keyed call's turn, lost
                turn.journal.add(lost_turn_end(turn.state, now))
            actor = principal or self.principal
            sent = MessageAdded(user, at=now, principal=actor, via=via, idempotency_key=key, request_hash=digest)
            sent_data = encoded_given(sent, self.agent.store.max_record_bytes)  # (InvalidMessage: over the limit)
            if launch is None:
                turn.journal.add_encoded((sent, sent_data))
                return await turn.run_model()
            started = TurnStarted(now, actor, user, idempotency_key=key, request_hash=digest)
            turn.journal.add_encoded((started, encoded_given(started, self.agent.store.max_record_bytes)))
            await turn.journal.flush(now, rebase=False)
            launch.begin(turn, digest)

            async def body() -> AgentResponse:
                turn.journal.add_encoded((sent, sent_data))
                return await turn.run_model()

            return await launch.run(turn, body)

        return await self.locked(op, operation="send", creating=True, key=key, request_hash=digest)

    async def resume_turn(
        self,
        respond: Sequence[ToolResponse] | None,
        restart: Sequence[ToolRestart] | None,
        metadata: dict[str, Any] | None,
        key: str | None,
        principal: str | None,
        via: str,
        emit: Emit | None,
        launch: Launch | None = None,
        *,
        by_ref: tuple[str, BuildAnswer] | None = None,
    ) -> AgentResponse:
        """Answer paused calls: the answers given, or (``by_ref``) the one built for the call that
        ref names from the session as the locked operation finds it (never from an earlier read)."""
        limits, approvals, actor = self.agent.json_limits, self.agent.approvals, principal or self.principal
        strings = {"principal": actor, "via": via, "idempotency_key": key}
        answers, metadata = prepare_answers(respond, restart, metadata, limits, alone=False, **strings)
        digest = request_hash(answers, metadata, actor) if key is not None else None

        def resolved(state: SessionState) -> tuple[list[ToolResponse | ToolRestart], str | None]:
            if by_ref is None:
                return answers, digest
            ref, build = by_ref
            answer = build(call_name(state, ref))
            single = ([answer], []) if isinstance(answer, ToolResponse) else ([], [answer])
            found, _ = prepare_answers(*single, None, limits, alone=True)
            return found, request_hash(found, metadata, actor) if key is not None else None

        async def op(state: SessionState) -> AgentResponse:
            for _ in range(CLAIM_ATTEMPTS):
                given, asked = resolved(state)
                if key is not None and key in state.keys:
                    return await self._replay(state, key, asked, principal, emit)
                await refresh_definitions(self.agent.tools, {answer.name for answer in given})  # changed: refused
                now = self.agent.clock()
                check_free(state, now, self.agent.abandon_after)
                if not given:
                    return await self._continue(state, principal, emit)
                turn = self._turn(state, principal, emit, key)
                # Pauses whose time ran out are handed on first: their answers are checked
                # against their new deciders (a refusal writes nothing, escalations included).
                turn.journal.add(*approvals.escalations(state, now))
                context = AnswerContext(now, actor, via, metadata, key, asked, limits)
                try:
                    records = approvals.check(state, given, context, allow_changed_tools=self.agent.allow_changed_tools)
                except AlreadyResolved:
                    if not self.agent.sessions.stopped.retried(state, given, actor):
                        raise
                    if state.last_end is not None and state.last_end_version == state.version:  # it ended the turn
                        return _told(response_for(state, state.last_end, state.last_end_version), emit)
                    return await self._continue(state, principal, emit)  # it goes on from where it stopped
                encoded = [(r, encoded_given(r, self.agent.store.max_record_bytes)) for r in records]
                unstarted = self.agent.sessions.stopped.unstarted(state)  # claimed here, never started: run too
                claims = [*unstarted, *(r for r in records if isinstance(r, CallAnswered))]
                lost = lost_beside(state, now, self.agent.abandon_after, self.agent.sessions.stopped)
                end_lost_turn(turn, now, self.agent.abandon_after)
                answered = {c.ref for c in claims}
                expired = approvals.expiries(state, now, self.agent.on_expiry, limits)
                turn.journal.add_encoded(*encoded)
                turn.journal.add(*(c for c in expired if c.ref not in answered))
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
                go_on = functools.partial(_after_answers, turn, claims, *lost)
                if launch is None:
                    return await go_on()
                launch.begin(turn, asked)
                return await launch.run(turn, go_on)
            raise ConcurrentUpdate(f"session {self.session_id!r} kept changing; try again")

        return await self.locked(op, operation="resume", key=key, request_hash=digest if by_ref is None else None)

    def approval(self, ref: str, replace_input: Any, grant: Grant | None, pause_id: str | None) -> BuildAnswer:
        """What ``approve`` answers, given the name of the call's tool (``Approvals.approval_by_ref``)."""
        approvals = self.agent.approvals

        def build(name: str) -> ToolResponse | ToolRestart:
            return approvals.approval_by_ref(ref, name, pause_id=pause_id, replace_input=replace_input, grant=grant)

        return build

    def nothing_to_resume(self, state: SessionState) -> NothingToResume:
        """The refusal of a resume that answers nothing, when nothing is there to go on with."""
        if state.open:
            return NothingToResume(
                f"{len(state.open)} call(s) are paused in session {self.session_id!r}: a resume must answer "
                "at least one of them",
                refs=state.open_refs(),
            )
        return NothingToResume(f"nothing is paused in session {self.session_id!r}")

    async def _continue(
        self, state: SessionState, principal: str | None, emit: Emit | None, key: str | None = None
    ) -> AgentResponse:
        """Go on from where the session stopped (an empty resume). ``key``: the key of the call a
        retry of which goes on here (``_replay``): the end is its outcome, whatever ended before
        (a lost detached turn's end: found by a probe, the first retry got this end, the next ones
        that one)."""
        now, stopped = self.agent.clock(), self.agent.sessions.stopped
        unstarted = stopped.unstarted(state)
        if unstarted:  # restarts claimed here whose tools never started: run them, as the claim said
            return await self._turn(state, principal, emit, key).after_answers(unstarted)
        if state.open:
            # calls beside the pauses that died with their process are settled (a keyed retry of
            # the message that started them gets its turn's end); while they may run, TurnInProgress
            lost, known = abandoned_calls(state, now, self.agent.abandon_after, stopped)
            if not lost and state.unended_keys and (stopped.left(state) or state.still(now, self.agent.abandon_after)):
                # a keyed answer's turn that stopped short once its answer was written (a quorum's
                # approval, counted): it ends as it would have, its pauses still open
                return await self._turn(state, principal, emit, key).end(AgentFinishReason.INTERRUPTED)
            if not lost:
                raise self.nothing_to_resume(state)
            turn = self._turn(state, principal, emit, key)
            await turn.recover(lost, known)
            end_lost_turn(turn, now, self.agent.abandon_after)
            return await turn.end(AgentFinishReason.INTERRUPTED)
        check_model_free(state, now, self.agent.abandon_after, self.agent.sessions.stopped)
        lost, known = abandoned_calls(state, now, self.agent.abandon_after, self.agent.sessions.stopped)
        if not (state.awaiting_model or lost or state.lost(now, self.agent.abandon_after)):
            raise self.nothing_to_resume(state)
        turn = self._turn(state, principal, emit, key)
        await turn.recover(lost, known)
        end_lost_turn(turn, now, self.agent.abandon_after)
        if turn.state.awaiting_model or turn.state.open:  # (a lost interrupt's call asked again)
            return await turn.proceed()
        await turn.journal.flush(now)  # only a lost detached turn to settle: its end is the answer
        ended = turn.state
        assert ended.last_end is not None
        return response_for(ended, ended.last_end, ended.last_end_version)

    async def _replay(
        self, state: SessionState, key: str, digest: str | None, principal: str | None, emit: Emit | None
    ) -> AgentResponse:
        """The outcome of the message or resume first sent with ``key``. If its turn never ended
        and the session has been still for ``abandon_after`` — the process that took it is
        presumed lost — the retry goes on as an empty resume would (the model asked again, a call
        left running recorded as of unknown outcome, never run twice), and that end is the
        outcome."""
        outcome = state.keys[key]
        if outcome.request_hash != digest:
            raise key_reused(key)
        if outcome.ended is None:
            now = self.agent.clock()
            left = self.agent.sessions.stopped.left(state)
            taken_here = left is not None and key in left.keys  # its turn stopped short here: nothing runs it
            # A detached turn's key too: once its process is presumed lost (``lost``), the
            # retry ends that turn and goes on, as a keyed message or answer does.
            if (taken_here and state.running_turn is None) or state.still(now, self.agent.abandon_after):
                return await self._continue(state, principal, emit, key)  # its end ends the key too
            raise ResumeInProgress(f"the call with idempotency key {key!r} has not finished yet", key=key)
        return _told(response_for(state, outcome.ended, outcome.ended_version), emit)

    # -- plumbing -------------------------------------------------------------------------------

    def _turn(self, state: SessionState, principal: str | None, emit: Emit | None, key: str | None = None) -> Turn:
        agent = self.agent
        return Turn(
            agent,
            agent.sessions.journal(state),
            reread=agent.sessions.refresh,
            principal=principal or self.principal,
            emit=emit,
            idempotency_key=key,
            began=agent.clock(),
        )

    async def locked(
        self,
        op: Callable[[SessionState], Awaitable[T]],
        *,
        operation: str,
        creating: bool = False,
        key: str | None = None,
        request_hash: str | None = None,
    ) -> T:
        check_not_running_here(self.agent.sessions.running(self.session_id), self.session_id, key, request_hash)
        with holding(self.agent.sessions, self.session_id), self.agent.telemetry.turn(
            self.agent.name, self.session_id, operation
        ) as traced:
            result = await self._locked_op(op, creating, key is not None)
            traced.done(result)
            return result

    async def _locked_op(self, op: Callable[[SessionState], Awaitable[T]], creating: bool, keyed: bool) -> T:
        """``op`` on the session's state under its lock. A keyed first send finding the session
        made meanwhile by its caller (a retry of a first send) reads it: ``op`` replays the first
        one's outcome; any other first send finding the id taken is refused (``_taken``)."""
        sessions = self.agent.sessions
        async with sessions.lock(self.session_id):
            sessions.stopped.begin(self.session_id)
            if creating and self._is_new and (self._create_only or sessions.cached(self.session_id) is None):
                # A new session: nothing to read. If the id was taken meanwhile, the
                # conditional append at version 0 fails.
                if self._create_only and (taken := await self.agent.store.get_summary(self.session_id)) is not None:
                    if not (keyed and self._mine(taken)):
                        raise self._taken(taken)
                    self._is_new = self._create_only = False
                    return await self._locked_run(op, await sessions.refresh(self.session_id))
                state = SessionState(self.session_id)
            elif creating:
                try:
                    state = await sessions.refresh(self.session_id)
                except SessionNotFound as exc:  # a caller-chosen id: the first send creates the session
                    if of_another_agent(exc):
                        raise
                    check_session_id(self.session_id)
                    state = SessionState(self.session_id)
            else:
                state = await sessions.refresh(self.session_id)
            try:
                return await self._locked_run(op, state)
            except ConcurrentUpdate:
                if not (self._create_only and state.durable_version == 0):
                    raise
                taken = await self.agent.store.get_summary(self.session_id)
                if not (keyed and self._mine(taken)):
                    raise self._taken(taken) from None
                self._create_only = False  # made by another process meanwhile: replayed from it
                sessions.stopped.forget(self.session_id)  # its turn runs there, not "nowhere"
                return await self._locked_run(op, await sessions.refresh(self.session_id))

    async def _locked_run(self, op: Callable[[SessionState], Awaitable[T]], state: SessionState) -> T:
        sessions = self.agent.sessions
        try:
            result = await op(state)
        except BaseException:
            sessions.stopped.ended(self.session_id, failed=True)
            self._is_new = False  # it may have written the session: the next call reads the store
            cached = sessions.cached(self.session_id)
            if cached is not None and cached.version != cached.durable_version:
                sessions.forget(self.session_id)
            raise
        sessions.stopped.ended(self.session_id, failed=False)
        self._is_new = self._create_only = self._fresh = False
        return result

    def _mine(self, found: SessionSummary | None) -> bool:
        """Whether ``found``, a session made meanwhile, is this caller's: its agent, owner and tenant."""
        return (
            found is not None
            and self.principal is not None
            and (found.agent, found.owner, found.tenant) == (self.agent.name, self.principal, self.tenant)
        )

    def _taken(self, found: SessionSummary | None) -> PausepointError:
        """The error for a new session whose id was taken meanwhile (``found``: its summary): to
        this caller it is a session it cannot see — unless another request of the same caller
        created it (two first sends at once): then it is theirs, and sending again continues
        it."""
        if self._mine(found):
            return ConcurrentUpdate(
                f"session {self.session_id!r} was just created by another request of yours: send again to continue it",
                session_id=self.session_id,
            )
        return SessionNotFound(f"no session {self.session_id!r}", session_id=self.session_id)

    async def read_state(self) -> SessionState:
        """The session as recorded. Never waits for a call running on it in this process: then
        it reads the store afresh (a running call's records are not durable yet). A new chat's
        session, before its first send made it, is empty (as Genkit's ``chat.messages``)."""
        lock = self.agent.sessions.lock(self.session_id)
        try:
            if lock.locked():
                return await self.peek_state()
            async with lock:
                return await self.agent.sessions.refresh(self.session_id)
        except SessionNotFound:
            if self._fresh:  # ``agent.chat()``, its first send not made yet (or failed before writing)
                return SessionState(self.session_id)
            raise

    async def peek_state(self) -> SessionState:
        """The session as the store holds it, read afresh (no lock, no cache)."""
        found = await self.agent.store.read(self.session_id)
        if found is None:
            raise SessionNotFound(f"no session {self.session_id!r}", session_id=self.session_id)
        state = SessionState(self.session_id)
        for entry in found.entries:
            state.apply(decode_record(entry.data))
        state.durable_version = state.version
        return self.agent.sessions.owned(state)

    def stream(self, run: Callable[[Emit], Awaitable[AgentResponse]]) -> TurnStream:
        return TurnStream(run, self.agent.sessions.tasks)

    async def cancel(self, reason: str, principal: str | None, via: str) -> AgentResponse:
        """Resolve every paused call as cancelled (``Chat.cancel_pending``)."""
        checked_cancel(reason, principal, self.agent.json_limits)

        def claim(state: SessionState, now: datetime) -> Turn:
            check_free(state, now, self.agent.abandon_after)
            if not state.open:
                check_no_turn_elsewhere(state, now, self.agent.abandon_after, self.agent.sessions.stopped)
                raise NothingToResume(f"nothing is paused in session {self.session_id!r}")
            agent, turn = self.agent, self._turn(state, principal, None)
            end_lost_turn(turn, now, self.agent.abandon_after)
            on_expiry, limits, actor = agent.on_expiry, agent.json_limits, principal or self.principal
            turn.journal.add(*agent.approvals.cancellations(state, now, reason, actor, via, on_expiry, limits))
            return turn

        async def op(state: SessionState) -> AgentResponse:
            turn = await self._claimed(state, claim)  # calls of its batch running elsewhere: their writer
            now, after = self.agent.clock(), self.agent.abandon_after  # ends it (presumed lost: this does,
            aborted = functools.partial(turn.end, AgentFinishReason.ABORTED)  # settling them as any call would)
            if turn.state.abandoned(now, after) is None:
                return await other_writers_end(turn, turn.state.version, aborted)
            await turn.recover(*lost_beside(turn.state, now, after, self.agent.sessions.stopped))
            return await aborted()

        return await self.locked(op, operation="cancel")

    async def settle(self) -> AgentResponse | None:
        """Resolve the session's expired pauses (``Chat.settle_expired``)."""
        if self.agent.sessions.running(self.session_id) is not None:
            return None

        def claim(state: SessionState, now: datetime) -> Turn | None:
            agent = self.agent
            if state.running_turn is not None and not state.lost(now, agent.abandon_after):
                return None
            handed = agent.approvals.escalations(state, now)
            if not handed and not state.expired(now):
                return None
            turn = self._turn(state, None, None)
            end_lost_turn(turn, now, self.agent.abandon_after)
            turn.journal.add(*handed)  # folded now: a step whose time ran out too expires below
            turn.journal.add(*agent.approvals.expiries(state, now, agent.on_expiry, agent.json_limits))
            return turn

        async def op(state: SessionState) -> AgentResponse | None:
            turn = await self._claimed(state, claim)  # calls of the batch running elsewhere: their writer
            return None if turn is None or turn.state.running else await turn.proceed()  # ends it (none waited for)

        return await self.locked(op, operation="settle_expired")

    async def _claimed(self, state: SessionState, claim: Callable[[SessionState, datetime], T]) -> T:
        """The turn ``claim(state, now)`` makes (None: nothing to claim), its records written as a
        claim (a conditional append, not durable: ``Journal``); if another writer got in first,
        ``claim`` runs again on the session as it is now (what it took may be ours no more)."""
        for _ in range(CLAIM_ATTEMPTS):
            now = self.agent.clock()
            turn = claim(state, now)
            if not isinstance(turn, Turn):
                return turn
            try:
                await turn.journal.flush(now, rebase=False, durable=False)
            except ConcurrentUpdate:
                state = await self.agent.sessions.reload(self.session_id)
                continue
            return turn
        raise ConcurrentUpdate(f"session {self.session_id!r} kept changing; nothing was recorded")


def _told(response: AgentResponse, emit: Emit | None) -> AgentResponse:
    """The outcome of an earlier call, for its retry: a stream of it ends as the first one's did,
    an ``interrupt`` chunk marking each pause it left open before its ``turn_end`` (a client
    whose first reply was lost before any chunk reads its pauses from the stream, as ever). The
    text and results the first stream carried are in the history, not made up again."""
    if emit is not None:
        for interrupt in response.interrupts:
            emit(InterruptChunk(interrupt, interrupt.ref))
        emit(TurnEndChunk(response))
    return response


async def _after_answers(
    turn: Turn, claims: list[CallAnswered], lost: list[Call], known: Mapping[str, Record]
) -> AgentResponse:
    """The turn after its answers' claims are written: the batch's calls that died with their
    process beside the answered ones settled first (nobody else will), then ``Turn.after_answers``."""
    await turn.recover(lost, known)
    return await turn.after_answers(claims)


def answer_by_ref(
    chat: SessionCalls,
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
        return chat.stream(
            lambda emit: chat.resume_turn((), (), metadata, idempotency_key, principal, via, emit, by_ref=by_ref)
        )
    return chat.resume_turn((), (), metadata, idempotency_key, principal, via, None, by_ref=by_ref)
