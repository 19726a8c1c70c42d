"""Genkit snapshot ids, resolved against a session: which turn an id names, and how it stands.

A snapshot id is ``<session_id>.<version>``. The version is that of a ``TurnEnded`` record
(the turn end a reply reported), or of a ``TurnStarted`` record (a detached turn: its id is
issued when it starts, reads ``pending`` while it runs, and names its end afterwards). Sessions
do not branch: only the newest turn can be read or continued — or continued from the last turn
that finished, when only failed or aborted turns came after it, as a Genkit client does after a
failure; an older id is ``StaleSnapshot``, an id never issued ``NotFound``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from ..content._messages import Message
from ..errors import NotFound, StaleSnapshot, TurnInProgress
from ..runtime._chat import Chat
from ..runtime._launch import TurnStatus, end_status, status_of
from ..session._interrupts import PendingInterrupt
from ..session._records import TurnEnded, decode_record
from ..session._response import AgentResponse
from ..session._state import Detached, SessionState
from ..session._views import pending_interrupt, response_for
from ..stores import SessionStore
from ._params import ascii_digits

__all__ = [
    "SNAPSHOT_NOT_FOUND",
    "Snapshot",
    "check_continuable",
    "latest_snapshot",
    "parse_snapshot_id",
    "read_state",
    "shown_pauses",
    "snapshot_at",
    "snapshot_id",
    "status_at",
]

#: Genkit's reason for a snapshot id that names none (its client reads ``err.reason``)
SNAPSHOT_NOT_FOUND = "SNAPSHOT_NOT_FOUND"
#: Genkit's reason for a snapshot that cannot be continued (a turn of it still running)
SNAPSHOT_NOT_RESUMABLE = "SNAPSHOT_NOT_RESUMABLE"


def snapshot_id(session_id: str, version: int) -> str:
    return f"{session_id}.{version}"


def parse_snapshot_id(value: str) -> tuple[str, int]:
    """``(session_id, version)``; ``NotFound`` when ``value`` cannot name a snapshot."""
    session_id, dot, version = value.rpartition(".")
    canonical = ascii_digits(version) and len(version) <= 18 and (version == "0" or not version.startswith("0"))
    if not dot or not session_id or not canonical:  # one spelling per snapshot: "s.06" is no "s.6"
        raise NotFound(f"no snapshot {value!r}", snapshot_id=value, reason=SNAPSHOT_NOT_FOUND)
    return session_id, int(version)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A session at its newest turn, as the reference's ``SessionSnapshot`` shows it."""

    id: str
    session_id: str
    status: TurnStatus
    response: AgentResponse | None  # None while the (detached) turn runs
    messages: list[Message]
    pauses: list[PendingInterrupt]  # the calls paused now
    created_at: datetime | None  # when the turn began
    updated_at: datetime | None  # when it ended (while it runs: when it last recorded something)
    parent_id: str  # the turn before ("" for the first, as the reference writes it)


async def read_state(chat: Chat) -> SessionState:
    """The session's state as recorded (never waits for a turn running on it)."""
    return await chat.calls.read_state()


def latest_snapshot(state: SessionState, now: datetime, abandon_after: timedelta) -> Snapshot:
    """The session's newest turn: the detached turn running, or else the latest turn end."""
    if state.running_turn is not None:
        return _running(state, state.running_turn, now, abandon_after)
    if state.last_end is None:
        raise NotFound(f"session {state.session_id!r} has no turn yet", session_id=state.session_id)
    started = state.last_end.started
    return _ended(state, state.detached.get(started) if started is not None else None)


def snapshot_at(state: SessionState, version: int, now: datetime, abandon_after: timedelta) -> Snapshot:
    """The snapshot ``<session>.<version>`` names, if it is the newest (``StaleSnapshot`` if it is
    not, ``NotFound`` if no turn has that id)."""
    detached, running = _newest(state, version, now, abandon_after, to_continue=False)
    if running:
        assert detached is not None
        return _running(state, detached, now, abandon_after)
    return _ended(state, detached)


def check_continuable(state: SessionState, version: int, now: datetime, abandon_after: timedelta) -> None:
    """Raise unless a turn may start from the snapshot ``<session>.<version>``: it must be the
    newest, and no detached turn may be running (``TurnInProgress``; one presumed lost does not
    count: the core ends it first). Builds no snapshot."""
    _newest(state, version, now, abandon_after, to_continue=True)


def _newest(
    state: SessionState, version: int, now: datetime, abandon_after: timedelta, *, to_continue: bool
) -> tuple[Detached | None, bool]:
    """Where the snapshot ``<session>.<version>`` stands if it is the newest: its detached turn
    (None for a turn the caller waited for) and whether that turn runs still. Raises as
    ``snapshot_at`` and ``check_continuable`` say."""
    name = snapshot_id(state.session_id, version)
    running = state.running_turn
    busy = running is not None and not state.lost(now, abandon_after)
    detached = state.detached.get(version)
    if detached is not None and detached is running:
        if to_continue and busy:
            raise TurnInProgress(
                f"snapshot {name!r} is a turn still running: wait for it, or abort it",
                snapshot_id=name,
                reason=SNAPSHOT_NOT_RESUMABLE,
            )
        return detached, True
    end_version = detached.end_version if detached is not None else version
    if running is None and state.last_end is not None and end_version == state.last_end_version:
        return detached, False
    if detached is None and state.end_reason(version) is None:
        raise NotFound(f"no snapshot {name!r}", snapshot_id=name, reason=SNAPSHOT_NOT_FOUND)
    if to_continue and busy:
        raise TurnInProgress(
            f"a detached turn is running in session {state.session_id!r}",
            snapshot_id=name,
            reason=SNAPSHOT_NOT_RESUMABLE,
        )
    if to_continue and running is None and state.ended_unfinished_since(end_version):
        # Only failed or aborted turns since: a Genkit client continues from the last turn that
        # finished (the reference rolls the failed ones back). Their records stay: the session
        # goes on from where it is, with the tool results they kept.
        return detached, False
    latest = latest_snapshot(state, now, abandon_after)
    raise StaleSnapshot(
        f"snapshot {name!r} is not the latest of its session ({latest.id!r}): continue from the latest "
        "(getSnapshot with the sessionId) — sessions do not branch",
        snapshot_id=name,
        latest_snapshot_id=latest.id,
    )


def status_at(state: SessionState, version: int, now: datetime, abandon_after: timedelta) -> TurnStatus | None:
    """The status of the turn ``version`` names, newest or not (None: no snapshot has that id)."""
    detached = state.detached.get(version)
    if detached is not None:
        return status_of(state, detached, now, abandon_after)
    reason = state.end_reason(version)
    return None if reason is None else end_status(reason)


def _parent(state: SessionState, version: int) -> str:
    """The snapshot id of the turn before: its end's version, or, for a detached turn, the
    version it started at (the id it was issued under)."""
    parent = state.parent_end(version)
    if parent is None:
        return ""
    for started in reversed(state.detached):  # the latest first: the parent is near the end
        if state.detached[started].end_version == parent:
            return snapshot_id(state.session_id, started)
        if started < parent:
            break  # started before that end and did not end there: none older did either
    return snapshot_id(state.session_id, parent)


def _ended(state: SessionState, detached: Detached | None) -> Snapshot:
    """The latest turn end; under the id it was issued with when it ended a detached turn."""
    end, version = state.last_end, state.last_end_version
    assert end is not None
    named = detached.version if detached is not None else version
    return Snapshot(
        id=snapshot_id(state.session_id, named),
        session_id=state.session_id,
        status=end_status(end.finish_reason),
        response=response_for(state, end, version),
        messages=list(state.messages),
        pauses=[pending_interrupt(p.record, p, version) for p in state.open_in_call_order()],
        created_at=detached.started.at if detached is not None else end.began,
        updated_at=end.at,
        parent_id=_parent(state, named),
    )


def _running(state: SessionState, detached: Detached, now: datetime, abandon_after: timedelta) -> Snapshot:
    """A detached turn still running: the session as recorded so far, with the message it was
    sent (the history records it with the model's first reply)."""
    messages = list(state.messages)
    if detached.started.message is not None and not detached.sent:
        messages.append(detached.started.message)
    return Snapshot(
        id=snapshot_id(state.session_id, detached.version),
        session_id=state.session_id,
        status=status_of(state, detached, now, abandon_after),
        response=None,
        messages=messages,
        pauses=[],
        created_at=detached.started.at,
        updated_at=state.last_activity,
        parent_id=_parent(state, detached.version),
    )


async def shown_pauses(store: SessionStore, state: SessionState, version: int) -> list[str]:
    """The pauses (their ids) the snapshot ``<session>.<version>`` showed open: those of the turn
    end it names, read from the log (none for an id that names no ended turn)."""
    detached = state.detached.get(version)
    end_version = detached.end_version if detached is not None else version
    if state.end_reason(end_version) is None:
        return []
    found = await store.read(state.session_id, end_version - 1)
    if found is None or not found.entries or found.entries[0].version != end_version:
        return []
    ended = decode_record(found.entries[0].data)
    return list(ended.open_refs) if isinstance(ended, TurnEnded) else []
