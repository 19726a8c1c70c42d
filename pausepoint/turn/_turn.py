"""One call of send / resume / cancel on a session: the turn loop and what it records.

The loop is a small state machine over the session state:

    model call ──(text only)──────────────────────────────▶ end: stop
        │
        └─(tool requests)─▶ run calls ─(all have results)─▶ flush, next model call
                                │
                                └─(some paused)───────────▶ end: interrupted

Records go through a ``Journal`` (``_journal``): they are folded into the state as they are
made and written to the store at flush points (see ``Journal`` for each one and why it is
needed). A model failure before the first flush leaves the session exactly as it was. Each
append carries the events announcing its pauses, answers and turn ends (``_events``), so the
store writes them in the same transaction.

Before calls run, the approval policy has its say (``Turn.gate``, see ``_gate``): a call may be
approved or denied without a person, or paused for one; a decision that lets a call run is
written before the call starts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from ..approval._gate import mark_approved
from ..content._intake import adopted, model_message
from ..content._messages import Message, ToolRequestPart
from ..errors import ConcurrentUpdate, ModelError, ModelOutputError, PausepointError
from ..models._model import ModelChunk, ModelRequest, ModelResponse, PairedText, TextDelta
from ..session._records import (
    ApprovalPaused,
    ApprovalRequest,
    CallAnswered,
    CallCompleted,
    CallDecided,
    CallPaused,
    MessageAdded,
    Record,
    TurnEnded,
    encoded_reply,
    new_ref,
)
from ..session._response import AgentFinishReason, AgentResponse
from ..session._state import Call, HistoryView, SessionState
from ..session._views import pending_interrupt, response_for
from ..tools._dispatch import CallJob, Completed, Outcome, Paused, dispatch
from ..tools._tool import Interrupt
from ._cut_short import CANCELLED, UNKNOWN_OUTCOME, written_running
from ._host import TurnHost
from ._journal import Journal
from ._streaming import (
    Emit,
    InterruptChunk,
    TextChunk,
    ToolCallDeltaChunk,
    ToolProgressChunk,
    ToolRequestChunk,
    ToolResultChunk,
    TurnEndChunk,
)
from ._waiting import other_writers_end

__all__ = ["Turn", "TurnHost"]

log = logging.getLogger("pausepoint")

_END_ATTEMPTS = 20

_MODEL_FINISH = {
    "stop": AgentFinishReason.STOP,
    "length": AgentFinishReason.LENGTH,
    "blocked": AgentFinishReason.BLOCKED,
    "other": AgentFinishReason.STOP,
}


# The result of a call out of a reply the provider blocked (its safety filter, a refusal): not run.
_BLOCKED_CALL = {"error": "not run: the model provider blocked the reply that asked for this call"}


class _Aborted(Exception):
    """A detached turn's model call was cancelled because the turn was asked to abort."""


class Turn:
    """Runs the model loop and tool calls for one call on a session, recording as it goes."""

    def __init__(
        self,
        agent: TurnHost,
        journal: Journal,
        *,
        reread: Callable[[str], Awaitable[SessionState]],
        principal: str | None,
        emit: Emit | None,
        idempotency_key: str | None = None,
        began: datetime | None = None,
    ) -> None:
        self.agent = agent
        self.journal = journal
        self.reread = reread  # the session as the store holds it now (another writer's records in)
        self.principal = principal
        self.emit = emit
        self.idempotency_key = idempotency_key
        self.began = began
        # A detached turn: its id (its TurnStarted version) and the signal that stops it.
        self.turn_id: int | None = None
        self.abort: asyncio.Event | None = None
        self._text_streamed = False
        self._streamed_bytes = 0  # of the model call's chunks so far: past the store's limit, it fails
        # Whether the approval policy (or a tool) has any say at all: if not, ``gate`` skips it.
        self._judged = agent.approvals.has_say
        # Whether the pending records hold results of a batch this call ran (written later).
        self._carry = False
        self._unanswered = False  # a detached message dropped unanswered (``stop``)
        # How many records the store held when this call began: more, and the call has recorded some.
        self._recorded_from = journal.state.durable_version
        # The interrupt chunks of the calls the gate paused, until the calls asked before them end.
        self._held: dict[int, InterruptChunk] = {}
        if emit is not None:
            journal.on_message = self._on_message

    @property
    def state(self) -> SessionState:
        return self.journal.state

    # -- the loop -------------------------------------------------------------------------------

    async def run_model(self) -> AgentResponse:
        """Call the model until it answers without tools, a call pauses, or ``max_turns`` is hit."""
        agent = self.agent
        for _ in range(agent.max_turns):
            if self._aborting():
                return await self.stop()
            request = ModelRequest(HistoryView(self.state.messages), agent.system, agent.tool_definitions, agent.config)
            self._text_streamed, self._streamed_bytes = False, 0
            try:
                with agent.telemetry.model_call(agent.name, agent.model.name, request) as call:
                    response = await self._generate(request)
                    call.done(response)
                if self._aborting():  # a reply that arrives once the abort is known is dropped
                    return await self.stop()
                message, refused = model_message(
                    adopted(response.message, new_ref), response.finish_reason, agent.json_limits
                )
                added = MessageAdded(message, at=agent.clock())
                encoded = encoded_reply(added, agent.store.max_record_bytes)
            except _Aborted:
                return await self.stop()
            except BaseException as exc:
                ended = await self._after_model_failure(exc)
                if ended is not None:
                    return ended
                raise
            self.journal.add_encoded((added, encoded))
            requests = message.tool_requests
            if self.emit is not None:
                if not self._text_streamed and message.text:
                    self.emit(TextChunk(message.text))
                for request_part in requests:
                    self.emit(ToolRequestChunk(request_part.ref, request_part.name, request_part.input))
            if not requests:
                return await self.end(_MODEL_FINISH[response.finish_reason])
            blocked = response.finish_reason == "blocked"
            if blocked:  # the provider's filter stopped this reply: none of its calls runs, each is told so
                refused = dict.fromkeys((r.ref for r in requests), _BLOCKED_CALL)
            batch = [CallJob(r, r.input, refusal=refused.get(r.ref)) for r in requests]
            jobs = await self.gate(batch)
            if any(self._must_not_repeat(j.request) for j in jobs) or self._decided():
                # Record the calls before a tool that must not run twice starts: if this process
                # dies mid-call, the session then knows the call may have run (see recover()).
                # The policy's approvals are written before the calls they let run, too.
                await self.journal.flush(agent.clock())
            failed = await self.run_calls(jobs, batch)
            if blocked:
                return await self.end(AgentFinishReason.BLOCKED)
            if failed is not None and agent.tool_errors == "fail":
                return await self.end(AgentFinishReason.FAILED, error=failed)
            if self.state.open:
                return await self.end(AgentFinishReason.INTERRUPTED)
            if response.finish_reason == "length" and any(type(r.input) is str for r in requests):
                return await self.end(AgentFinishReason.LENGTH)  # cut off inside a call: say so
            self._carry = True  # the results go with the next append (see Journal)
        return await self.end(AgentFinishReason.MAX_TURNS)

    async def _after_model_failure(self, exc: BaseException) -> AgentResponse | None:
        """The model call after a batch failed or was cancelled: the batch's results are written
        before the error reaches the caller, as if before the call. If this call had recorded
        something (results, answers) and runs for its caller (not detached), its turn ends: a
        ``ModelError`` ends it ``failed`` and that is its response (what a retry of a keyed call
        gets too); a cancellation ends it ``aborted`` before it goes on, so that no process waits
        for a turn nothing runs (``runtime._busy``). None: the caller gets the error, the
        session as it was — as it does if writing fails."""
        journal = self.journal
        try:
            if self._carry and journal.pending:
                await journal.flush(self.agent.clock())
            if self.turn_id is not None or journal.state.durable_version <= self._recorded_from:
                return None
            if isinstance(exc, ModelError):
                return await self.end(AgentFinishReason.FAILED, error=f"{type(exc).__name__}: {exc}")
            if isinstance(exc, asyncio.CancelledError):
                await self.end(AgentFinishReason.ABORTED)
        except Exception:
            log.warning("could not record how session %s's turn ended", self.state.session_id, exc_info=True)
        return None

    async def after_answers(self, claims: list[CallAnswered]) -> AgentResponse:
        """Continue a resume whose claims are written: run restarts, then the model if it is our turn."""
        state = self.state
        jobs = []
        for claim in claims:
            if claim.decision != "restart":
                continue
            paused = state.pauses[claim.ref].record
            request = state.calls[claim.call_ref].request
            given = paused.input if claim.replace_input is None else claim.replace_input
            # Replaced now, or by an earlier restart of the call (which paused again): the model's.
            replaced = claim.replace_input is not None or self._replaced_before(request, given)
            original = request.input if replaced else None
            jobs.append(CallJob(request, given, resumed_metadata=claim.resumed_metadata or {}, original_input=original))
        batch, failed = jobs, None
        if batch:
            jobs = await self.gate(batch)
            if self._decided():
                await self.journal.flush(self.agent.clock())
            failed = await self.run_calls(jobs, batch)
        if failed is not None and self.agent.tool_errors == "fail":
            return await self.end(AgentFinishReason.FAILED, error=failed)
        return await self.proceed()

    def _replaced_before(self, request: ToolRequestPart, paused_input: Any) -> bool:
        """Whether a pause's input is other than the model's as the tool read it (defaults filled
        in): an earlier restart of the call replaced it, and the call paused again."""
        if paused_input == request.input:
            return False
        tool = self.agent.tools.get(request.name)
        if tool is None:
            return True
        try:  # as the tool reads each (by alias or by field name alike: a pause's input is either)
            return bool(tool.validate_input(request.input) != tool.validate_input(paused_input))
        except ValidationError:
            return True  # the tool could not have run the model's input: a person's replaced it

    async def recover(self, calls: list[Call], known: Mapping[str, Record] | None = None) -> None:
        """Settle calls whose process died while running them (``SessionState.abandoned``), or
        that this process stopped short of recording (their outcomes ``known``: recorded now). An
        idempotent tool runs again; any other call is recorded as of unknown outcome — it may or
        may not have happened — so it never happens twice, and the model is told."""
        rerun = []
        for call in calls:
            tool, job = self.agent.tools.get(call.request.name), CallJob(call.request, call.request.input)
            if known and call.request.ref in known:
                self.journal.add(known[call.request.ref])
            elif tool is not None and tool.idempotent:
                rerun.append(job)
            else:
                self.journal.add(self._record(Completed(job, dict(UNKNOWN_OUTCOME), is_error=True)))
        if rerun:
            await self.run_calls(rerun)

    async def proceed(self, since: int | None = None) -> AgentResponse:
        """From a state with no call running here: continue the model, report pauses, or wait
        for the writer finishing the turn (its end: the first after version ``since``, by
        default the session as it stands now).

        Our records are written first: the append brings in anything another writer added
        meanwhile, so the decision is made on the session as it is now (not durably: whatever
        follows ends with a durable append).
        """
        since = self.state.version if since is None else since
        await self.journal.flush(self.agent.clock(), durable=False)
        if self.state.awaiting_model:
            return await self.run_model()
        if self.state.open:
            return await self.end(AgentFinishReason.INTERRUPTED)
        return await other_writers_end(self, since)

    async def stop(self) -> AgentResponse:
        """End a detached turn that was asked to abort. A user message the model has not
        answered is dropped: the history is as if it had not been sent."""
        if not self._carry and any(isinstance(r, MessageAdded) for r in self.journal.pending):
            await self.journal.discard(keep=lambda record: not isinstance(record, MessageAdded))
            self._unanswered = True  # its response has no model message: the last one is an earlier turn's
        return await self.end(AgentFinishReason.ABORTED)

    async def fail(self, error: str) -> AgentResponse:
        """End a detached turn that failed: what it had not written is dropped, as for any
        failed call, and the failure is recorded as its end."""
        await self.journal.discard()
        return await self.end(AgentFinishReason.FAILED, error=error)

    async def end(self, reason: AgentFinishReason, error: str | None = None) -> AgentResponse:
        """Record how this call ended and return its response.

        The end record lists the calls still open, so it is computed from the session as the
        append finds it: if another writer changed the session meanwhile, the records that
        can be replayed are, and the end record is computed again. A detached turn asked to
        abort ends ``aborted``.
        """
        journal = self.journal
        for _ in range(_END_ATTEMPTS):
            state = journal.state
            ended = self._ended_elsewhere()
            if ended is not None:
                return self.finished(ended)
            now = self.agent.clock()
            record = TurnEnded(
                turn=state.turn,
                finish_reason=(AgentFinishReason.ABORTED if self._aborting() else reason).value,
                open_refs=[pause.record.ref for pause in state.open_in_call_order()],
                error=error,
                idempotency_key=self.idempotency_key,
                message_index=None if self._unanswered else state.last_model_index(),
                began=self.began,
                at=now,
                started=self.turn_id,
            )
            journal.add(record)
            try:
                await journal.flush(now, rebase=False)
            except ConcurrentUpdate:
                journal.pending.remove(record)
                if await journal.absorb_unrelated():
                    continue
                if any(isinstance(r, MessageAdded) for r in journal.pending):
                    raise
                since = journal.state.version
                await journal.refresh()
                if reason == AgentFinishReason.INTERRUPTED and not journal.state.open:
                    # Another writer answered the last pause meanwhile: the turn goes on, ours to
                    # continue if our unwritten results complete its batch, else theirs to finish.
                    if journal.pending:
                        return await self.proceed(since)
                    return await other_writers_end(self, since)
                continue
            return self.finished(response_for(journal.state, record, journal.state.version))
        raise ConcurrentUpdate(f"session {self.state.session_id!r} kept changing; the turn's end was not recorded")

    def finished(self, response: AgentResponse) -> AgentResponse:
        """``response``, streamed as the turn's end (``TurnEndChunk``) to a streaming caller."""
        if self.emit is not None:
            self.emit(TurnEndChunk(response))
        return response

    # -- tool calls -----------------------------------------------------------------------------

    async def gate(self, jobs: list[CallJob]) -> list[CallJob]:
        """The approval policy's say before calls run (``Approvals.before``): records what it decided —
        approvals by a rule or a grant, denials with their result, pauses for a person — and
        returns the calls that may run now. Calls the policy does not concern pass untouched."""
        agent = self.agent
        if not self._judged:
            return jobs
        kept = []
        for job in jobs:
            request = job.request
            now = agent.clock()
            verdict = await agent.approvals.before(self.state, job, self.principal, now, agent.json_limits)
            if verdict.kind == "run":
                kept.append(job)
            elif verdict.kind == "approve":  # as a person's Approve: see Verdict
                self.journal.add(CallDecided(request.ref, request.name, "approve", now, verdict.rule, verdict.grant))
                if verdict.yes is not None:
                    self.journal.add(CallCompleted(request.ref, request.name, verdict.yes))
                else:
                    if verdict.as_approved:
                        mark_approved(job)
                    kept.append(job)
            elif verdict.kind == "deny":
                denial = {"denied": True, "reason": verdict.reason or ""}
                self.journal.add(
                    CallDecided(request.ref, request.name, "deny", now, verdict.rule, reason=verdict.reason),
                    CallCompleted(request.ref, request.name, denial),
                )
            else:
                signal = Interrupt({"reason": verdict.reason}, ttl=verdict.ttl)
                record = self._record(Paused(job, verdict.input, signal), verdict.request)
                self.journal.add(record)
                if self.emit is not None and isinstance(record, CallPaused):  # streams in its place (run_calls)
                    self._held[id(job)] = InterruptChunk(pending_interrupt(record), record.call_ref)
        return kept

    def _decided(self) -> bool:
        """Whether the policy approved a call whose decision is not written yet."""
        return any(isinstance(r, CallDecided) for r in self.journal.pending)

    async def run_calls(self, jobs: list[CallJob], batch: list[CallJob] | None = None) -> str | None:
        """Run calls ``jobs`` of ``batch`` (the calls the model asked for, in its order; the
        others the gate decided). Each outcome's record is made when its call ends (a pause's
        span is then its call's child) and added once the calls asked before it have theirs,
        so a batch's pauses and results are in the order the model asked for the calls on
        every surface (stream, response, history, REST), however the calls' timing falls; a
        pause streams once the calls before it have ended, the gate's too. Returns the error of
        the first call, in that order, that failed, if any. (A batch cut short by cancellation
        records nothing: the session's state, not durable yet, is dropped.)"""
        batch = jobs if batch is None else batch
        position = {id(job): index for index, job in enumerate(batch)}
        running = {id(job) for job in jobs}
        # The gate's calls are recorded already: each stands in its place for what it streams.
        made: list[Record | CallJob | None] = [None if id(job) in running else job for job in batch]
        errors: dict[int, str] = {}
        added = 0

        def add_ended() -> None:
            nonlocal added
            while added < len(made) and (ended := made[added]) is not None:
                if isinstance(ended, CallJob):
                    held = self._held.pop(id(ended), None)
                    if held is not None and self.emit is not None:
                        self.emit(held)
                else:
                    self._add(ended)
                added += 1

        def on_outcome(outcome: Outcome) -> None:
            index = position[id(outcome.job)]
            made[index] = self._record(outcome)
            if isinstance(outcome, Completed) and outcome.error is not None:
                errors[index] = f"tool {outcome.job.request.name!r} failed: {outcome.output.get('error')}"
            add_ended()

        add_ended()  # the gate's calls asked before any that runs
        if not jobs:
            return None
        self.journal.dispatched.update(job.request.ref for job in jobs)
        try:
            await dispatch(
                jobs,
                self.agent.tools,
                session_id=self.state.session_id,
                principal=self.principal,
                on_progress=self._on_progress if self.emit else None,
                on_outcome=on_outcome,
                limits=self.agent.json_limits,
                max_record_bytes=self.agent.store.max_record_bytes,
                traced=self.agent.telemetry.tool_call if self.agent.telemetry.tracing else None,
            )
        except asyncio.CancelledError:  # cut short here: leave no call running in the log (``_cut_short``)
            if written_running(self.journal.pending, [job.request.ref for job in jobs]):
                for job in (job for job in jobs if made[position[id(job)]] is None):
                    on_outcome(Completed(job, dict(CANCELLED), is_error=True))
                try:
                    await self.end(AgentFinishReason.ABORTED)
                except Exception:
                    log.warning("could not record the calls cut short in %s", self.state.session_id, exc_info=True)
            raise
        return errors[min(errors)] if errors else None

    def _add(self, record: Record) -> None:
        """Add a call's outcome to the journal; a pause streams now, as an ``interrupt`` chunk."""
        self.journal.add(record)
        if self.emit is not None and isinstance(record, CallPaused):
            self.emit(InterruptChunk(pending_interrupt(record), record.call_ref))

    def _record(self, outcome: Outcome, approval: ApprovalRequest | None = None) -> Record:
        """The record of a call's outcome. A pause the approval policy governs — the gate's
        (``approval``), or a tool's own the policy has a say on — is an ``ApprovalPaused``."""
        request = outcome.job.request
        if isinstance(outcome, Completed):
            return CallCompleted(request.ref, request.name, outcome.output, outcome.is_error)
        assert isinstance(outcome, Paused)
        agent = self.agent
        now = agent.clock()
        ttl: timedelta | None = outcome.signal.ttl
        ref = new_ref()
        expires_at = None if ttl is None else now + ttl
        tool = agent.tools[request.name]
        if approval is None:
            approval = agent.approvals.request(tool, self.state, outcome.input, outcome.signal.metadata)
        pause: dict[str, Any] = {
            "ref": ref,
            "call_ref": request.ref,
            "name": request.name,
            "input": outcome.input,
            "metadata": outcome.signal.metadata,
            "fingerprint": tool.fingerprint,
            "turn": self.state.turn,
            "at": now,
            "expires_at": expires_at,
            "trace": agent.telemetry.pause(request.name, ref, request.ref, expires_at),
        }
        return CallPaused(**pause) if approval is None else ApprovalPaused(**pause, approval=approval)

    # -- helpers --------------------------------------------------------------------------------

    def _ended_elsewhere(self) -> AgentResponse | None:
        """A detached turn presumed lost that another process ended meanwhile: that end stands."""
        turn = self.state.detached.get(self.turn_id) if self.turn_id is not None else None
        if turn is None or turn.end is None:
            return None
        return response_for(self.state, turn.end, turn.end_version)

    def _aborting(self) -> bool:
        """Whether this is a detached turn asked to abort (here, or in the log by anyone)."""
        if self.turn_id is None:
            return False
        if self.abort is not None and self.abort.is_set():
            return True
        turn = self.state.detached.get(self.turn_id)
        return turn is not None and turn.abort is not None

    async def _generate(self, request: ModelRequest) -> ModelResponse:
        """The model call; for a detached turn, cancelled when the turn is asked to abort.

        An exception of the model's own that is no pausepoint error (a model function's bug, a
        provider SDK's error no adapter mapped) becomes a ``ModelError`` naming its type, so
        every surface reports a typed failure of the model, never an internal one; its text,
        which may say anything, stays in the log and in ``__cause__``."""
        try:
            call = self.agent.model.generate(request, PairedText(self._on_model_chunk) if self.emit else None)
            if self.abort is None:
                return await call
            return await self._unless_aborted(call)
        except (PausepointError, _Aborted):
            raise
        except Exception as exc:
            if isinstance(exc.__cause__, ModelOutputError):  # the stream outgrew the store (wrapped on its way)
                raise exc.__cause__ from None
            name = self.agent.model.name
            log.warning("model %r failed in session %s", name, self.state.session_id, exc_info=True)
            raise ModelError(f"model {name!r} failed ({type(exc).__name__})", model=name) from exc

    async def _unless_aborted(self, call: Awaitable[ModelResponse]) -> ModelResponse:
        """``call``, cancelled (``_Aborted``) once the detached turn is asked to abort."""
        assert self.abort is not None
        task = asyncio.ensure_future(call)
        stop = asyncio.ensure_future(self.abort.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not task.done():
                task.cancel()
                await asyncio.wait({task})  # let the cancelled call wind down; its outcome no longer matters
        if task.cancelled():
            raise _Aborted
        return task.result()

    def _must_not_repeat(self, request: ToolRequestPart | CallAnswered) -> bool:
        """Whether running this call twice could do harm (unknown tools never run at all)."""
        tool = self.agent.tools.get(request.name)
        return tool is not None and not tool.idempotent

    def restarts_must_not_repeat(self, claims: list[CallAnswered]) -> bool:
        """Whether ``claims`` restart a call of a tool that must not run twice (their append must
        then be durable: the tool runs right after it)."""
        return any(c.decision == "restart" and self._must_not_repeat(c) for c in claims)

    def _on_message(self, message: Message) -> None:
        """Stream a tool message when the history gets it: its results arrive together, once the
        last call of the batch has one, so the chunks rebuild exactly the history."""
        assert self.emit is not None
        if message.role == "tool":
            for part in message.tool_responses:
                self.emit(ToolResultChunk(part.ref, part.name, part.output, part.is_error))

    def _on_model_chunk(self, chunk: ModelChunk) -> None:
        """Stream a delta of the model's reply — unless the reply has outgrown what its record
        may hold: then the call fails there (``ModelOutputError``), mid-stream, rather than
        streaming all of a reply no session can keep."""
        assert self.emit is not None
        text = chunk.text if isinstance(chunk, TextDelta) else (chunk.name or "") + (chunk.arguments_delta or "")
        self._streamed_bytes += len(text.encode("utf-8", "surrogatepass"))
        limit = self.agent.store.max_record_bytes
        if self._streamed_bytes > limit:
            raise ModelOutputError(
                f"the model's reply cannot be recorded: it streamed more than the store's limit of {limit} bytes",
                path="$",
                rule="max_record_bytes",
                limit=limit,
            )
        if isinstance(chunk, TextDelta):
            self._text_streamed = True
            self.emit(TextChunk(chunk.text))
        else:
            self.emit(ToolCallDeltaChunk(chunk.index, chunk.name, chunk.arguments_delta))

    def _on_progress(self, job: CallJob, data: Any) -> None:
        assert self.emit is not None
        self.emit(ToolProgressChunk(job.request.ref, job.request.name, data))
