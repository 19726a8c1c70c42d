"""The REST API (snake_case JSON, described by ``/openapi.json``): chats, the approvals inbox,
answers by ref, the audit trail, the grants given in a session, and the SSE feed.

Every answer goes through ``Chat.resume`` with ``via="http"`` and the caller as principal, so
the core checks every promise of a pause and the audit trail records who answered. Sessions
another principal owns are 404 (``Service.visible``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from .._agent import Agent
from .._chat import Chat
from .._interrupts import PendingInterrupt, ToolResponse, ToolRestart
from .._rest import (
    GRANTS,
    MESSAGES,
    SUMMARY,
    CancelBody,
    DenyBody,
    GrantBody,
    RespondBody,
    RestartBody,
    ResumeBody,
    RevokeBody,
    SendBody,
    dump,
    grant_of,
    user_message,
)
from ..errors import InputEditNotAllowed, InvalidAnswer, InvalidRequest, NotFound
from ._display import audit_json, chunk_json, describe_agent, interrupts_json, permissions, response_json
from ._errors import dumps, guarded
from ._limits import ascii_digits, check_history, check_message_size, parse_body, read_json
from ._service import Service
from ._turns import event, run_turn
from ._validate import validate_route

__all__ = ["ApproveBody", "rest_routes"]

_MAX_KEY = 200


class ApproveBody(BaseModel):
    """Approve a pause the way the console does (``Agent.approval``): a yes for an interrupt-only
    tool, a run with ``tool_approved`` for a tool that paused itself. ``replace_input`` (only for
    tools that allow edits) approves an edited input; ``grant`` approves later calls too (where
    the approval policy lets the pause grant them: its view says ``approval.grantable``)."""

    model_config = ConfigDict(extra="forbid")

    replace_input: Any = None
    metadata: dict[str, Any] | None = None
    pause_id: str | None = None
    grant: GrantBody | None = None


def rest_routes(service: Service) -> list[Route]:
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
        limit = _int(request, "limit", 100, 1, limits.max_page)
        offset = _int(request, "offset", 0, 0, 10**9)
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
        if action not in ("respond", "deny", "restart", "approve"):
            raise NotFound(f"no action {action!r}: respond, deny, restart or approve")
        raw = await read_json(request, limits)
        chat = agent.chat(session_id, principal=principal)
        respond: list[ToolResponse] = []
        restart: list[ToolRestart] = []
        if action == "respond":
            r = parse_body(RespondBody, raw)
            name = r.name or await _name_of(chat, ref)
            respond.append(ToolResponse(ref, name, r.output, r.metadata, pause_id=r.pause_id, grant=grant_of(r.grant)))
        elif action == "deny":
            d = parse_body(DenyBody, raw)
            name = d.name or await _name_of(chat, ref)
            respond.append(
                ToolResponse(ref, name, None, d.metadata, decision="deny", reason=d.reason, pause_id=d.pause_id)
            )
        elif action == "restart":
            s = parse_body(RestartBody, raw)
            name = s.name or await _name_of(chat, ref)
            restart.append(ToolRestart(ref, name, s.replace_input, s.resumed_metadata, s.pause_id, grant_of(s.grant)))
        else:
            a = parse_body(ApproveBody, raw)
            edited = "replace_input" in a.model_fields_set
            approval = await _approval(agent, chat, ref, a.pause_id, a.replace_input, edited=edited)
            approval = dataclasses.replace(approval, grant=grant_of(a.grant))
            if isinstance(approval, ToolRestart):
                restart.append(approval)
            else:
                respond.append(approval)
            return await _answer(request, agent, session_id, principal, respond, restart, a.metadata)
        return await _answer(request, agent, session_id, principal, respond, restart, None)

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
        key = request.headers.get("idempotency-key")
        if key is not None and not 0 < len(key) <= _MAX_KEY:
            raise InvalidRequest(f"the Idempotency-Key header must have 1 to {_MAX_KEY} characters")
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

    base = "/v1/agents/{agent}/sessions"
    one = base + "/{session_id}"
    return [
        Route("/v1/agents", guarded(agents), methods=["GET"]),
        Route("/v1/agents/{agent}", guarded(agent_info), methods=["GET"]),
        Route(base, guarded(list_sessions), methods=["GET"]),
        Route(base, guarded(create), methods=["POST"]),
        Route(one, guarded(read), methods=["GET"]),
        Route(one + "/messages", guarded(send), methods=["POST"]),
        Route(one + "/interrupts", guarded(interrupts), methods=["GET"]),
        Route(one + "/audit", guarded(audit), methods=["GET"]),
        Route(one + "/history", guarded(history), methods=["GET"]),
        Route(one + "/resume", guarded(resume), methods=["POST"]),
        Route(one + "/cancel", guarded(cancel), methods=["POST"]),
        Route(one + "/interrupts/{ref}/{action:str}", guarded(answer), methods=["POST"]),
        Route(one + "/grants", guarded(grants), methods=["GET"]),
        Route(one + "/grants/{grant_id}/revoke", guarded(revoke), methods=["POST"]),
        validate_route(service),
        Route("/v1/feed", guarded(feed), methods=["GET"]),
    ]


async def _name_of(chat: Any, ref: str) -> str:
    """The tool name of pause ``ref``: open now, or answered before (so a replay is refused as
    ``AlreadyResolved``, not as a name mismatch)."""
    for pause in await chat.interrupts():
        if pause.ref == ref:
            return str(pause.name)
    for entry in await chat.audit_trail():
        if entry.ref == ref:
            return str(entry.name)
    return ""


async def _approval(
    agent: Agent, chat: Any, ref: str, pause_id: str | None, replace_input: Any, *, edited: bool
) -> ToolResponse | ToolRestart:
    """The answer approving the pause of call ``ref`` (``Agent.approval``), with ``replace_input``
    if ``edited``; it names the pause ``pause_id`` when given, else the one live now.

    A ref that is not open now gets the same answer under its known name (so a retry with the
    same idempotency key matches the first one and gets its outcome), and the core refuses
    anything else with its own reason (already answered, unknown, ...).
    """
    pause = next((p for p in await chat.interrupts() if p.ref == ref), None)
    if pause is None:
        name = await _name_of(chat, ref)
        if name not in agent.tools:
            return ToolResponse(ref, name, None, pause_id=pause_id)
        pause = PendingInterrupt(name, ref, None, None, datetime.now(UTC))
    pause = dataclasses.replace(pause, pause_id=pause_id or "")
    try:
        approval = agent.approval(pause)
    except ValueError as exc:
        raise InvalidAnswer(f"cannot approve {pause.name!r} with a yes: {exc}", ref=ref, name=pause.name) from None
    if not edited:
        return approval
    if not isinstance(approval, ToolRestart):
        raise InputEditNotAllowed(
            f"{pause.name!r} only asks a question: answer it, its input cannot be edited", ref=ref, name=pause.name
        )
    return dataclasses.replace(approval, replace_input=replace_input)


def _flag(request: Request, name: str) -> bool | None:
    value = request.query_params.get(name)
    if value is None:
        return None
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise InvalidRequest(f"query parameter {name!r} must be true or false")


def _int(request: Request, name: str, default: int, low: int, high: int) -> int:
    value = request.query_params.get(name)
    if value is None:
        return default
    if not ascii_digits(value) or not low <= int(value) <= high:
        raise InvalidRequest(f"query parameter {name!r} must be an integer from {low} to {high}")
    return int(value)


def _json(value: Any) -> Response:
    return Response(dumps(value), media_type="application/json")
