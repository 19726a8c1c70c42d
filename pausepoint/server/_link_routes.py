"""Approval links, in the REST API: what a link points at (``GET /v1/links/{token}``), and the
check an answer carrying a link passes before it is given (``answered_by_link``).

A link is no credential. Reading one needs the caller's own credentials and the right to
answer the session (anyone else gets the 404 of a session they cannot see); deciding through
one is an ordinary answer (``POST .../interrupts/{ref}/approve|deny|respond|restart``) with
``"link": token`` in its body, which binds the answer to the link's pause and records it with
``via="link"``. A GET never decides anything: mail scanners open links.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..errors import InvalidLink, SessionNotFound
from ..runtime._agent import Agent
from ..session._json import INTERRUPTS, dump
from ._display import view_json
from ._links import Link, read_token, refusal
from ._replies import json_response
from ._routes import Operation, json_object, schema_ref
from ._service import Service, service_of
from ._story import standing, standing_in

__all__ = ["LINK", "answerable_link", "answered_by_link", "link"]

LINK: Operation[Any] = Operation(
    "What an approval link points at: its pause (as .../interrupts shows it, with its view), where it "
    "stands (open; used: answered; expired: past the link's or the pause's expiry; superseded: the call "
    "paused again) and a sentence a person reads. It decides nothing: decide with the pause's answer "
    'routes and "link" in the body. 400 invalid_link for a link this server did not sign; 404 unless '
    "the caller may answer the session",
    json_object(
        state={"type": "string", "enum": ["open", "used", "expired", "superseded"]},
        agent={"type": "string"},
        session_id={"type": "string"},
        pause=schema_ref("PendingInterrupt"),
        message={"type": "string"},
    ),
)


async def link(request: Request) -> Response:
    service = service_of(request)
    principal = await service.principal(request)  # before anything is read from the token
    found = read_token(service.links, request.path_params["token"])
    agent = await answerable_link(service, found, principal)
    now = await standing(agent, found)
    pause: dict[str, Any] = dump(INTERRUPTS, [now.pause])[0]
    pause["view"] = view_json(now.view)  # a settled pause's waits for nobody (``_story``)
    return json_response(
        {
            "state": now.state,
            "agent": agent.name,
            "session_id": found.session_id,
            "pause": pause,
            "message": now.message,
        }
    )


async def answerable_link(service: Service, found: Link, principal: str) -> Agent:
    """The agent of ``found``'s session, if ``principal`` may answer that session's pauses;
    the 404 of a session nobody may see otherwise (whether they may see it or not)."""
    agent = service.ai.agents.get(found.agent)
    missing = SessionNotFound(f"no session {found.session_id!r}", session_id=found.session_id)
    if agent is None:
        raise missing
    try:
        summary = await service.visible(agent, found.session_id, principal)
    except SessionNotFound:
        raise missing from None
    if not service.policy.can_answer(principal, summary):
        raise missing
    return agent


async def answered_by_link(
    service: Service, agent: Agent, session_id: str, ref: str, token: str, pause_id: str | None, key: str | None
) -> str:
    """The pause an answer carrying ``token`` answers (the link's), once the link is checked:
    signed here (``InvalidLink``), for this agent, session and call, and ``pause_id`` if given
    (``InvalidLink``), and open now (``LinkExpired``, ``LinkUsed``, ``LinkSuperseded``). The
    answer then names that pause, so a race with another answer is settled by the core. A used
    link whose answer carries an idempotency ``key`` the session has recorded goes on to the core
    too: the retry of that answer gets its first outcome (another request under the key is
    refused there), as any answer's retry does."""
    found = read_token(service.links, token)
    if (found.agent, found.session_id, found.ref) != (agent.name, session_id, ref):
        raise InvalidLink("this link is for another pause than the one answered")
    if pause_id is not None and pause_id != found.pause_id:
        raise InvalidLink("this link is for another pause of the call than pause_id names", pause_id=found.pause_id)
    state = await agent.chat(session_id).calls.read_state()
    now = standing_in(agent, found, state)
    if now.state != "open" and not (now.state == "used" and key is not None and key in state.keys):
        raise refusal(now.state, now.message)
    return found.pause_id
