"""Grants, in the REST API: the grants given in a session (an approval that approves later
calls too), and revoking one. Revoking needs the right to answer the session's pauses; the
audit trail keeps who revoked it and why.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .._rest import RevokeBody
from ..session._json import GRANTS, dump
from ._limits import read_json
from ._replies import json_response
from ._routes import Operation, json_array, json_object, schema_ref
from ._service import service_of

__all__ = ["LIST", "REVOKE", "grants", "revoke"]

LIST: Operation[Any] = Operation(
    "The grants given in the session (active, revoked, expired or used up), oldest first",
    json_object(grants=json_array(schema_ref("GrantInfo"))),
)


async def grants(request: Request) -> Response:
    agent, session_id, _, _ = await service_of(request).viewing(request)
    return json_response({"grants": dump(GRANTS, await agent.chat(session_id).grants())})


REVOKE = Operation(
    "Revoke a grant: it approves no later call (revoking it again changes nothing; 404 "
    "grant_not_found for an id the session never gave)",
    json_object(grant=schema_ref("GrantInfo")),
    body=RevokeBody,
)


async def revoke(request: Request) -> Response:
    service = service_of(request)
    agent, session_id, principal = await service.answering(request)
    body = REVOKE.parse(await read_json(request, service.limits))
    chat = agent.chat(session_id, principal=principal)
    grant = await chat.revoke_grant(request.path_params["grant_id"], reason=body.reason, via="http")
    service.feed.notify(agent.name, session_id)
    return json_response({"grant": dump(GRANTS, [grant])[0]})
