"""What every route needs: the agents, who is calling, and which sessions they may touch.

Ownership is checked here, once: a session that does not exist, belongs to another agent, or
is not visible to the caller is the same ``SessionNotFound`` (404) — nobody learns that a
session they may not see exists.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from ..content._jsondata import NotJsonData, json_text
from ..errors import Forbidden, NotFound, SessionNotFound
from ..runtime._agent import Agent
from ..runtime._app import Pausepoint
from ..stores import SessionSummary
from ._auth import AccessPolicy, Authenticator, authenticate
from ._expiry import ExpirySweep
from ._feed import Feed
from ._limits import Limits
from ._requestlog import note_principal
from ._webhooks import WebhookSender

__all__ = ["Service"]


@dataclass(slots=True)
class Service:
    ai: Pausepoint
    auth: Authenticator
    policy: AccessPolicy
    limits: Limits
    feed: Feed
    expiry: ExpirySweep
    sender: WebhookSender | None = None

    def agent(self, name: str) -> Agent:
        agent = self.ai.agents.get(name)
        if agent is None:
            raise NotFound(f"no agent named {name!r}", agent=name)
        return agent

    def start_background(self) -> None:
        """Start the expiry sweep and the webhook sender (if not running yet)."""
        self.expiry.ensure_running()
        if self.sender is not None:
            self.sender.ensure_running()

    async def principal(self, request: Request) -> str:
        self.start_background()  # mounted apps get no lifespan: start with the first request
        principal = await authenticate(self.auth, request)
        note_principal(principal)
        return principal

    async def visible(self, agent: Agent, session_id: str, principal: str) -> SessionSummary:
        """The session's summary if ``principal`` may see it; ``SessionNotFound`` otherwise."""
        if not _storable(session_id):  # no session can have this id (and no store could look it up)
            raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
        summary = await agent.store.get_summary(session_id)
        if summary is None or summary.agent != agent.name or not self.policy.can_view(principal, summary):
            raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
        return summary

    async def answerable(self, agent: Agent, session_id: str, principal: str) -> SessionSummary:
        """``visible``, and ``principal`` may answer its pauses (``Forbidden`` otherwise)."""
        summary = await self.visible(agent, session_id, principal)
        if not self.policy.can_answer(principal, summary):
            raise Forbidden(f"{principal!r} may not answer pauses of session {session_id!r}", session_id=session_id)
        return summary

    async def conversable(self, agent: Agent, session_id: str, principal: str) -> SessionSummary:
        """``visible``, and ``principal`` may converse in it: send, cancel (``Forbidden`` otherwise)."""
        summary = await self.visible(agent, session_id, principal)
        if not self.policy.can_converse(principal, summary):
            raise Forbidden(
                f"{principal!r} may not send to session {session_id!r}: it is its owner's conversation",
                session_id=session_id,
            )
        return summary

    async def to_message(self, agent: Agent, session_id: str, principal: str) -> SessionSummary | None:
        """Where a message to ``session_id`` goes: the session's summary if ``principal`` may
        converse in it (``conversable``: 404 / 403 otherwise), or None when no session has that
        id yet — the caller names a new one (``Chat(..., new=True)`` checks the id and creates it;
        an id taken meanwhile is the same 404 as a session the caller may not see)."""
        if _storable(session_id) and await agent.store.get_summary(session_id) is None:
            return None
        return await self.conversable(agent, session_id, principal)


def _storable(text: str) -> bool:
    try:
        json_text(text, name=True)
    except NotJsonData:
        return False
    return True
