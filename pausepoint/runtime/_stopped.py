"""Calls on a session that stopped short in this process, having written part of what they
made (``turn._cut_short``): what the process knows of the tool calls they left running in the
log, so that its next call on the session settles them at once — with their real outcomes, where
it has them — rather than waiting ``abandon_after`` for a process that may be running them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..approval._fit import locate
from ..errors import ResumeRefused
from ..session._interrupts import ToolResponse, ToolRestart
from ..session._records import ApprovalGiven, CallAnswered, MessageAdded, Record
from ..session._state import SessionState
from ..turn._cut_short import started_by, unwritten_outcomes
from ..turn._journal import Journal
from ..turn._turn import Turn

__all__ = ["Stopped", "StoppedCalls", "earlier_turn_first"]


@dataclass(frozen=True, slots=True)
class Stopped:
    """A call on the session that stopped short here."""

    # The versions it may have left the log at: its last append written, or the one that failed
    # (which may have been written all the same).
    versions: frozenset[int]
    calls: frozenset[str]  # the calls it started: any still running in the log runs nowhere
    keys: frozenset[str]  # the idempotency keys of the messages and answers it took: their turn runs nowhere
    outcomes: dict[str, Record]  # the outcomes of those it could not write, by call ref
    # The restarts it claimed whose tools it never started (the claim's append failed, written
    # or not): nothing ran them, so they may run now, as the claim said (``SessionCalls._continue``).
    unstarted: tuple[CallAnswered, ...] = ()
    claimed: frozenset[str] = frozenset()  # the pauses it answered (their ids), written or not


class StoppedCalls:
    """What this process knows of the calls it stopped short on each session, while the log
    is as they left it (``left``); of a bounded number of sessions."""

    def __init__(self, kept: int = 256) -> None:
        self._journals: dict[str, Journal] = {}  # session id -> the journal of the call on it now
        self._stopped: OrderedDict[str, Stopped] = OrderedDict()
        self._kept = kept

    def watch(self, journal: Journal) -> None:
        """``journal`` is the current call's on its session (calls on a session here are serialised)."""
        self._journals[journal.state.session_id] = journal

    def begin(self, session_id: str) -> None:
        self._journals.pop(session_id, None)

    def ended(self, session_id: str, failed: bool) -> None:
        """The call on ``session_id`` ended; ``failed``: by an exception (a cancellation included)."""
        journal = self._journals.pop(session_id, None)
        if journal is None or not (journal.written or journal.pending):
            return  # it wrote nothing, nor tried: what is known of an earlier call still holds
        if not failed:
            self._stopped.pop(session_id, None)
            return
        state, records = journal.state, [*journal.written, *journal.pending]
        calls = frozenset(started_by(records))
        keys = frozenset(
            r.idempotency_key
            for r in records
            if isinstance(r, CallAnswered | ApprovalGiven | MessageAdded) and r.idempotency_key
        )
        if not calls and not keys and not state.mid_turn:
            return  # it started nothing a later call could wait for (nor left its turn waiting for the model)
        versions = frozenset({state.durable_version, state.version})
        unstarted = tuple(
            r for r in records if isinstance(r, CallAnswered) and r.decision == "restart"
            and r.call_ref not in journal.dispatched
        )  # fmt: skip
        claimed = frozenset(r.ref for r in records if isinstance(r, CallAnswered))
        outcomes = unwritten_outcomes(journal.pending)
        self._stopped[session_id] = Stopped(versions, calls, keys, outcomes, unstarted, claimed)
        self._stopped.move_to_end(session_id)
        while len(self._stopped) > self._kept:
            self._stopped.popitem(last=False)

    def forget(self, session_id: str) -> None:
        """The call that stopped short on ``session_id`` left nothing: its append was refused
        (``ConcurrentUpdate``), so the log went on without any of it."""
        self._stopped.pop(session_id, None)

    def left(self, state: SessionState) -> Stopped | None:
        """What a call that stopped short here left in ``state``, if the log is as it left it."""
        found = self._stopped.get(state.session_id)
        return found if found is not None and state.version in found.versions else None

    def unstarted(self, state: SessionState) -> list[CallAnswered]:
        """The restarts a call here claimed, and whose tools it never started (its append failed,
        though the store kept it), when they are all that runs in the session: nothing ran them."""
        left = self.left(state)
        claims = [c for c in (left.unstarted if left else ()) if c.call_ref in state.running]
        return claims if claims and set(state.running) <= {c.call_ref for c in claims} else []

    def retried(
        self, state: SessionState, answers: Sequence[ToolResponse | ToolRestart], principal: str | None
    ) -> bool:
        """Whether ``answers`` are those a call here gave and stopped short after writing (its
        store reported a failure, or its process lost the reply): each answers a pause that call
        claimed, as it did, for the same principal. Such a retry, keyed or not, goes on from where
        that call stopped instead of being told the pauses are resolved."""
        left = self.left(state)
        return left is not None and bool(answers) and all(_as_claimed(state, left, a, principal) for a in answers)


async def earlier_turn_first(
    stopped: StoppedCalls, state: SessionState, turn: Callable[[SessionState], Turn]
) -> SessionState:
    """Before a message: the session's turn a call here cut short goes on first, as its retry
    would — the restarts it claimed and never started run, as their claim said; the results it
    kept (its store refused them) are recorded as they were, and its model answers them — so the
    model reads them before the message, and that turn's idempotency key gets its real end (not
    "lost", its process alive). Returns the session as that leaves it."""
    left = stopped.left(state)
    if left is None:
        return state
    if unstarted := stopped.unstarted(state):
        earlier = turn(state)
        await earlier.after_answers(unstarted)
        return earlier.state
    kept = bool(state.running) and left.calls.issuperset(state.running)
    if not (kept or state.awaiting_model):
        return state
    earlier = turn(state)
    if kept:
        await earlier.recover([state.calls[ref] for ref in state.running], left.outcomes)
    await earlier.proceed()
    return earlier.state


def _as_claimed(state: SessionState, left: Stopped, answer: ToolResponse | ToolRestart, principal: str | None) -> bool:
    """Whether ``answer`` is the one the stopped call ``left`` gave its pause: claimed by that
    call, for ``principal``, with the same decision and what it carried."""
    try:
        pause = locate(state, answer, "python")  # the pause it names, as answering it found it
    except ResumeRefused:
        return False
    claim = pause.answer
    if claim is None or claim.ref not in left.claimed or claim.principal != principal:
        return False
    if isinstance(answer, ToolRestart):  # the input it runs: the one shown, given again, is no edit
        shown = pause.record.input
        ran = shown if claim.replace_input is None else claim.replace_input
        return claim.decision == "restart" and ran == (shown if answer.replace_input is None else answer.replace_input)
    if answer.decision == "deny":
        return claim.decision == "deny" and (claim.reason or None) == (answer.reason or None)
    return claim.decision == "respond" and claim.output == answer.output
