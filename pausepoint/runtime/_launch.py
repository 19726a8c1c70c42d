"""Detached turns: a turn that runs in the background of the process that started it, owned by
its session, visible from every process as running, and stoppable from any of them.

``Chat.detach`` writes a ``TurnStarted`` record before the turn does anything: its version is
the turn's id (``DetachedTurn.turn_id``; on the Genkit wire, the snapshot id a client polls).
While it runs, other calls on the session are refused with ``TurnInProgress``; its result lands
in the session like any turn's, and a ``TurnEnded`` naming it closes it.

Aborting (``Chat.abort``, ``DetachedTurn.abort``, the wire's ``abort``) appends an
``AbortRequested`` record — from any process. The running process learns of it at once when
the abort came from the same process, otherwise by polling the log (``Agent.abort_poll``) and
when its next write collides with the request. It then stops: a model call in progress is
cancelled, a reply that arrives afterwards is dropped, no further tool starts; a tool already
running finishes and its outcome is recorded (a side effect is never cut in half). The turn
ends ``aborted``.

A process may die while its detached turn runs. Once nothing was recorded in the session for
``Agent.abandon_after``, the turn is presumed lost: its status reads ``expired``, and the next
call on the session ends it (as ``failed``, or ``aborted`` if an abort was asked) and settles
its calls by the usual rules, so a session is never stuck.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from ..errors import PausepointError
from ..session._records import AbortRequested, CallCompleted, TurnEnded, decode_record
from ..session._response import AgentFinishReason, AgentResponse
from ..session._state import Detached, SessionState
from ..stores import SessionStore
from ..turn._cut_short import CANCELLED, unwritten_outcomes
from ..turn._turn import Turn
from ._sessions import LocalSessions, Running

__all__ = ["Launch", "TurnStatus", "end_status", "inside", "lost_turn_end", "status_of"]

log = logging.getLogger("pausepoint")


class TurnStatus(StrEnum):
    """Where a detached turn stands (the names of the reference's snapshot statuses)."""

    PENDING = "pending"  # running
    COMPLETED = "completed"  # ended: stop, interrupted, length, blocked, max_turns
    FAILED = "failed"
    ABORTED = "aborted"
    EXPIRED = "expired"  # presumed lost with its process; the next call on the session ends it


def end_status(finish_reason: str) -> TurnStatus:
    """The status of a turn that ended with ``finish_reason``."""
    if finish_reason == AgentFinishReason.FAILED.value:
        return TurnStatus.FAILED
    if finish_reason == AgentFinishReason.ABORTED.value:
        return TurnStatus.ABORTED
    return TurnStatus.COMPLETED


def status_of(state: SessionState, turn: Detached, now: datetime, abandon_after: timedelta) -> TurnStatus:
    if turn.end is not None:
        return end_status(turn.end.finish_reason)
    if state.running_turn is turn and state.lost(now, abandon_after):
        return TurnStatus.EXPIRED
    return TurnStatus.PENDING


def lost_turn_end(state: SessionState, now: datetime, turn: Detached | None = None) -> TurnEnded:
    """The end recorded for a turn presumed lost with its process: a detached ``turn``, or (None)
    the turn that awaits the model, ended before a new message so that a retry with its
    idempotency key gets this end, not the end of the turn the message starts."""
    aborted = turn is not None and turn.abort is not None
    return TurnEnded(
        turn=state.turn,
        finish_reason=(AgentFinishReason.ABORTED if aborted else AgentFinishReason.FAILED).value,
        open_refs=[pause.record.ref for pause in state.open_in_call_order()],
        error=f"lost: the process running this {'detached ' if turn else ''}turn stopped before it ended",
        message_index=state.last_model_index(),
        at=now,
        started=turn.version if turn is not None else None,
    )


class Launch:
    """What ``Chat.detach`` hands to the turn it starts: where to report the turn's id, and the
    running turn's signals. ``begin`` and ``run`` are called by the turn's operation."""

    def __init__(self, sessions: LocalSessions, store: SessionStore, session_id: str, abort_poll: float) -> None:
        self.sessions, self.store, self.session_id, self.abort_poll = sessions, store, session_id, abort_poll
        self.started: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.running = Running()

    def begin(self, turn: Turn, request_hash: str | None) -> None:
        """The ``TurnStarted`` record is written: register the turn here (with the hash of the
        request that started it, to tell its retries from a reuse of its key) and watch for aborts."""
        running_turn = turn.state.running_turn
        assert running_turn is not None
        self.running.turn_id = turn.turn_id = running_turn.version
        self.running.request_hash = request_hash
        turn.abort = self.running.abort
        self.sessions.track(self.session_id, self.running)
        self.running.watcher = asyncio.ensure_future(
            _watch(self.store, self.session_id, running_turn.version, turn.state.version, self.running.abort,
                   self.abort_poll)
        )  # fmt: skip
        if not self.started.done():
            self.started.set_result(running_turn.version)

    async def run(self, turn: Turn, body: Callable[[], Awaitable[AgentResponse]]) -> AgentResponse:
        """Run the turn to its end; a failure ends it ``failed`` (a detached turn always ends)."""
        _RUNNING.set(self.running)  # in the turn's task: its tools see it (``inside``)
        try:
            return await body()
        except asyncio.CancelledError:  # this process (or its loop) is stopping
            with contextlib.suppress(Exception):
                await _cut_short(turn)
            raise
        except PausepointError as exc:
            return await turn.fail(f"{type(exc).__name__}: {exc}")
        except Exception as exc:
            log.exception("detached turn %s of session %s failed", turn.turn_id, self.session_id)
            return await turn.fail(f"{type(exc).__name__}: {exc}")
        finally:
            self.sessions.untrack(self.session_id, self.running)
            if self.running.watcher is not None:
                self.running.watcher.cancel()


async def _cut_short(turn: Turn) -> None:
    """End a detached turn cancelled here (an ``asyncio.run`` returning, a script ending, a
    server stopping) as ``aborted``: the calls the log has running get the outcome this process
    knows, else are recorded as cancelled — they may or may not have taken effect — so that no
    process waits ``abandon_after`` for a turn nothing runs. What it had not written of its own
    is dropped, as for a turn that fails."""
    state = turn.state
    if state.running_turn is None or state.running_turn.version != turn.turn_id:
        return  # it has ended (cut short while its tools ran, it recorded them itself)
    known = unwritten_outcomes(turn.journal.pending)
    await turn.journal.discard()
    for ref in turn.state.running:
        name = turn.state.calls[ref].request.name
        turn.journal.add(known.get(ref) or CallCompleted(ref, name, dict(CANCELLED), is_error=True))
    await turn.end(AgentFinishReason.ABORTED)


_RUNNING: contextvars.ContextVar[Running | None] = contextvars.ContextVar("pausepoint_detached", default=None)


def inside(running: Running) -> bool:
    """Whether the caller is ``running``'s turn itself (or a tool it runs)."""
    return _RUNNING.get() is running


async def _watch(store: Any, session_id: str, turn_id: int, after: int, abort: asyncio.Event, interval: float) -> None:
    """Poll the log for an abort of ``turn_id`` written by another process; set ``abort``."""
    seen = after
    while not abort.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(abort.wait(), interval)
            return
        try:
            found = await store.read(session_id, after_version=seen)
        except Exception:  # a store hiccup: look again later
            log.warning("could not read session %s for aborts; retrying", session_id, exc_info=True)
            continue
        if found is None:
            return
        seen = max(seen, found.version)
        for entry in found.entries:
            if entry.kind != "abort_requested":
                continue
            record = decode_record(entry.data)
            if isinstance(record, AbortRequested) and record.turn == turn_id:
                abort.set()


