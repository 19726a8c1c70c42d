"""``Chat``: the calls a caller makes on one session — send, resume, approve, cancel, detach, and
reads — awaited or streamed; and ``SyncChat``, the same calls blocking. Each verb is written
once, here: its streamed form runs the same turn with a stream attached, and ``SyncChat``'s
verbs are these, run on the portal's loop (``_portal.blocking``). The operations themselves are
``SessionCalls``' (``_calls``).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

from ..approval._answers import prepare_answers
from ..content._messages import Message, Part
from ..errors import IdempotencyKeyReused, InvalidRequest, TurnLost, UsageError
from ..session._grants import Grant, GrantInfo
from ..session._interrupts import AuditEntry, PendingInterrupt, ToolResponse, ToolRestart
from ..session._response import AgentResponse
from ..session._views import audit_entry, grant_info, pending_interrupt, response_for
from ..turn._streaming import TurnStream
from ._arguments import checked_approval
from ._calls import SessionCalls, SessionHost
from ._detach import abort_turn, find_turn
from ._launch import Launch, TurnStatus, end_status, status_of
from ._portal import blocking, blocking_stream
from ._revoke import revoke_grant

__all__ = ["Chat", "DetachedTurn", "SyncChat"]


class Chat:
    """One session of an agent. Get one with ``agent.chat()`` or ``agent.chat(session_id=...)``.

    ``Chat(agent, session_id, principal, new=True)`` is for servers that let a caller name a
    new session: the first call creates it and never continues an existing one — if the id is
    taken (even meanwhile), it raises ``SessionNotFound``, as for a session the caller cannot see
    (``ConcurrentUpdate`` when another call of the same principal just made it: send again).
    ``tenant`` is the tenant a session this chat creates belongs to (None: none).
    """

    def __init__(
        self,
        agent: SessionHost,
        session_id: str | None,
        principal: str | None,
        *,
        new: bool = False,
        tenant: str | None = None,
    ) -> None:
        #: the operations on the session this chat's verbs run (internal)
        self.calls = SessionCalls(agent, session_id, principal, new=new, tenant=tenant)

    def __repr__(self) -> str:
        return f"<Chat {self.agent.name} session={self.session_id}>"

    @property
    def agent(self) -> SessionHost:
        """The agent whose session this is."""
        return self.calls.agent

    @property
    def session_id(self) -> str:
        """The session's id (minted by the runtime for a new chat, unless given)."""
        return self.calls.session_id

    @property
    def principal(self) -> str | None:
        """Who is acting, unless a call names someone else (recorded in the audit trail)."""
        return self.calls.principal

    @property
    def sync(self) -> SyncChat:
        """This chat without ``await`` — for notebooks and synchronous code (see ``SyncChat``):
        ``agent.chat().sync.send("...")``. Works inside a running event loop (a Jupyter cell) too."""
        return SyncChat(self)

    # -- turns ----------------------------------------------------------------------------------

    async def send(
        self,
        message: str | Message | Sequence[Part],
        *,
        idempotency_key: str | None = None,
        principal: str | None = None,
        via: str = "python",
    ) -> AgentResponse:
        """Send a user message and run the model (and tools) until it answers or a call pauses.

        The audit trail records who sent it (``principal``, or the chat's) and through what
        (``via``). Raises ``PendingInterrupts`` (nothing written) while calls of the last turn
        are paused and not expired: answer them with ``resume`` or drop them with
        ``cancel_pending``. Raises ``InvalidMessage`` (nothing written) for a message that is
        not text and media parts a session can keep (see ``JsonLimits``).

        A message sent again with the same ``idempotency_key`` by the same principal is not sent
        again: the retry gets the first one's response (``ResumeInProgress`` while its turn
        runs); the key with another message, or by another principal, raises
        ``IdempotencyKeyReused``. Keys are the session's: one key names one message or resume.
        """
        user = self.calls.user_message(message, principal, via, idempotency_key)
        return await self.calls.send_turn(user, principal, via, None, key=idempotency_key)

    def send_stream(
        self,
        message: str | Message | Sequence[Part],
        *,
        idempotency_key: str | None = None,
        principal: str | None = None,
        via: str = "python",
    ) -> TurnStream:
        """``send``, streamed: iterate the returned stream for chunks; ``await stream.response``
        (a retry with the first call's ``idempotency_key`` streams its response alone)."""
        user = self.calls.user_message(message, principal, via, idempotency_key)
        return self.calls.stream(lambda emit: self.calls.send_turn(user, principal, via, emit, key=idempotency_key))

    async def resume(
        self,
        *,
        respond: Sequence[ToolResponse] | None = (),
        restart: Sequence[ToolRestart] | None = (),
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
        return await self.calls.resume_turn(respond, restart, metadata, idempotency_key, principal, via, None)

    def resume_stream(
        self,
        *,
        respond: Sequence[ToolResponse] | None = (),
        restart: Sequence[ToolRestart] | None = (),
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        principal: str | None = None,
        via: str = "python",
    ) -> TurnStream:
        """``resume``, streamed (see ``send_stream``)."""
        self._check_answers(respond, restart, metadata, idempotency_key, principal, via)
        return self.calls.stream(
            lambda emit: self.calls.resume_turn(respond, restart, metadata, idempotency_key, principal, via, emit)
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
        checked = checked_approval(ref, pause_id, grant, self.agent.json_limits)
        by_ref = (checked, self.calls.approval(checked, replace_input, grant, pause_id))
        return await self.calls.resume_turn((), (), metadata, idempotency_key, principal, via, None, by_ref=by_ref)

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
        checked = checked_approval(ref, pause_id, grant, self.agent.json_limits)
        self._check_answers((), (), metadata, idempotency_key, principal, via)
        by_ref = (checked, self.calls.approval(checked, replace_input, grant, pause_id))
        return self.calls.stream(
            lambda emit: self.calls.resume_turn((), (), metadata, idempotency_key, principal, via, emit, by_ref=by_ref)
        )

    def _check_answers(
        self,
        respond: Sequence[ToolResponse] | None,
        restart: Sequence[ToolRestart] | None,
        metadata: dict[str, Any] | None,
        key: str | None,
        principal: str | None,
        via: str,
    ) -> None:
        """A streamed resume's (or approval's) arguments, checked when the verb is called — as
        ``pausepoint.client`` checks them, and as a send's message is — not once its stream is
        read: the turn checks them again as it starts (a second walk over the same values)."""
        limits, actor = self.agent.json_limits, principal or self.principal
        prepare_answers(respond, restart, metadata, limits, principal=actor, via=via, idempotency_key=key)

    async def cancel_pending(self, reason: str, *, principal: str | None = None, via: str = "python") -> AgentResponse:
        """Resolve every paused call as cancelled, so the history stays valid and ``send`` works.

        The model sees ``{"cancelled": True, "reason": reason}`` as each call's result; the audit
        trail records ``principal`` and the channel ``via``. A pause whose time ran out is
        resolved by the agent's expiry policy instead (``via="expiry"``). The turn ends ``aborted``,
        unless another process still runs a call of the batch: that process ends it, and its end
        is returned. Raises
        ``NothingToResume`` when nothing is paused, ``InvalidAnswer`` for a reason (or principal) a
        session cannot keep.
        """
        return await self.calls.cancel(reason, principal, via)

    async def detach(
        self,
        message: str | Message | Sequence[Part] | None = None,
        *,
        respond: Sequence[ToolResponse] | None = (),
        restart: Sequence[ToolRestart] | None = (),
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        principal: str | None = None,
        via: str = "python",
    ) -> DetachedTurn:
        """Start a turn — a message sent, or answers given — that runs in the background.

        Returns once the turn is recorded as running (every process sees it: ``status()`` is
        ``pending``, other calls on the session get ``TurnInProgress``); its result lands in the
        session like any turn's. Refusals (``PendingInterrupts``, a ``ResumeRefused``) are raised
        here, with nothing written: ``NothingToResume`` when it answers nothing (a resume that
        only goes on from a lost turn is ``resume()``'s), ``UsageError`` for a message and answers
        both. ``DetachedTurn.abort()`` or ``chat.abort()`` stops it, from any process. Needs a
        store shared by the processes that should see it.
        """
        if message is not None and (respond or restart):
            raise UsageError("detach() takes a message or answers (respond= / restart=), not both")
        if message is None and not respond and not restart:
            raise self.calls.nothing_to_resume(await self.calls.read_state())
        launch = Launch(self.agent.sessions, self.agent.store, self.session_id, self.agent.abort_poll)
        launch.running.key = idempotency_key
        if message is not None:
            user = self.calls.user_message(message, principal, via, idempotency_key)
            run = self.calls.send_turn(user, principal, via, None, launch, idempotency_key)
        else:
            run = self.calls.resume_turn(respond, restart, metadata, idempotency_key, principal, via, None, launch)
        task = asyncio.ensure_future(run)
        self.agent.sessions.keep(task)
        launch.running.task = task
        waiting: set[asyncio.Future[Any]] = {launch.started, task}
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if not launch.started.done():
            launch.started.cancel()
            task.result()  # the refusal, raised here
            return await self._replayed_detach(idempotency_key)
        return DetachedTurn(self, launch.started.result(), task)

    async def _replayed_detach(self, key: str | None) -> DetachedTurn:
        """The detached turn a retry with its idempotency ``key`` names (it ended: its end is in
        the store, which ``wait()`` reads — the retry's own task may have gone on past a turn
        presumed lost); ``IdempotencyKeyReused`` for a key first sent with a call that did not
        detach."""
        state = await self.calls.read_state()
        outcome = state.keys.get(key) if key is not None else None
        started = outcome.ended.started if outcome is not None and outcome.ended is not None else None
        if started is None and key is not None:  # a retry that went on past it, lost, gave the key a later end
            started = next((d.version for d in state.detached.values() if d.started.idempotency_key == key), None)
        if started is None:
            raise IdempotencyKeyReused(
                f"idempotency key {key!r} was used for a call that did not detach: a key replays only the same request",
                key=key,
            )
        return DetachedTurn(self, started)

    async def abort(self, *, principal: str | None = None, via: str = "python") -> TurnStatus | None:
        """Stop the session's detached turn, from any process; returns its status before the call.

        ``pending``: it was running and stops now (a model call in progress is cancelled, no tool
        starts any more, a tool already running finishes and is recorded; it ends ``aborted``).
        ``expired``: its process was presumed lost; nothing is recorded (the next call on the
        session ends it ``failed``). Otherwise the status of the session's last turn, unchanged
        (None: none has ended yet, as in a new chat).
        """
        state = await self.calls.read_state()
        if state.running_turn is not None:
            return await abort_turn(self.calls, state.running_turn.version, principal, via)
        return None if state.last_end is None else end_status(state.last_end.finish_reason)

    async def settle_expired(self) -> AgentResponse | None:
        """Resolve this session's expired pauses by the agent's expiry policy.

        When that answers the last paused call, the turn continues (the model sees the denial).
        Returns None when nothing had expired, or while a detached turn runs in the session.
        """
        return await self.calls.settle()

    # -- reads ----------------------------------------------------------------------------------

    async def interrupts(self) -> list[PendingInterrupt]:
        """The calls paused now, in the order the model asked for them."""
        state = await self.calls.read_state()
        return [pending_interrupt(p.record, p) for p in state.open_in_call_order()]

    async def history(self) -> list[Message]:
        """The conversation as the model sees it."""
        return list((await self.calls.read_state()).messages)

    async def audit_trail(self) -> list[AuditEntry]:
        """Every answer given and every user message sent in this session, oldest first — and
        every decision the approval policy made: approvals counted, calls approved or denied by
        a rule or a grant, grants given and revoked, pauses escalated."""
        state = await self.calls.read_state()
        return [audit_entry(r, state) for r in state.audit]

    async def grants(self) -> list[GrantInfo]:
        """The grants given in this session (active, revoked, expired or used up), oldest first."""
        state = await self.calls.read_state()
        now = self.agent.clock()
        return [grant_info(g, now) for g in state.grants.values()]

    async def revoke_grant(
        self, grant_id: str, *, reason: str = "", principal: str | None = None, via: str = "python"
    ) -> GrantInfo:
        """Make the grant ``grant_id`` approve nothing more, from any process; returns it as it
        now stands. Revoking a grant that ended already (revoked, expired, used up) changes nothing:
        it keeps its end. A turn using the grant
        at this moment either wrote its approval first (that call was approved: it runs, and its
        turn goes on) or fails with ``ConcurrentUpdate`` before its call runs. Raises
        ``GrantNotFound``; ``InvalidRequest`` for a reason or principal a session cannot keep."""
        return await revoke_grant(self.calls, grant_id, reason, principal, via)

    async def last_response(self) -> AgentResponse | None:
        """The response of the latest call that ended on this session, rebuilt from the log."""
        state = await self.calls.read_state()
        return None if state.last_end is None else response_for(state, state.last_end, state.last_end_version)


class SyncChat:
    """A ``Chat`` without ``await``: the same calls, arguments, results and errors, blocking.

    Get one with ``agent.chat().sync`` (or ``chat.sync`` for an existing chat). Each method is
    the ``Chat`` method of the same name, run on pausepoint's own event loop (``run_sync``) while
    the calling thread waits — so it works in a notebook cell, where an event loop already runs.
    A streamed verb returns a ``SyncTurnStream``. A detached turn has no blocking twin:
    ``run_sync(chat.detach(...))`` starts one, and its ``DetachedTurn`` is awaited the same way.
    """

    def __init__(self, chat: Chat) -> None:
        self.chat = chat

    def __repr__(self) -> str:
        return f"<SyncChat {self.chat.agent.name} session={self.chat.session_id}>"

    @property
    def wrapped(self) -> Chat:
        """The ``Chat`` this one runs (``chat``)."""
        return self.chat

    @property
    def agent(self) -> SessionHost:
        """The agent whose session this is (``Chat.agent``)."""
        return self.chat.agent

    @property
    def session_id(self) -> str:
        """The session's id (``Chat.session_id``)."""
        return self.chat.session_id

    @property
    def principal(self) -> str | None:
        """Who is acting, unless a call names someone else (``Chat.principal``)."""
        return self.chat.principal

    send = blocking(Chat.send)
    send_stream = blocking_stream(Chat.send_stream)
    resume = blocking(Chat.resume)
    resume_stream = blocking_stream(Chat.resume_stream)
    approve = blocking(Chat.approve)
    approve_stream = blocking_stream(Chat.approve_stream)
    cancel_pending = blocking(Chat.cancel_pending)
    abort = blocking(Chat.abort)
    settle_expired = blocking(Chat.settle_expired)
    interrupts = blocking(Chat.interrupts)
    grants = blocking(Chat.grants)
    revoke_grant = blocking(Chat.revoke_grant)
    history = blocking(Chat.history)
    audit_trail = blocking(Chat.audit_trail)
    last_response = blocking(Chat.last_response)


class DetachedTurn:
    """A handle on a detached turn (``Chat.detach``).

    ``turn_id`` names the detached turn in its session: the place of its start in the session's
    log (an id, not ``AgentResponse.turn``'s count of turns; the Genkit wire's snapshot id ends
    in it). ``status()``, ``wait()`` and ``abort()`` work from this process whether the turn runs
    here or in another one.
    """

    def __init__(self, chat: Chat, turn_id: int, task: asyncio.Task[AgentResponse] | None = None) -> None:
        if not isinstance(turn_id, int) or isinstance(turn_id, bool) or turn_id < 1:
            raise InvalidRequest(f"turn_id must be a whole number from 1 (DetachedTurn.turn_id), not {turn_id!r}")
        self.chat = chat
        self.session_id = chat.session_id
        self.turn_id = turn_id
        self._task = task

    def __repr__(self) -> str:
        return f"<DetachedTurn session={self.session_id} turn={self.turn_id}>"

    async def status(self) -> TurnStatus:
        """``pending`` while it runs; then ``completed``, ``failed`` or ``aborted`` (``expired``:
        presumed lost with its process)."""
        state, turn = await find_turn(self.chat.calls, self.turn_id)
        return status_of(state, turn, self.chat.agent.clock(), self.chat.agent.abandon_after)

    async def wait(self, *, poll: float = 0.2) -> AgentResponse:
        """The turn's response once it ended: awaited when it runs in this process, otherwise
        read from the store every ``poll`` seconds. Raises ``TurnLost`` when the turn is presumed
        lost with its process (the next call on the session records its end); ``InvalidRequest``
        for a ``poll`` that is no positive number of seconds."""
        if isinstance(poll, bool) or not isinstance(poll, int | float) or not 0 < poll < math.inf:
            raise InvalidRequest(f"poll must be a positive number of seconds, not {poll!r}")
        if self._task is not None:
            return await asyncio.shield(self._task)
        agent = self.chat.agent
        while True:
            state, turn = await find_turn(self.chat.calls, self.turn_id)
            if turn.end is not None:
                return response_for(state, turn.end, turn.end_version)
            if state.lost(agent.clock(), agent.abandon_after):
                raise TurnLost(
                    f"the process running detached turn {self.turn_id} of session {self.session_id!r} stopped "
                    "before it ended; the next call on the session settles it",
                    turn_id=self.turn_id,
                )
            await asyncio.sleep(poll)

    async def abort(self, *, principal: str | None = None, via: str = "python") -> TurnStatus:
        """Stop the turn; returns its status before this call (``pending``: this call stops it;
        anything else: it had already ended and nothing changes)."""
        return await abort_turn(self.chat.calls, self.turn_id, principal, via)
