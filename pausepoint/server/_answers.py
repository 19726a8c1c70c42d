"""Answers, in the REST API: answers to paused calls (``resume``), one pause answered by its
call's ref (``respond``, ``deny``, ``restart``, ``approve``), and every open pause cancelled.

Every answer goes through ``Chat.resume`` (``Chat.approve``, ``answer_by_ref`` for an answer by
ref alone) with ``via="http"`` and the caller as principal, so the core checks every promise of
a pause — a pause named by its ref is looked up under the session's lock, never here — and the
audit trail records who answered. The ``Idempotency-Key`` header makes a retried answer safe.
An answer carrying an approval link (``"link"``: the person decided on the card a link opened)
is bound to the link's pause and recorded with ``via="link"``, once the link is checked
(``_link_routes.answered_by_link``: a bad, used, expired or superseded link decides nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .._rest import ApproveBody, CancelBody, DenyBody, RespondBody, RestartBody, ResumeBody, grant_of
from ..errors import NotFound
from ..runtime._calls import answer_by_ref
from ..session._interrupts import ToolResponse, ToolRestart
from ._auth import current_tenant
from ._display import response_json
from ._limits import read_json
from ._link_routes import answered_by_link
from ._params import idempotency_key
from ._replies import AGENT_RESPONSE, json_response, rest_turn
from ._routes import IDEMPOTENCY_KEY, Operation
from ._service import service_of

__all__ = ["ANSWERS", "CANCEL", "RESUME", "answer", "cancel", "resume"]

RESUME = Operation("Answer paused calls", AGENT_RESPONSE, body=ResumeBody, stream=True, params=[IDEMPOTENCY_KEY])


async def resume(request: Request) -> Response:
    service = service_of(request)
    agent, session_id, principal = await service.answering(request)
    body = RESUME.parse(await read_json(request, service.limits))
    respond = [item.to_answer() for item in body.respond]
    restart = [item.to_answer() for item in body.restart]
    key = idempotency_key(request)
    chat = agent.chat(session_id, principal=principal)

    def turn(streamed: bool) -> Any:
        start = chat.resume_stream if streamed else chat.resume
        return start(
            respond=respond,
            restart=restart,
            metadata=body.metadata,
            idempotency_key=key,
            principal=principal,
            via="http",
        )

    return await rest_turn(request, service, agent, session_id, turn)


RESPOND = Operation(
    "Answer a pause with the call's result", AGENT_RESPONSE, body=RespondBody, stream=True, params=[IDEMPOTENCY_KEY]
)
DENY = Operation("Deny a pause", AGENT_RESPONSE, body=DenyBody, stream=True, params=[IDEMPOTENCY_KEY])
RESTART = Operation(
    "Run the paused tool again (a call paused for approval: approve it; with grant, later calls too)",
    AGENT_RESPONSE,
    body=RestartBody,
    stream=True,
    params=[IDEMPOTENCY_KEY],
)
APPROVE = Operation(
    "Approve a pause: a yes for an interrupt-only tool, a run with tool_approved for a tool "
    "that paused itself or was paused for approval (422 when a yes cannot answer it). Under the "
    "agent's approval policy: 403 approval_forbidden (a role the caller lacks, or separation of "
    "duties), 409 already_approved (the caller's approval of a quorum is counted already); an "
    "approval that is not the last a quorum needs is recorded and the pause stays open "
    "(view.approval.progress: '1 of 2 approvals'). grant: approve later calls too",
    AGENT_RESPONSE,
    body=ApproveBody,
    stream=True,
    params=[IDEMPOTENCY_KEY],
)
#: the answers to one pause, by the last segment of their path
ANSWERS: dict[str, Operation[Any]] = {"respond": RESPOND, "deny": DENY, "restart": RESTART, "approve": APPROVE}


async def answer(request: Request) -> Response:
    service = service_of(request)
    agent, session_id, principal = await service.answering(request)
    ref, action = request.path_params["ref"], request.path_params["action"]
    if action not in ANSWERS:
        raise NotFound(f"no action {action!r}: {', '.join(ANSWERS)}")
    body: RespondBody | DenyBody | RestartBody | ApproveBody = ANSWERS[action].parse(
        await read_json(request, service.limits)
    )
    via, pause_id, key = "http", body.pause_id, idempotency_key(request)
    if body.link is not None:  # checked before anything is decided: a bad link decides nothing
        via, pause_id = "link", await answered_by_link(service, agent, session_id, ref, body.link, pause_id, key)
    chat = agent.chat(session_id, principal=principal)
    if isinstance(body, ApproveBody):
        edited = body.replace_input if "replace_input" in body.model_fields_set else ...
        grant = grant_of(body.grant)

        def approve(streamed: bool) -> Any:
            start = chat.approve_stream if streamed else chat.approve
            return start(
                ref,
                replace_input=edited,
                grant=grant,
                pause_id=pause_id,
                metadata=body.metadata,
                idempotency_key=key,
                principal=principal,
                via=via,
            )

        return await rest_turn(request, service, agent, session_id, approve)
    build = _answer_to(ref, body, pause_id)

    def respond(streamed: bool) -> Any:
        return answer_by_ref(
            chat.calls, ref, build, streamed=streamed, idempotency_key=key, principal=principal, via=via
        )

    return await rest_turn(request, service, agent, session_id, respond)


def _answer_to(
    ref: str, body: RespondBody | DenyBody | RestartBody, pause_id: str | None
) -> Callable[[str], ToolResponse | ToolRestart]:
    """The answer a respond, deny or restart body gives the call ``ref``'s pause ``pause_id``,
    given the name of the call's tool (the core looks it up under the session's lock; a
    ``name`` in the body wins)."""
    if isinstance(body, RespondBody):
        r = body
        return lambda name: ToolResponse(
            ref, r.name or name, r.output, r.metadata, pause_id=pause_id, grant=grant_of(r.grant)
        )
    if isinstance(body, DenyBody):
        d = body
        return lambda name: ToolResponse(
            ref, d.name or name, None, d.metadata, decision="deny", reason=d.reason, pause_id=pause_id
        )
    s = body
    return lambda name: ToolRestart(
        ref, s.name or name, s.replace_input, s.resumed_metadata, pause_id, grant_of(s.grant)
    )


CANCEL = Operation("Cancel every open pause", AGENT_RESPONSE, body=CancelBody)


async def cancel(request: Request) -> Response:
    service = service_of(request)
    agent, session_id, principal = await service.conversing(request, "cancel the pauses of")
    body = CANCEL.parse(await read_json(request, service.limits))
    chat = agent.chat(session_id, principal=principal)
    response = await chat.cancel_pending(body.reason, principal=principal, via="http")
    service.feed.notify(agent.name, session_id)
    return json_response(response_json(agent, response, tenant=current_tenant()))  # (one converses in one's tenant)
