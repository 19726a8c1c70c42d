"""What every handler needs, kept on the app: the agents, who is calling, and which sessions
they may touch.

``create_app`` makes one ``Service`` and keeps it on the app (``app.state.pausepoint``); a
handler, a module-level function of the request, takes it from there (``service_of``), so any
handler can be called alone with a request whose app holds a service.

Ownership is checked here, once: a session that does not exist, belongs to another agent, or
is not visible to the caller (another principal's, another tenant's) is the same
``SessionNotFound`` (404) — nobody learns that a session they may not see exists. A session a
caller creates is of the caller's tenant (``current_tenant``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from ..content._jsondata import NotJsonData, json_text
from ..errors import Forbidden, NotFound, SessionNotFound
from ..runtime._agent import Agent
from ..runtime._app import Pausepoint
from ..runtime._sessions import others_session
from ..session._ids import check_session_id
from ..stores import SessionStore, SessionSummary
from ..webhooks import ApprovalLinks, SlackApp
from ._auth import AccessPolicy, Authenticator, authenticate, current_tenant, qualified
from ._expiry import ExpirySweep
from ._feed import Feed, stores_of
from ._limits import Limits
from ._oidc import OidcBearer
from ._requestlog import note_principal
from ._retention import EventRetention
from ._webhooks import WebhookSender

__all__ = ["Service", "service_of"]


@dataclass(slots=True)
class Service:
    """The app's state. ``operators`` may read and retry webhook deliveries; ``metrics`` is the
    ``PrometheusMetrics`` served at ``/metrics`` (None: no such route); ``mcp`` the MCP endpoint
    at ``/mcp``, if served; ``openapi`` the document served at ``/openapi.json``; ``links``
    signs and reads approval links, ``slack`` takes Slack's button callbacks (None: neither);
    ``sign_in`` is the provider the console signs people in through (None: with a token);
    ``retention`` prunes old events (None: every event is kept).
    ``stores`` are the agents' distinct stores (``stores_of``) and ``probes`` the readiness
    probes past their time, cancelled, still ending (``/readyz``)."""

    ai: Pausepoint
    auth: Authenticator
    policy: AccessPolicy
    limits: Limits
    feed: Feed
    expiry: ExpirySweep
    sender: WebhookSender | None = None
    retention: EventRetention | None = None
    operators: frozenset[str] = frozenset()
    metrics: Any = None
    mcp: Any = None
    openapi: bytes = b""
    links: ApprovalLinks | None = None
    slack: SlackApp | None = None
    sign_in: OidcBearer | None = None
    stores: list[SessionStore] = field(init=False)
    probes: set[asyncio.Task[Any]] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        self.stores = stores_of(self.ai)

    def agent(self, name: str) -> Agent:
        agent = self.ai.agents.get(name)
        if agent is None:
            raise NotFound(f"no agent named {name!r}", agent=name)
        return agent

    def start_background(self) -> None:
        """Start the expiry sweep, the webhook sender and the events' pruning (if not running yet)."""
        self.expiry.ensure_running()
        if self.sender is not None:
            self.sender.ensure_running()
        if self.retention is not None:
            self.retention.ensure_running()

    async def close(self) -> None:
        """Stop what runs in the background, then close the plugins' connections and the
        agents' stores (``ai.aclose()``): the server has stopped, nothing else uses them."""
        await self.expiry.close()
        await self.feed.close()
        if self.sender is not None:
            await self.sender.close()
        if self.retention is not None:
            await self.retention.close()
        if self.mcp is not None:
            await self.mcp.close()
        await self.ai.aclose()

    async def principal(self, request: Request) -> str:
        self.start_background()  # mounted apps get no lifespan: start with the first request
        principal = await authenticate(self.auth, request)
        note_principal(qualified(principal, current_tenant()))
        return principal

    async def visible(self, agent: Agent, session_id: str, principal: str) -> SessionSummary:
        """The session's summary if ``principal`` may see it; ``SessionNotFound`` otherwise."""
        return await visible_to(self.policy, agent, session_id, principal)

    async def answerable(self, agent: Agent, session_id: str, principal: str) -> SessionSummary:
        """``visible``, and ``principal`` may answer its pauses (``Forbidden`` otherwise)."""
        summary = await self.visible(agent, session_id, principal)
        if not self.policy.can_answer(principal, summary):
            raise Forbidden(f"{principal!r} may not answer pauses of session {session_id!r}", session_id=session_id)
        return summary

    async def conversable(self, agent: Agent, session_id: str, principal: str, act: str = "send to") -> SessionSummary:
        """``visible``, and ``principal`` may converse in it: send, cancel, abort (``Forbidden``
        otherwise, saying what it may not do: ``act``)."""
        summary = await self.visible(agent, session_id, principal)
        if not self.policy.can_converse(principal, summary):
            raise Forbidden(
                f"{principal!r} may not {act} session {session_id!r}: it is its owner's conversation",
                session_id=session_id,
            )
        return summary

    async def to_message(self, agent: Agent, session_id: str, principal: str) -> SessionSummary | None:
        """Where a message to ``session_id`` goes: the session's summary if ``principal`` may
        converse in it (``conversable``: 404 / 403 otherwise), or None when no session has that
        id yet — the caller names a new one (``Chat(..., new=True)`` checks the id and creates it;
        an id taken meanwhile is the same 404 as a session the caller may not see, but for one
        another request of the same caller made: 409 ``concurrent_update``, send again)."""
        if not _storable(session_id):  # no session can have it, nor be made with it: say why
            check_session_id(session_id)
        elif await agent.store.get_summary(session_id) is None:
            return None
        return await self.conversable(agent, session_id, principal)

    # -- the session a route's path names (``{agent}`` and ``{session_id}``) ---------------------

    async def viewing(self, request: Request) -> tuple[Agent, str, str, SessionSummary]:
        """The agent, session id and caller of a route on a session the caller may see, and the
        session's summary (its tenant names whose members its pauses' views list, whoever reads)."""
        principal = await self.principal(request)  # before any lookup: nothing is learnt without a token
        agent = self.agent(request.path_params["agent"])
        session_id = request.path_params["session_id"]
        return agent, session_id, principal, await self.visible(agent, session_id, principal)

    async def answering(self, request: Request) -> tuple[Agent, str, str]:
        """``viewing``, for a route that answers the session's pauses (``answerable``)."""
        principal = await self.principal(request)
        agent = self.agent(request.path_params["agent"])
        session_id = request.path_params["session_id"]
        await self.answerable(agent, session_id, principal)
        return agent, session_id, principal

    async def conversing(self, request: Request, act: str = "send to") -> tuple[Agent, str, str]:
        """``viewing``, for a route that converses in the session (``conversable``)."""
        principal = await self.principal(request)
        agent = self.agent(request.path_params["agent"])
        session_id = request.path_params["session_id"]
        await self.conversable(agent, session_id, principal, act)
        return agent, session_id, principal


def service_of(request: Request) -> Service:
    """The service of the app answering ``request`` (``create_app`` keeps it on ``app.state``)."""
    service: Service = request.app.state.pausepoint
    return service


async def visible_to(policy: AccessPolicy, agent: Agent, session_id: str, principal: str) -> SessionSummary:
    """The session's summary if ``principal`` may see it under ``policy``; ``SessionNotFound``
    otherwise — saying whose it is when it is one they may see, of another agent (every surface
    says it so: REST, the Genkit wire, MCP, Python)."""
    if not isinstance(session_id, str) or not _storable(session_id):  # no session can have this id
        raise SessionNotFound(f"no session {session_id!r}", session_id=str(session_id))
    summary = await agent.store.get_summary(session_id)
    if summary is None or not policy.can_view(principal, summary):
        raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
    if summary.agent != agent.name:  # one the caller may see, of another agent: say so
        raise others_session(session_id, agent.name, summary.agent)
    return summary


def _storable(text: str) -> bool:
    try:
        json_text(text, name=True)
    except NotJsonData:
        return False
    return True
