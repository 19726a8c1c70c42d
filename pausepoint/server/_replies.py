"""What the REST API's handlers answer with: a JSON body, or a turn's reply.

``rest_turn`` runs a turn for a REST request (``_turns.run_turn``): its reply and its stream's
chunks in the REST API's JSON, each pause with its view (``_display``), and the feed told of
the session when the turn ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..runtime._agent import Agent
from ._auth import current_tenant
from ._display import chunk_json, response_json
from ._errors import dumps
from ._routes import schema_ref
from ._service import Service
from ._turns import run_turn

__all__ = ["AGENT_RESPONSE", "json_response", "rest_turn"]

#: the schema of a turn's reply
AGENT_RESPONSE = schema_ref("AgentResponse")


def json_response(value: Any, status: int = 200) -> Response:
    """``value`` as a compact JSON body (``dumps``)."""
    return Response(dumps(value), status_code=status, media_type="application/json")


async def rest_turn(
    request: Request, service: Service, agent: Agent, session_id: str, turn: Callable[[bool], Any]
) -> Response:
    """Run ``turn`` (see ``run_turn``) in ``agent``'s session ``session_id``: a JSON reply, or
    a stream of the REST API's events. The session is of the caller's tenant (who converses in a
    session, or answers it, is of its tenant), whose members its pauses' views name."""
    tenant = current_tenant()
    return await run_turn(
        request,
        turn,
        keep_alive=agent.sessions.tasks,
        on_done=lambda: service.feed.notify(agent.name, session_id),
        reply=lambda response: response_json(agent, response, tenant=tenant),
        chunk=lambda chunk: chunk_json(agent, chunk, tenant=tenant),
    )
