"""The agent endpoint in the reference's protocol: ``POST /agents/{agent}`` (a turn),
``POST /agents/{agent}/getSnapshot`` and ``POST /agents/{agent}/abort``.

Translation lives in ``_genkit``; this module decides which session a request names, checks
that the caller may use it and that the snapshot is the latest, and runs the turn through the
same ``Chat`` calls a Python caller makes (so every promise of a pause holds; ``via="genkit"``).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .._agent import Agent
from .._chat import Chat
from .._response import AgentResponse
from ..errors import ClientStateRefused, InvalidRequest, NotFound, SessionNotFound, StaleSnapshot
from ..stores import SessionSummary
from . import _genkit as genkit
from ._errors import dumps, guarded
from ._limits import check_history, check_message_size, read_json
from ._service import Service
from ._turns import run_turn

__all__ = ["agent_routes"]


def _frame(kind: str, value: Any) -> bytes:
    if kind == "chunk":
        return genkit.frame("message", value)
    if kind == "response":
        return genkit.frame("result", value["result"])
    return genkit.frame("error", value)


def agent_routes(service: Service) -> list[Route]:
    async def turn(request: Request) -> Response:
        principal = await service.principal(request)  # before any lookup: nothing is learnt without a token
        agent = service.agent(request.path_params["agent"])
        wire = genkit.parse_turn(await read_json(request, service.limits))
        if wire.has_state:
            raise ClientStateRefused(
                f"agent {agent.name!r} keeps its sessions on the server: send 'snapshotId' or 'sessionId', not 'state'"
            )
        if wire.detach:
            raise InvalidRequest("detached turns are not supported: stream the turn, or send it and wait")
        if wire.message is not None:
            check_message_size(wire.message_json, service.limits)
        chat = await _chat_for(service, agent, wire, principal)
        if wire.message is not None:
            message = wire.message

            def start() -> Any:
                return chat.send_stream(message, principal=principal, via="genkit")

        else:
            if wire.snapshot_id is None and wire.session_id is None:
                raise InvalidRequest("a resume needs 'init.snapshotId' (or 'init.sessionId')")
            paused = {p.ref: p for p in await chat.interrupts()}
            restart = [genkit.restart_answer(w, paused.get(w.ref)) for w in wire.restart]
            key = request.headers.get("idempotency-key")

            def start() -> Any:
                return chat.resume_stream(
                    respond=wire.respond,
                    restart=restart,
                    metadata=wire.metadata,
                    idempotency_key=key,
                    principal=principal,
                    via="genkit",
                )

        return await run_turn(
            request,
            start,
            on_done=lambda: service.feed.notify(agent.name, chat.session_id),
            reply=lambda r: {"result": genkit.output_json(r)},
            chunk=genkit.ChunkTranslator().translate,
            frame=_frame,
        )

    async def get_snapshot(request: Request) -> Response:
        principal = await service.principal(request)
        agent = service.agent(request.path_params["agent"])
        snap, session_id = genkit.lookup_ids(await read_json(request, service.limits), need_one=True)
        if snap is not None:
            session_id, version = genkit.parse_snapshot_id(snap)
        assert session_id is not None
        summary = await service.visible(agent, session_id, principal)
        chat = agent.chat(session_id, principal=principal)
        latest = await _latest(chat)
        if snap is not None:
            _check_latest(snap, version, latest)
        snapshot = genkit.snapshot_json(latest, await chat.history(), summary, await chat.interrupts())
        return _json({"result": snapshot})

    async def abort(request: Request) -> Response:
        principal = await service.principal(request)
        agent = service.agent(request.path_params["agent"])
        snap, _ = genkit.lookup_ids(await read_json(request, service.limits), need_one=False)
        assert snap is not None
        session_id, version = genkit.parse_snapshot_id(snap)
        await service.conversable(agent, session_id, principal)
        latest = await _latest(agent.chat(session_id, principal=principal))
        if version > latest.version or not await _issued(agent, session_id, version):
            raise NotFound(f"no snapshot {snap!r}", snapshot_id=snap)
        failed = version == latest.version and latest.finish_reason.value == "failed"
        return _json({"result": genkit.abort_json(snap, "failed" if failed else "completed")})

    return [
        Route("/agents/{agent}", guarded(turn), methods=["POST"]),
        Route("/agents/{agent}/getSnapshot", guarded(get_snapshot), methods=["POST"]),
        Route("/agents/{agent}/abort", guarded(abort), methods=["POST"]),
    ]


async def _chat_for(service: Service, agent: Agent, wire: genkit.GenkitTurn, principal: str) -> Chat:
    """The chat a turn request names: a new session, the session named, or the snapshot's."""
    if wire.snapshot_id is not None:
        session_id, version = genkit.parse_snapshot_id(wire.snapshot_id)
        if wire.session_id is not None and wire.session_id != session_id:
            raise InvalidRequest(
                f"snapshot {wire.snapshot_id!r} does not belong to session {wire.session_id!r}",
                snapshot_id=wire.snapshot_id,
            )
        summary = await _may_take(service, agent, session_id, principal, wire)
        chat = agent.chat(session_id, principal=principal)
        _check_latest(wire.snapshot_id, version, await _latest(chat))
    elif wire.session_id is not None:
        summary = await _may_take(service, agent, wire.session_id, principal, wire)
        chat = agent.chat(wire.session_id, principal=principal)
    else:
        return agent.chat(principal=principal)
    if wire.message is not None:
        check_history(summary, service.limits)
    return chat


async def _may_take(
    service: Service, agent: Agent, session_id: str, principal: str, wire: genkit.GenkitTurn
) -> SessionSummary:
    """A message is the owner's to send (``can_converse``); answers are an approver's too."""
    if wire.message is not None:
        return await service.conversable(agent, session_id, principal)
    return await service.answerable(agent, session_id, principal)


async def _issued(agent: Agent, session_id: str, version: int) -> bool:
    """Whether a turn ended at ``version`` of the session's log (only those are snapshots)."""
    if version < 1:
        return False
    found = await agent.store.read(session_id, after_version=version - 1, kinds=("turn_ended",))
    return found is not None and bool(found.entries) and found.entries[0].version == version


async def _latest(chat: Chat) -> AgentResponse:
    latest = await chat.last_response()
    if latest is None:
        raise SessionNotFound(f"session {chat.session_id!r} has no completed turn", session_id=chat.session_id)
    return latest


def _check_latest(snap: str, version: int, latest: AgentResponse) -> None:
    if version == latest.version:
        return
    current = genkit.snapshot_id(latest.session_id, latest.version)
    if version < latest.version:
        raise StaleSnapshot(
            f"snapshot {snap!r} is not the latest of its session ({current!r}): continue from the latest "
            "(getSnapshot with the sessionId) — sessions do not branch",
            snapshot_id=snap,
            latest_snapshot_id=current,
        )
    raise NotFound(f"no snapshot {snap!r}", snapshot_id=snap)


def _json(value: Any) -> Response:
    return Response(dumps(value), media_type="application/json")
