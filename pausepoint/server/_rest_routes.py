"""The REST API (snake_case JSON, described by ``/openapi.json``): chats, the approvals inbox,
answers by ref, the audit trail, the grants given in a session, and the SSE feed — its rows of
the route table (``_routes``), each with its handler and how the document describes it.

Every answer goes through ``Chat.resume`` (``Chat.approve``, ``answer_by_ref`` for an answer by
ref alone) with ``via="http"`` and the caller as principal, so the core checks every promise of
a pause — a pause named by its ref is looked up under the session's lock, never here — and the
audit trail records who answered. Sessions another principal owns are 404 (``Service.visible``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from .._rest import (
    ApproveBody,
    CancelBody,
    DenyBody,
    RespondBody,
    RestartBody,
    ResumeBody,
    RevokeBody,
    SendBody,
    grant_of,
    user_message,
)
from ..errors import InvalidRequest, NotFound
from ..runtime._agent import Agent
from ..runtime._calls import answer_by_ref
from ..runtime._chat import Chat
from ..session._interrupts import ToolResponse, ToolRestart
from ..session._json import GRANTS, MESSAGES, SUMMARY, dump
from ._display import audit_json, chunk_json, describe_agent, interrupts_json, permissions, response_json
from ._errors import dumps
from ._limits import check_history, check_message_size, parse_body, read_json
from ._params import query_int
from ._routes import IDEMPOTENCY_KEY, Endpoint, Operation, header, query, schema_ref
from ._service import Service
from ._turns import event, run_turn
from ._validate import validate_route

__all__ = ["rest_routes"]

_MAX_KEY = 200


def rest_routes(service: Service) -> list[Endpoint]:
    limits = service.limits

    async def agents(request: Request) -> Response:
        principal = await service.principal(request)
        return _json({"agents": sorted(service.ai.agents), "principal": principal})

    async def agent_info(request: Request) -> Response:
        await service.principal(request)
        agent = service.agent(request.path_params["agent"])
        return _json(describe_agent(agent))

    async def list_sessions(request: Request) -> Response:
        principal = await service.principal(request)
        agent = service.agent(request.path_params["agent"])
        pending = _flag(request, "pending")
        limit = query_int(request, "limit", 100, 1, limits.max_page)
        offset = query_int(request, "offset", 0, 0, 10**9)
        owner = service.policy.inbox_owner(principal)
        found = await agent.list_sessions(owner=owner, has_pending=pending, limit=limit, offset=offset)
        visible = [s for s in found if service.policy.can_view(principal, s)]
        return _json({"sessions": [dump(SUMMARY, s) for s in visible]})

    async def create(request: Request) -> Response:
        principal = await service.principal(request)
        agent = service.agent(request.path_params["agent"])
        body = parse_body(SendBody, await read_json(request, limits))
        check_message_size(body.model_dump(mode="json")["message"], limits)
        chat = agent.chat(principal=principal)
        message = user_message(body)
        return await _turn(
            request,
            agent,
            chat.session_id,
            lambda streamed: (chat.send_stream if streamed else chat.send)(message, principal=principal, via="http"),
        )

    async def send(request: Request) -> Response:
        principal = await service.principal(request)
        agent = service.agent(request.path_params["agent"])
        session_id = request.path_params["session_id"]
        summary = await service.to_message(agent, session_id, principal)
        if summary is None:
            chat = Chat(agent, session_id, principal, new=True)  # a caller-chosen id: the message creates it
        else:
            check_history(summary, limits)
            chat = agent.chat(session_id, principal=principal)
        body = parse_body(SendBody, await read_json(request, limits))
        check_message_size(body.model_dump(mode="json")["message"], limits)
        message = user_message(body)
        return await _turn(
            request,
            agent,
            session_id,
            lambda streamed: (chat.send_stream if streamed else chat.send)(message, principal=principal, via="http"),
        )

    async def read(request: Request) -> Response:
        agent, session_id, principal = await _viewing(request)
        summary = await service.visible(agent, session_id, principal)
        chat = agent.chat(session_id, principal=principal)
        last = await chat.last_response()
        return _json(
            {
                "session": dump(SUMMARY, summary),
                "interrupts": interrupts_json(agent, await chat.interrupts()),
                "last_response": None if last is None else response_json(agent, last),
                **permissions(service.policy, principal, summary),
            }
        )

    async def interrupts(request: Request) -> Response:
        agent, session_id, _ = await _viewing(request)
        return _json({"interrupts": interrupts_json(agent, await agent.chat(session_id).interrupts())})

    async def audit(request: Request) -> Response:
        agent, session_id, _ = await _viewing(request)
        return _json({"entries": audit_json(agent, await agent.chat(session_id).audit_trail())})

    async def history(request: Request) -> Response:
        agent, session_id, _ = await _viewing(request)
        return _json({"messages": dump(MESSAGES, await agent.chat(session_id).history())})

    async def resume(request: Request) -> Response:
        agent, session_id, principal = await _answering(request)
        body = parse_body(ResumeBody, await read_json(request, limits))
        respond = [item.to_answer() for item in body.respond]
        restart = [item.to_answer() for item in body.restart]
        return await _answer(request, agent, session_id, principal, respond, restart, body.metadata)

    async def answer(request: Request) -> Response:
        agent, session_id, principal = await _answering(request)
        ref, action = request.path_params["ref"], request.path_params["action"]
        if action not in answers:
            raise NotFound(f"no action {action!r}: {', '.join(answers)}")
        raw = await read_json(request, limits)
        chat = agent.chat(session_id, principal=principal)
        if action == "approve":
            a = parse_body(ApproveBody, raw)
            edited = a.replace_input if "replace_input" in a.model_fields_set else ...
            key = _idempotency_key(request)

            def approve(streamed: bool) -> Any:
                start = chat.approve_stream if streamed else chat.approve
                return start(
                    ref,
                    replace_input=edited,
                    grant=grant_of(a.grant),
                    pause_id=a.pause_id,
                    metadata=a.metadata,
                    idempotency_key=key,
                    principal=principal,
                    via="http",
                )

            return await _turn(request, agent, session_id, approve)
        build = _answer_to(action, ref, raw)
        key = _idempotency_key(request)

        def respond(streamed: bool) -> Any:
            return answer_by_ref(
                chat.calls, ref, build, streamed=streamed, idempotency_key=key, principal=principal, via="http"
            )

        return await _turn(request, agent, session_id, respond)

    async def grants(request: Request) -> Response:
        agent, session_id, _ = await _viewing(request)
        return _json({"grants": dump(GRANTS, await agent.chat(session_id).grants())})

    async def revoke(request: Request) -> Response:
        agent, session_id, principal = await _answering(request)
        body = parse_body(RevokeBody, await read_json(request, limits))
        chat = agent.chat(session_id, principal=principal)
        grant = await chat.revoke_grant(request.path_params["grant_id"], reason=body.reason, via="http")
        service.feed.notify(agent.name, session_id)
        return _json({"grant": dump(GRANTS, [grant])[0]})

    async def cancel(request: Request) -> Response:
        agent, session_id, principal = await _conversing(request)
        body = parse_body(CancelBody, await read_json(request, limits))
        chat = agent.chat(session_id, principal=principal)
        response = await chat.cancel_pending(body.reason, principal=principal, via="http")
        service.feed.notify(agent.name, session_id)
        return _json(response_json(agent, response))

    async def feed(request: Request) -> Response:
        principal = await service.principal(request)
        positions = await service.feed.start(request.headers.get("last-event-id"))
        followed = service.feed.follow(positions, lambda s: service.policy.can_view(principal, s))

        async def events() -> AsyncIterator[bytes]:
            yield b": connected\n\n"
            pending: asyncio.Future[Any] | None = None
            try:
                while True:
                    pending = pending or asyncio.ensure_future(anext(followed))
                    done, _ = await asyncio.wait([pending], timeout=15.0)
                    if not done:
                        yield b": keep-alive\n\n"
                        continue
                    event_id, name, data = pending.result()
                    pending = None
                    yield b"id: " + event_id.encode() + b"\n" + event(name, data)
            finally:
                if pending is not None:
                    pending.cancel()
                    with contextlib.suppress(BaseException):
                        await pending
                await followed.aclose()

        return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    # -- helpers sharing the closure ------------------------------------------------------------

    async def _viewing(request: Request) -> tuple[Agent, str, str]:
        principal = await service.principal(request)  # before any lookup: nothing is learnt without a token
        agent = service.agent(request.path_params["agent"])
        session_id = request.path_params["session_id"]
        await service.visible(agent, session_id, principal)
        return agent, session_id, principal

    async def _answering(request: Request) -> tuple[Agent, str, str]:
        principal = await service.principal(request)
        agent = service.agent(request.path_params["agent"])
        session_id = request.path_params["session_id"]
        await service.answerable(agent, session_id, principal)
        return agent, session_id, principal

    async def _conversing(request: Request) -> tuple[Agent, str, str]:
        principal = await service.principal(request)
        agent = service.agent(request.path_params["agent"])
        session_id = request.path_params["session_id"]
        await service.conversable(agent, session_id, principal)
        return agent, session_id, principal

    async def _turn(request: Request, agent: Agent, session_id: str, turn: Callable[[bool], Any]) -> Response:
        return await run_turn(
            request,
            turn,
            keep_alive=agent.sessions.tasks,
            on_done=lambda: service.feed.notify(agent.name, session_id),
            reply=lambda response: response_json(agent, response),
            chunk=lambda chunk: chunk_json(agent, chunk),
        )

    async def _answer(
        request: Request,
        agent: Agent,
        session_id: str,
        principal: str,
        respond: list[ToolResponse],
        restart: list[ToolRestart],
        metadata: dict[str, Any] | None,
    ) -> Response:
        key = _idempotency_key(request)
        chat = agent.chat(session_id, principal=principal)

        def turn(streamed: bool) -> Any:
            resume = chat.resume_stream if streamed else chat.resume
            return resume(
                respond=respond,
                restart=restart,
                metadata=metadata,
                idempotency_key=key,
                principal=principal,
                via="http",
            )

        return await _turn(request, agent, session_id, turn)

    response = schema_ref("AgentResponse")
    sessions = "/v1/agents/{agent}/sessions"  # two routes: the inbox, and a new session
    answers = {
        "respond": Operation(
            "Answer a pause with the call's result", response, body="RespondBody", stream=True, params=[IDEMPOTENCY_KEY]
        ),
        "deny": Operation("Deny a pause", response, body="DenyBody", stream=True, params=[IDEMPOTENCY_KEY]),
        "restart": Operation(
            "Run the paused tool again (a call paused for approval: approve it; with grant, later calls too)",
            response,
            body="RestartBody",
            stream=True,
            params=[IDEMPOTENCY_KEY],
        ),
        "approve": Operation(
            "Approve a pause: a yes for an interrupt-only tool, a run with tool_approved for a tool "
            "that paused itself or was paused for approval (422 when a yes cannot answer it). Under the "
            "agent's approval policy: 403 approval_forbidden (a role the caller lacks, or separation of "
            "duties), 409 already_approved (the caller's approval of a quorum is counted already); an "
            "approval that is not the last a quorum needs is recorded and the pause stays open "
            "(view.approval.progress: '1 of 2 approvals'). grant: approve later calls too",
            response,
            body="ApproveBody",
            stream=True,
            params=[IDEMPOTENCY_KEY],
        ),
    }
    return [
        Endpoint(
            "GET",
            "/v1/agents",
            agents,
            Operation(
                "The agents served, and who the caller is",
                _object(agents=_array({"type": "string"}), principal={"type": "string"}),
            ),
        ),
        Endpoint(
            "GET",
            "/v1/agents/{agent}",
            agent_info,
            Operation(
                "An agent: its description (never its system prompt) and tools (schemas; pauses_only, "
                "allow_input_edits, what approving answers)",
                _object(name={"type": "string"}, description={"type": "string"}, tools=_array(schema_ref("Tool"))),
            ),
        ),
        Endpoint(
            "GET",
            sessions,
            list_sessions,
            Operation(
                "Sessions the caller may see (pending=true: the approvals inbox)",
                _object(sessions=_array(schema_ref("SessionSummary"))),
                params=[
                    query("pending", {"type": "boolean"}),
                    query("limit", {"type": "integer", "minimum": 1}),
                    query("offset", {"type": "integer", "minimum": 0}),
                ],
            ),
        ),
        Endpoint(
            "POST",
            sessions,
            create,
            Operation("Start a session with a user message", response, body="SendBody", stream=True),
            hot=True,
        ),
        Endpoint(
            "GET",
            "/v1/agents/{agent}/sessions/{session_id}",
            read,
            Operation(
                "A session: summary, open pauses, last response, and what the caller may do in it",
                schema_ref("SessionDetail"),
            ),
        ),
        Endpoint(
            "POST",
            "/v1/agents/{agent}/sessions/{session_id}/messages",
            send,
            Operation(
                "Send a user message (to an id no session has yet: start a session with that id)",
                response,
                body="SendBody",
                stream=True,
            ),
            hot=True,
        ),
        Endpoint(
            "GET",
            "/v1/agents/{agent}/sessions/{session_id}/interrupts",
            interrupts,
            Operation("The pauses open now", _object(interrupts=_array(schema_ref("PendingInterrupt")))),
        ),
        Endpoint(
            "GET",
            "/v1/agents/{agent}/sessions/{session_id}/audit",
            audit,
            Operation(
                "The audit trail: every answer, who gave it, when, through what",
                _object(entries=_array(schema_ref("AuditEntry"))),
            ),
        ),
        Endpoint(
            "GET",
            "/v1/agents/{agent}/sessions/{session_id}/history",
            history,
            Operation("The conversation as the model sees it", _object(messages=_array(schema_ref("Message")))),
        ),
        Endpoint(
            "POST",
            "/v1/agents/{agent}/sessions/{session_id}/resume",
            resume,
            Operation("Answer paused calls", response, body="ResumeBody", stream=True, params=[IDEMPOTENCY_KEY]),
            hot=True,
        ),
        Endpoint(
            "POST",
            "/v1/agents/{agent}/sessions/{session_id}/cancel",
            cancel,
            Operation("Cancel every open pause", response, body="CancelBody"),
        ),
        Endpoint(
            "POST", "/v1/agents/{agent}/sessions/{session_id}/interrupts/{ref}/{action:str}", answer, answers, hot=True
        ),
        Endpoint(
            "GET",
            "/v1/agents/{agent}/sessions/{session_id}/grants",
            grants,
            Operation(
                "The grants given in the session (active, revoked, expired or used up), oldest first",
                _object(grants=_array(schema_ref("GrantInfo"))),
            ),
        ),
        Endpoint(
            "POST",
            "/v1/agents/{agent}/sessions/{session_id}/grants/{grant_id}/revoke",
            revoke,
            Operation(
                "Revoke a grant: it approves no later call (revoking it again changes nothing; 404 "
                "grant_not_found for an id the session never gave)",
                _object(grant=schema_ref("GrantInfo")),
                body="RevokeBody",
            ),
        ),
        validate_route(service),
        Endpoint(
            "GET",
            "/v1/feed",
            feed,
            Operation(
                "Server-sent events: 'pause', 'answer' and 'turn_end', for the sessions the caller may "
                "see; each has an id: reconnect with Last-Event-ID to get exactly the events missed",
                params=[header("Last-Event-ID", {"type": "string"})],
                responses={
                    "200": {"description": "an event stream", "content": {"text/event-stream": {}}},
                    "400": {
                        "description": "a Last-Event-ID this feed never sent",
                        "content": {"application/json": {"schema": schema_ref("Error")}},
                    },
                },
            ),
        ),
    ]


def _answer_to(action: str, ref: str, raw: Any) -> Callable[[str], ToolResponse | ToolRestart]:
    """The answer a respond, deny or restart body gives the call ``ref``, given the name of the
    call's tool (the core looks it up under the session's lock; a ``name`` in the body wins)."""
    if action == "respond":
        r = parse_body(RespondBody, raw)
        return lambda name: ToolResponse(
            ref, r.name or name, r.output, r.metadata, pause_id=r.pause_id, grant=grant_of(r.grant)
        )
    if action == "deny":
        d = parse_body(DenyBody, raw)
        return lambda name: ToolResponse(
            ref, d.name or name, None, d.metadata, decision="deny", reason=d.reason, pause_id=d.pause_id
        )
    s = parse_body(RestartBody, raw)
    return lambda name: ToolRestart(
        ref, s.name or name, s.replace_input, s.resumed_metadata, s.pause_id, grant_of(s.grant)
    )


def _idempotency_key(request: Request) -> str | None:
    key = request.headers.get("idempotency-key")
    if key is not None and not 0 < len(key) <= _MAX_KEY:
        raise InvalidRequest(f"the Idempotency-Key header must have 1 to {_MAX_KEY} characters")
    return key


def _object(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def _array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


def _flag(request: Request, name: str) -> bool | None:
    value = request.query_params.get(name)
    if value is None:
        return None
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise InvalidRequest(f"query parameter {name!r} must be true or false")


def _json(value: Any) -> Response:
    return Response(dumps(value), media_type="application/json")
