"""Waiting for the writer that finishes a turn: our answers are in, but another process claimed
the rest of the turn (a restart it runs, the answer that completed a quorum after ours), so its
end is ours to report — unless that writer is presumed lost with its process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from ..errors import ResumeInProgress
from ..session._response import AgentResponse
from ..session._state import Call, SessionState
from ..session._views import response_for
from ._host import TurnHost
from ._journal import Journal

__all__ = ["other_writers_end"]


class _Waiting(Protocol):
    """What of a ``Turn`` the wait uses."""

    @property
    def agent(self) -> TurnHost: ...
    @property
    def journal(self) -> Journal: ...
    @property
    def reread(self) -> Callable[[str], Awaitable[SessionState]]: ...

    def finished(self, response: AgentResponse) -> AgentResponse: ...
    async def recover(self, calls: list[Call]) -> None: ...
    async def proceed(self) -> AgentResponse: ...


async def other_writers_end(
    turn: _Waiting, since: int, go_on: Callable[[], Awaitable[AgentResponse]] | None = None
) -> AgentResponse:
    """The first turn end after version ``since`` — the session as it stood before the append
    that brought that writer's records in (its end may be among them already: then it is
    returned at once); later ends are other turns' (a message's, after a process that presumed
    this turn lost ended it).

    While we wait, the calls that writer runs may come to be presumed lost (each started
    ``abandon_after`` ago, their process gone): they are settled here by the usual rules
    (``Turn.recover``) and the turn goes on from here (``go_on``, by default ``Turn.proceed``: a
    cancellation ends it instead), rather than wait on a writer that will never end it.
    ``ResumeInProgress`` after ``wait_timeout`` (a retry with the same idempotency key gets the
    turn's end once there is one)."""
    agent, journal = turn.agent, turn.journal
    await journal.flush(agent.clock())
    loop = asyncio.get_running_loop()
    deadline, delay = loop.time() + agent.wait_timeout, 0.005
    while True:
        ended = await journal.end_after(since)  # the first: later ones are other turns'
        if ended is not None:
            return turn.finished(response_for(journal.state, *ended))
        lost = journal.state.abandoned(agent.clock(), agent.abandon_after)
        if lost:
            await turn.recover(lost)
            return await (go_on() if go_on is not None else turn.proceed())
        if loop.time() >= deadline:
            break
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.25)
        journal.state = await turn.reread(journal.state.session_id)
    raise ResumeInProgress(
        f"another process is still finishing this turn of session {journal.state.session_id!r}",
        session_id=journal.state.session_id,
    )
