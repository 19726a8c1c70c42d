"""Whether a session is free for a new call, from what its log says runs elsewhere: a detached
turn, tool calls with no result yet, or a turn whose model is being asked — and which of those
are presumed lost with their process (nothing recorded in the session for ``abandon_after``).

In one process, calls on a session are serialised by its lock; across processes the log is all
there is, so a call that finds another process's work unfinished waits for it
(``TurnInProgress``) until that process is presumed lost. What a call that stopped short *here*
left (``_stopped``) is never waited for: nothing runs it any more.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from datetime import datetime, timedelta

from ..approval._fit import ANSWER_THEM
from ..content._jsondata import time_text
from ..errors import IdempotencyKeyReused, PendingInterrupts, ResumeInProgress, TurnInProgress
from ..session._records import Record
from ..session._state import Call, SessionState
from ..turn._turn import Turn
from ._launch import lost_turn_end
from ._sessions import Running
from ._stopped import StoppedCalls

__all__ = [
    "abandoned_calls",
    "check_free",
    "check_model_free",
    "check_not_paused",
    "check_not_running_here",
    "end_lost_turn",
    "holding",
    "key_reused",
    "lost_beside",
]

# The sessions whose lock the running code holds (an operation on a session, and what it runs:
# a tool of its turn, in this task or a thread of it, which inherits this).
_HELD: ContextVar[frozenset[tuple[int, str]]] = ContextVar("pausepoint_sessions_held", default=frozenset())


@contextlib.contextmanager
def holding(sessions: object, session_id: str) -> Iterator[None]:
    """Note, for what runs inside, that it holds the session's lock: a call on the same session
    (of the same agent) from there — a tool of the turn sending on its own session — is refused
    with ``TurnInProgress``, as it is from another process, rather than waiting for ever for a
    lock its own turn holds (found by a probe: it hung, no error)."""
    key, held = (id(sessions), session_id), _HELD.get()
    if key in held:
        raise TurnInProgress(
            f"this call was made inside a turn of session {session_id!r} (by one of its tools, say): it cannot "
            "wait for the session its own turn holds; make it once the turn has ended"
        )
    token = _HELD.set(held | {key})
    try:
        yield
    finally:
        _HELD.reset(token)


def check_not_running_here(
    running: Running | None, session_id: str, key: str | None, request_hash: str | None = None
) -> None:
    """Refuse a call while a detached turn ``running`` in this process holds the session, rather
    than wait for its lock: ``ResumeInProgress`` for a retry of the call that started it (the
    same idempotency ``key`` and request), ``IdempotencyKeyReused`` for that key with another
    request (``request_hash``: as another process is told), ``TurnInProgress`` for any other."""
    if running is None:
        return
    if key is not None and running.key == key:
        if None not in (request_hash, running.request_hash) and request_hash != running.request_hash:
            raise key_reused(key)
        raise ResumeInProgress(f"the call with idempotency key {key!r} has not finished yet", key=key)
    asked = "an abort was asked: it stops once a tool it runs finishes" if running.abort.is_set() else None
    raise TurnInProgress(
        f"a detached turn is running in session {session_id!r}: {asked or 'wait for it to end, or abort it'}",
        turn_id=running.turn_id,
    )


def key_reused(key: str) -> IdempotencyKeyReused:
    """The refusal of ``key`` sent again with another request (or by another principal)."""
    return IdempotencyKeyReused(
        f"idempotency key {key!r} was used for a different message or resume in this session, or by another "
        "principal: a key replays only the same request by the same principal",
        key=key,
    )


def check_free(state: SessionState, now: datetime, abandon_after: timedelta) -> None:
    """Refuse any call (``TurnInProgress``) while a detached turn runs in the session; one
    presumed lost with its process does not count (``end_lost_turn`` ends it)."""
    running = state.running_turn
    if running is not None and not state.lost(now, abandon_after):
        asked = running.abort
        what = (
            f"an abort was asked at {time_text(asked.at)}: it stops once the process running it sees that (a tool "
            f"it runs finishes first), or, that process gone, ends once presumed lost ({abandon_after} after "
            "the session's last record)"
            if asked is not None
            else "wait for it to end, or abort it"
        )
        raise TurnInProgress(
            f"a detached turn is running in session {state.session_id!r}: {what}", turn_id=running.version
        )


def check_not_paused(state: SessionState, now: datetime, via: str) -> None:
    """Refuse a message (``PendingInterrupts``) while calls of the session are paused — those
    whose time ran out aside (the expiry policy answers them first) — saying how to answer them
    on the surface ``via``."""
    expired = {p.record.ref for p in state.expired(now)}
    live = [p.record.call_ref for p in state.open_in_call_order() if p.record.ref not in expired]
    if live:
        raise PendingInterrupts(
            f"{len(live)} call(s) are paused in session {state.session_id!r}: "
            + ANSWER_THEM.get(via, ANSWER_THEM["python"]),
            refs=live,
        )


def check_model_free(state: SessionState, now: datetime, abandon_after: timedelta, stopped: StoppedCalls) -> None:
    """Refuse a call that would ask the model — a message, an empty resume — while another
    process's turn asks it (the results of its tools recorded, its end not yet), unless that
    process is presumed lost. (An answer needs no such check: such a turn has no pause open.)"""
    if state.mid_turn and not state.still(now, abandon_after) and stopped.left(state) is None:
        raise TurnInProgress(
            f"a turn of session {state.session_id!r} is asking its model in another process; try again when "
            f"it ends (or after {abandon_after} it is presumed lost)"
        )


def check_no_turn_elsewhere(
    state: SessionState, now: datetime, abandon_after: timedelta, stopped: StoppedCalls
) -> None:
    """Refuse (``TurnInProgress``) while another process's turn runs the session's calls or asks
    its model about their results, unless that process is presumed lost."""
    abandoned_calls(state, now, abandon_after, stopped)
    check_model_free(state, now, abandon_after, stopped)


def end_lost_turn(turn: Turn, now: datetime, abandon_after: timedelta) -> None:
    """Record the end of a detached turn presumed lost with its process, if there is one."""
    state = turn.state
    if state.running_turn is not None and state.lost(now, abandon_after):
        turn.journal.add(lost_turn_end(state, now, state.running_turn))


def abandoned_calls(
    state: SessionState, now: datetime, abandon_after: timedelta, stopped: StoppedCalls
) -> tuple[list[Call], Mapping[str, Record]]:
    """Calls of the session still running with no result, once presumed lost with their
    process — or at once, if a call in this process started them and stopped short (with the
    outcomes it knows of them); raises ``TurnInProgress`` while they may still be running
    somewhere."""
    if not state.running or stopped.unstarted(state):  # approved here, never started: whoever finds
        return [], {}  # them runs them, as their claim said (``SessionCalls``), none is lost
    lost = state.abandoned(now, abandon_after)
    left = stopped.left(state)
    if lost is None and left is not None and left.calls.issuperset(state.running):
        return [state.calls[ref] for ref in state.running], left.outcomes
    if lost is None:
        raise TurnInProgress(
            f"tool calls of session {state.session_id!r} have no recorded result yet: another process runs "
            f"them, or asks its model about their results; try again when its turn ends (or after "
            f"{abandon_after} they are presumed lost)",
            refs=state.running,
        )
    return lost, left.outcomes if left is not None else {}


def lost_beside(
    state: SessionState, now: datetime, abandon_after: timedelta, stopped: StoppedCalls
) -> tuple[list[Call], Mapping[str, Record]]:
    """The calls of the batch an answer completes that died with their process (``abandoned_calls``:
    to settle with the answer, as nobody else will); none while they may still run elsewhere (that
    process finishes the turn)."""
    try:
        return abandoned_calls(state, now, abandon_after, stopped)
    except TurnInProgress:
        return [], {}
