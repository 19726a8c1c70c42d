"""Stopping a detached turn from any process (``abort_turn``), and finding one in its session;
starting one is ``_launch``'s, its handle (``DetachedTurn``) ``_chat``'s.
"""

from __future__ import annotations

import asyncio

from ..errors import ConcurrentUpdate, SessionNotFound, VersionConflict
from ..session._records import AbortRequested, encode_record
from ..session._state import Detached, SessionState
from ..stores import LogEntry
from ._calls import SessionCalls
from ._launch import TurnStatus, inside, status_of

__all__ = ["abort_turn", "find_turn"]

_ABORT_ATTEMPTS = 20
# How long an abort waits for a turn running in this process to stop (its model call cancelled,
# its end recorded) before it returns: a tool already running finishes first, however long it
# takes, and meanwhile the turn is still in progress.
STOP_WAIT = 5.0


async def find_turn(chat: SessionCalls, turn_id: int) -> tuple[SessionState, Detached]:
    state = await chat.read_state()
    turn = state.detached.get(turn_id)
    if turn is None:
        raise SessionNotFound(f"no detached turn {turn_id} in session {chat.session_id!r}", turn_id=turn_id)
    return state, turn


async def abort_turn(chat: SessionCalls, turn_id: int, principal: str | None, via: str) -> TurnStatus:
    """Ask the detached turn ``turn_id`` to stop: an ``AbortRequested`` record, appended (from
    any process). A turn running in this process is told at once, and waited for (up to
    ``STOP_WAIT``), so the session takes its next call as soon as this returns; one running in
    another process learns of it by polling the log. Returns the turn's status before."""
    agent = chat.agent
    for _ in range(_ABORT_ATTEMPTS):
        state = await chat.peek_state()  # not waiting for the turn, which may hold the session here
        turn = state.detached.get(turn_id)
        if turn is None:
            raise SessionNotFound(f"no detached turn {turn_id} in session {chat.session_id!r}", turn_id=turn_id)
        now = agent.clock()
        status = status_of(state, turn, now, agent.abandon_after)
        if turn.end is not None or turn.abort is not None or status is TurnStatus.EXPIRED:
            return status  # nothing runs to stop (a lost turn's end is the next call's: failed)
        record = AbortRequested(turn=turn_id, at=now, principal=principal or chat.principal, via=via)
        entry = LogEntry(state.version + 1, record.kind, encode_record(record))
        state.apply(record)
        try:
            await agent.store.append(chat.session_id, state.version - 1, [entry], state.summary(now))
        except VersionConflict:
            continue
        running = agent.sessions.running(chat.session_id)
        if running is not None and running.turn_id == turn_id:
            running.abort.set()  # it runs here: no need to wait for its next look at the log
            if running.task is not None and not inside(running):  # (a tool of the turn aborting it cannot wait)
                await asyncio.wait({running.task}, timeout=STOP_WAIT)
        return status
    raise ConcurrentUpdate(f"session {chat.session_id!r} kept changing; the abort was not recorded")
