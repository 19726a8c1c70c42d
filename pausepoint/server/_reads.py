"""Reading, in the REST API: the agents served, an agent's tools, the sessions a caller may
see (the approvals inbox), and one session — its summary, open pauses, audit trail and history.

Sessions another principal owns, or of another tenant, are 404 (``Service.visible``); the
inbox lists the caller's tenant's sessions only; every pause and audit entry carries its
``view`` (``_display``).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..session._json import MESSAGES, SUMMARY, dump
from ._auth import current_tenant, inbox_filters
from ._display import audit_json, describe_agent, interrupts_json, permissions, response_json
from ._limits import MAX_OFFSET
from ._params import flag, query_int
from ._replies import json_response
from ._routes import PAGE_SIZE, Operation, json_array, json_object, query, schema_ref
from ._service import service_of

__all__ = [
    "AGENT",
    "AGENTS",
    "AUDIT",
    "HISTORY",
    "INTERRUPTS",
    "SESSION",
    "SESSIONS",
    "agent_info",
    "agents",
    "audit",
    "history",
    "interrupts",
    "list_sessions",
    "read",
]

AGENTS: Operation[Any] = Operation(
    "The agents served, and who the caller is (and their tenant, when they have one)",
    json_object(agents=json_array({"type": "string"}), principal={"type": "string"}, tenant={"type": "string"}),
)


async def agents(request: Request) -> Response:
    service = service_of(request)
    principal = await service.principal(request)
    tenant = current_tenant()
    caller = {"principal": principal} if tenant is None else {"principal": principal, "tenant": tenant}
    return json_response({"agents": sorted(service.ai.agents), **caller})


AGENT: Operation[Any] = Operation(
    "An agent: its description (never its system prompt) and tools (schemas; pauses_only, "
    "allow_input_edits, what approving answers)",
    json_object(name={"type": "string"}, description={"type": "string"}, tools=json_array(schema_ref("Tool"))),
)


async def agent_info(request: Request) -> Response:
    service = service_of(request)
    await service.principal(request)
    agent = service.agent(request.path_params["agent"])
    return json_response(describe_agent(agent))


SESSIONS: Operation[Any] = Operation(
    "Sessions the caller may see (pending=true: the approvals inbox)",
    json_object(sessions=json_array(schema_ref("SessionSummary"))),
    params=[
        query("pending", {"type": "boolean"}),
        PAGE_SIZE,
        query("offset", {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET}),
    ],
)


async def list_sessions(request: Request) -> Response:
    service = service_of(request)
    principal = await service.principal(request)
    agent = service.agent(request.path_params["agent"])
    pending = flag(request, "pending")
    limit = query_int(request, "limit", min(100, service.limits.max_page), 1, service.limits.max_page)
    offset = query_int(request, "offset", 0, 0, MAX_OFFSET)
    owner, tenant = inbox_filters(service.policy, principal)  # in the store: pages stay whole
    found = await agent.list_sessions(owner=owner, tenant=tenant, has_pending=pending, limit=limit, offset=offset)
    visible = [s for s in found if service.policy.can_view(principal, s)]
    return json_response({"sessions": [dump(SUMMARY, s) for s in visible]})


SESSION: Operation[Any] = Operation(
    "A session: summary, open pauses, last response, and what the caller may do in it",
    schema_ref("SessionDetail"),
)


async def read(request: Request) -> Response:
    service = service_of(request)
    agent, session_id, principal, summary = await service.viewing(request)
    chat = agent.chat(session_id, principal=principal)
    last = await chat.last_response()
    return json_response(
        {
            "session": dump(SUMMARY, summary),
            "interrupts": interrupts_json(agent, await chat.interrupts(), tenant=summary.tenant),
            "last_response": None if last is None else response_json(agent, last, tenant=summary.tenant),
            **permissions(service.policy, principal, summary),
        }
    )


INTERRUPTS: Operation[Any] = Operation(
    "The pauses open now", json_object(interrupts=json_array(schema_ref("PendingInterrupt")))
)


async def interrupts(request: Request) -> Response:
    agent, session_id, _, summary = await service_of(request).viewing(request)
    pauses = await agent.chat(session_id).interrupts()
    return json_response({"interrupts": interrupts_json(agent, pauses, tenant=summary.tenant)})


AUDIT: Operation[Any] = Operation(
    "The audit trail: every answer, who gave it, when, through what",
    json_object(entries=json_array(schema_ref("AuditEntry"))),
)


async def audit(request: Request) -> Response:
    agent, session_id, _, summary = await service_of(request).viewing(request)
    entries = await agent.chat(session_id).audit_trail()
    return json_response({"entries": audit_json(agent, entries, tenant=summary.tenant)})


HISTORY: Operation[Any] = Operation(
    "The conversation as the model sees it", json_object(messages=json_array(schema_ref("Message")))
)


async def history(request: Request) -> Response:
    agent, session_id, _, _ = await service_of(request).viewing(request)
    return json_response({"messages": dump(MESSAGES, await agent.chat(session_id).history())})
