"""``Chat``: the calls a caller makes on one session — send, resume, cancel, and reads."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from ._answers import AnswerContext, check_answers, expiry_claims, request_hash
from ._interrupts import AuditEntry, PendingInterrupt, ToolResponse, ToolRestart
from ._messages import Message, Part, TextPart
from ._records import CallAnswered, MessageAdded, SessionStarted
from ._response import AgentFinishReason, AgentResponse
from ._session import Call, SessionState
from ._streaming import Emit, TurnStream
from ._turn import Journal, Turn
from ._views import audit_entry, pending_interrupt, response_for
from .errors import (
    ConcurrentUpdate,
    IdempotencyKeyReused,
    NothingToResume,
    PendingInterrupts,
    ResumeInProgress,
    TurnInProgress,
)

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["Chat"]

_CLAIM_ATTEMPTS = 20

T = TypeVar("T")


class Chat:
    """One session of an agent. Get one with ``agent.chat()`` or ``agent.chat(session_id=...)``."""

    def __init__(self, agent: Agent, session_id: str | None, principal: str | None) -> None:
        self.agent = agent
        self._is_new = session_id is None
        # 128 random bits in hex: safe in URLs and on command lines (never starts with "-").
        self.session_id = session_id if session_id is not None else secrets.token_hex(16)
        self.principal = principal

    def __repr__(self) -> str:
        return f"<Chat {self.agent.name} session={self.session_id}>"

    # -- turns ----------------------------------------------------------------------------------

    async def send(self, message: str | Message | Sequence[Part], *, principal: str | None = None) -> AgentResponse:
        """Send a user message and run the model (and tools) until it answers or a call pauses.

        Raises ``PendingInterrupts`` (nothing written) while calls of the last turn are paused
        and not expired: answer them with ``resume`` or drop them with ``cancel_pending``.
        """
        return await self._send(_user_message(message), principal, None)

    def send_stream(self, message: str | Message | Sequence[Part], *, principal: str | None = None) -> TurnStream:
        """``send``, streamed: iterate the returned stream for chunks; ``await stream.response``."""
        user = _user_message(message)
        return self._stream(lambda emit: self._send(user, principal, emit))

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
        same ``idempotency_key`` returns the first call's response. An empty resume continues a
        turn whose answers are all in (after a crash, say) and is refused while calls are paused.
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

    async def cancel_pending(self, reason: str, *, principal: str | None = None) -> AgentResponse:
        """Resolve every paused call as cancelled, so the history stays valid and ``send`` works.

        The model sees ``{"cancelled": True, "reason": reason}`` as each call's result. Raises
        ``NothingToResume`` when nothing is paused.
        """

        async def op(state: SessionState) -> AgentResponse:
            if not state.open:
                raise NothingToResume(f"nothing is paused in session {self.session_id!r}")
            now = self.agent.clock()
            claims = [
                CallAnswered(
                    ref=p.record.ref,
                    call_ref=p.record.call_ref,
                    name=p.record.name,
                    decision="cancel",
                    at=now,
                    principal=principal or self.principal,
                    output={"cancelled": True, "reason": reason},
                    reason=reason,
                )
                for p in state.open.values()
            ]
            turn = self._turn(state, principal, None)
            turn.journal.add(*claims)
            return await turn.end(AgentFinishReason.ABORTED)

        return await self._locked(op, operation="cancel")

    async def settle_expired(self) -> AgentResponse | None:
        """Resolve this session's expired pauses by the agent's expiry policy.

        When that answers the last paused call, the turn continues (the model sees the denial).
        Returns None when nothing had expired.
        """

        async def op(state: SessionState) -> AgentResponse | None:
            claims = expiry_claims(state, self.agent.clock(), self.agent.on_expiry)
            if not claims:
                return None
            turn = self._turn(state, None, None)
            turn.journal.add(*claims)
            await turn.journal.flush(self.agent.clock())
            return await turn.proceed()

        return await self._locked(op, operation="settle_expired")

    # -- reads ----------------------------------------------------------------------------------

    async def interrupts(self) -> list[PendingInterrupt]:
        """The calls paused now, in the order the model asked for them."""
        state = await self._read()
        return [pending_interrupt(p.record) for p in state.open.values()]

    async def history(self) -> list[Message]:
        """The conversation as the model sees it."""
        return list((await self._read()).messages)

    async def audit_trail(self) -> list[AuditEntry]:
        """Every answer given in this session, oldest first."""
        return [audit_entry(r) for r in (await self._read()).audit]

    async def last_response(self) -> AgentResponse | None:
        """The response of the latest call that ended on this session, rebuilt from the log."""
        state = await self._read()
        return None if state.last_end is None else response_for(state, state.last_end, state.last_end_version)

    # -- the operations -------------------------------------------------------------------------

    async def _send(self, user: Message, principal: str | None, emit: Emit | None) -> AgentResponse:
        async def op(state: SessionState) -> AgentResponse:
            now = self.agent.clock()
            expired = {p.record.ref for p in state.expired(now)}
            live = [ref for ref in state.open if ref not in expired]
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
            turn.journal.add(*expiry_claims(state, now, self.agent.on_expiry))
            await turn.recover(lost)
            turn.journal.add(MessageAdded(user, at=now))
            return await turn.run_model()

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
    ) -> AgentResponse:
        for given in respond:
            if not isinstance(given, ToolResponse):
                raise TypeError(f"respond= takes ToolResponse answers (interrupt.respond(...)), not {given!r}")
        for again in restart:
            if not isinstance(again, ToolRestart):
                raise TypeError(f"restart= takes ToolRestart answers (interrupt.restart(...)), not {again!r}")
        answers: list[ToolResponse | ToolRestart] = [*respond, *restart]
        answered = {a.ref for a in answers}
        digest = request_hash(answers, metadata) if key is not None else None
        actor = principal or self.principal

        async def op(state: SessionState) -> AgentResponse:
            for _ in range(_CLAIM_ATTEMPTS):
                if key is not None and key in state.keys:
                    return self._replay(state, key, digest)
                if not answers:
                    return await self._continue(state, principal, emit)
                now = self.agent.clock()
                context = AnswerContext(now, actor, via, metadata, key, digest)
                claims = check_answers(
                    state, answers, self.agent.tools, context, allow_changed_tools=self.agent.allow_changed_tools
                )
                turn = self._turn(state, principal, emit, key)
                expired = [c for c in expiry_claims(state, now, self.agent.on_expiry) if c.ref not in answered]
                turn.journal.add(*claims, *expired)
                try:  # the claim: once written, these answers are ours alone
                    await turn.journal.flush(now, rebase=False)
                except ConcurrentUpdate:
                    state = await self.agent._reload(self.session_id)
                    continue
                return await turn.after_answers(claims)
            raise ConcurrentUpdate(f"session {self.session_id!r} kept changing; try again")

        return await self._locked(op, operation="resume")

    async def _continue(self, state: SessionState, principal: str | None, emit: Emit | None) -> AgentResponse:
        if state.open:
            raise NothingToResume(
                f"{len(state.open)} call(s) are paused in session {self.session_id!r}: a resume must answer "
                "at least one of them",
                refs=list(state.open),
            )
        lost = self._abandoned(state, self.agent.clock())
        if not (state.awaiting_model or lost):
            raise NothingToResume(f"nothing is paused in session {self.session_id!r}")
        turn = self._turn(state, principal, emit)
        await turn.recover(lost)
        return await turn.proceed()

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
                f"idempotency key {key!r} was used for a different resume in this session", key=key
            )
        if outcome.ended is None:
            raise ResumeInProgress(f"the resume with idempotency key {key!r} has not finished yet", key=key)
        return response_for(state, outcome.ended, outcome.ended_version)

    # -- plumbing -------------------------------------------------------------------------------

    def _turn(self, state: SessionState, principal: str | None, emit: Emit | None, key: str | None = None) -> Turn:
        agent = self.agent
        journal = Journal(
            agent.store,
            state,
            lambda: agent._reload(self.session_id),
            agent._remember,
            targets=agent._event_targets,
            telemetry=agent.telemetry,
        )
        return Turn(self.agent, journal, principal=principal or self.principal, emit=emit, idempotency_key=key)

    async def _locked(self, op: Callable[[SessionState], Awaitable[T]], *, operation: str, creating: bool = False) -> T:
        with self.agent.telemetry.turn(self.agent.name, self.session_id, operation) as traced:
            result = await self._locked_op(op, creating)
            traced.done(result)
            return result

    async def _locked_op(self, op: Callable[[SessionState], Awaitable[T]], creating: bool) -> T:
        async with self.agent._lock(self.session_id):
            if creating and self._is_new and self.session_id not in self.agent._cache:
                # A fresh random id: nothing to read. A collision would still fail the
                # conditional append at version 0.
                state = SessionState(self.session_id)
            else:
                state = await self.agent._refresh(self.session_id)
            try:
                result = await op(state)
            except BaseException:
                cached = self.agent._cache.get(self.session_id)
                if cached is not None and cached.version != cached.durable_version:
                    self.agent._forget(self.session_id)
                raise
            self._is_new = False
            return result

    async def _read(self) -> SessionState:
        async with self.agent._lock(self.session_id):
            return await self.agent._refresh(self.session_id)

    def _stream(self, run: Callable[[Emit], Awaitable[AgentResponse]]) -> TurnStream:
        return TurnStream(run, self.agent._background)


def _user_message(message: str | Message | Sequence[Part]) -> Message:
    if isinstance(message, str):
        return Message("user", [TextPart(message)])
    if isinstance(message, Message):
        if message.role != "user":
            raise ValueError(f"send() takes a user message, not a {message.role!r} one")
        return message
    return Message("user", list(message))
