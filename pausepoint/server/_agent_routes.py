"""The agent endpoint in the reference's protocol: ``POST /agents/{agent}`` (a turn),
``POST /agents/{agent}/getSnapshot`` and ``POST /agents/{agent}/abort``.

Translation lives in ``_genkit`` and snapshot ids in ``_snapshots``; this module decides which
session a request names (a new one, one named by its id — created by its first message if no
session has that id yet — or a snapshot's), checks that the caller may use it and that the
snapshot is the newest, and runs the turn through the same ``Chat`` calls a Python caller
makes (so every promise of a pause holds; ``via="genkit"``). ``detach: true`` starts the turn
in the background and answers at once with the snapshot to poll (``getSnapshot``) or stop
(``abort``), from any server process on the same store.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..errors import ClientStateRefused, InvalidRequest, NotFound, SessionNotFound, StaleSnapshot
from ..runtime._agent import Agent
from ..runtime._chat import Chat, DetachedTurn
from ..runtime._launch import TurnStatus
from ..session._interrupts import ToolResponse, ToolRestart
from ..session._state import SessionState
from ..stores import SessionSummary
from . import _genkit as genkit
from ._auth import current_tenant
from ._limits import check_history, check_message_size, read_json
from ._params import idempotency_key, no_key_unless_named
from ._replies import json_response
from ._service import Service, service_of
from ._snapshots import (
    SNAPSHOT_NOT_FOUND,
    check_continuable,
    latest_snapshot,
    parse_snapshot_id,
    read_state,
    shown_pauses,
    snapshot_at,
    status_at,
)
from ._turns import run_turn, wants_stream

__all__ = ["abort", "get_snapshot", "turn"]


def _frame(kind: str, value: Any) -> bytes:
    if kind == "chunk":
        return genkit.frame("message", value)
    if kind == "response":
        return genkit.frame("result", value["result"])
    return genkit.frame("error", value)


async def turn(request: Request) -> Response:
    """``POST /agents/{agent}``: a message or answers, in a session (or a new one); ``detach``
    runs it in the background and answers at once with the snapshot to poll."""
    service = service_of(request)
    principal = await service.principal(request)  # before any lookup: nothing is learnt without a token
    agent = service.agent(request.path_params["agent"])
    wire = genkit.parse_turn(await read_json(request, service.limits), request.query_params)
    if wire.has_state:
        raise ClientStateRefused(
            f"agent {agent.name!r} keeps its sessions on the server: send 'snapshotId' or 'sessionId', not 'state'"
        )
    if wire.message is not None:
        check_message_size(wire.message_json, service.limits)
    key = idempotency_key(request)
    chat, seen = await _chat_for(service, agent, wire, principal, key)
    respond: list[ToolResponse] = []
    restart: list[ToolRestart] = []
    if wire.message is None:
        if wire.snapshot_id is None and wire.session_id is None:
            raise InvalidRequest("a resume needs 'init.snapshotId' (or 'init.sessionId')")
        # Answers from a snapshot answer the pauses it showed (a call that paused again
        # since refuses them); answers by session id carry only the ref (see PauseChanged).
        respond = [replace(r, pause_id=seen.get(r.ref)) for r in wire.respond]
        restart = [replace(r, pause_id=seen.get(r.ref)) for r in wire.restart]
    message = wire.message
    if wire.detach:
        if message is not None:
            detached = await chat.detach(message, idempotency_key=key, principal=principal, via="genkit")
        else:
            detached = await chat.detach(
                respond=respond,
                restart=restart,
                metadata=wire.metadata,
                idempotency_key=key,
                principal=principal,
                via="genkit",
            )
        return _detached(request, service, agent, chat.session_id, detached)

    def start(streamed: bool) -> Any:
        if message is not None:
            send = chat.send_stream if streamed else chat.send
            return send(message, idempotency_key=key, principal=principal, via="genkit")
        resume = chat.resume_stream if streamed else chat.resume
        return resume(
            respond=respond,
            restart=restart,
            metadata=wire.metadata,
            idempotency_key=key,
            principal=principal,
            via="genkit",
        )

    return await run_turn(
        request,
        start,
        keep_alive=agent.sessions.tasks,
        on_done=lambda: service.feed.notify(agent.name, chat.session_id),
        reply=lambda r: {"result": genkit.output_json(r)},
        chunk=genkit.ChunkTranslator().translate,
        frame=_frame,
    )


def _detached(request: Request, service: Service, agent: Agent, session_id: str, detached: DetachedTurn) -> Response:
    """The reply to a detached turn: the snapshot to poll (``getSnapshot``) or stop (``abort``)."""
    _notify_when_done(service, agent, detached)
    service.feed.notify(agent.name, session_id)
    reply = genkit.detached_json(session_id, detached.turn_id)
    if wants_stream(request):
        return Response(genkit.frame("result", reply), media_type="text/event-stream")
    return json_response({"result": reply})


async def get_snapshot(request: Request) -> Response:
    """``POST /agents/{agent}/getSnapshot``: the snapshot named, or the session's newest."""
    service = service_of(request)
    principal = await service.principal(request)  # before any lookup: nothing is learnt without a token
    agent = service.agent(request.path_params["agent"])
    snap, session_id = genkit.lookup_ids(await read_json(request, service.limits), need_one=True)
    version = 0
    if snap is not None:
        session_id, version = parse_snapshot_id(snap)
    assert session_id is not None
    with _snapshot_of(snap):
        summary = await service.visible(agent, session_id, principal)
        state = await read_state(agent.chat(session_id, principal=principal))
    now = agent.clock()
    if snap is not None:
        snapshot = snapshot_at(state, version, now, agent.abandon_after)
    else:
        snapshot = latest_snapshot(state, now, agent.abandon_after)
    return json_response({"result": genkit.snapshot_json(snapshot, summary.updated_at)})


async def abort(request: Request) -> Response:
    """``POST /agents/{agent}/abort``: stop the detached turn a snapshot names, if it runs."""
    service = service_of(request)
    principal = await service.principal(request)  # before any lookup: nothing is learnt without a token
    agent = service.agent(request.path_params["agent"])
    snap, _ = genkit.lookup_ids(await read_json(request, service.limits), need_one=False)
    assert snap is not None
    session_id, version = parse_snapshot_id(snap)
    with _snapshot_of(snap):
        await service.conversable(agent, session_id, principal, "abort the turns of")
    chat = agent.chat(session_id, principal=principal)
    status = status_at(await read_state(chat), version, agent.clock(), agent.abandon_after)
    if status is None:
        raise NotFound(f"no snapshot {snap!r}", snapshot_id=snap, reason=SNAPSHOT_NOT_FOUND)
    if status in (TurnStatus.PENDING, TurnStatus.EXPIRED):
        status = await DetachedTurn(chat, version).abort(principal=principal, via="genkit")
        service.feed.notify(agent.name, session_id)
    return json_response({"result": genkit.abort_json(snap, status)})


async def _chat_for(
    service: Service, agent: Agent, wire: genkit.GenkitTurn, principal: str, key: str | None
) -> tuple[Chat, dict[str, str]]:
    """The chat a turn request names — a new session, the session named (created by a message
    when no session has that id yet), or the snapshot's, which must be the newest — and the
    pauses that snapshot shows (each call's ref -> its pause's id; none without a snapshot).

    A retry with the idempotency ``key`` of a request the session took names a snapshot that is
    no longer the newest (the request made a newer one): it is not refused as stale, and its
    answers name the pauses the first one answered, so the core replays that request's outcome."""
    if wire.snapshot_id is not None:
        session_id, version = parse_snapshot_id(wire.snapshot_id)
        if wire.session_id is not None and wire.session_id != session_id:
            raise InvalidRequest(
                f"snapshot {wire.snapshot_id!r} does not belong to session {wire.session_id!r}",
                snapshot_id=wire.snapshot_id,
                reason="INVALID_SESSION_ID",  # Genkit's reason for it
            )
        with _snapshot_of(wire.snapshot_id):
            summary = await _may_take(service, agent, session_id, principal, wire)
            chat = agent.chat(session_id, principal=principal)
            state = await read_state(chat)
        if key is not None and key in state.keys:
            taken = (p for p in state.pauses.values() if p.answer is not None and p.answer.idempotency_key == key)
            return chat, {p.record.call_ref: p.record.ref for p in taken}
        try:
            check_continuable(state, version, agent.clock(), agent.abandon_after)
        except StaleSnapshot:
            shown = await _pauses_shown(agent, state, version, wire)
            if shown is None:
                raise
            return chat, shown  # those pauses are answered, or the core says why they cannot be
        seen = {p.record.call_ref: p.record.ref for p in state.open.values()}
        if wire.message is not None:
            check_history(summary, service.limits)
        return chat, seen
    if wire.session_id is not None:
        if wire.message is None:
            summary = await service.answerable(agent, wire.session_id, principal)
        else:
            found = await service.to_message(agent, wire.session_id, principal)
            if found is None:  # the caller names the new session (see Service.to_message)
                return Chat(agent, wire.session_id, principal, new=True, tenant=current_tenant()), {}
            summary = found
        chat = agent.chat(wire.session_id, principal=principal)
    else:
        no_key_unless_named(key, "'init.sessionId' with an id of yours")  # as on REST and MCP
        return agent.chat(principal=principal, tenant=current_tenant()), {}
    if wire.message is not None:
        check_history(summary, service.limits)
    return chat, {}


async def _pauses_shown(
    agent: Agent, state: SessionState, version: int, wire: genkit.GenkitTurn
) -> dict[str, str] | None:
    """For answers sent with a snapshot that is no longer the newest (another surface answered
    one of its pauses, an approver counted, the expiry sweep settled one): each answered call's
    pause that snapshot showed, when it showed one for every call — bound to those, the answers
    answer them if they are still open, or are refused for what happened to them (answered,
    expired, paused again since), never applied to a pause the client was not shown. None
    otherwise (a message, or a call the snapshot showed no pause of: stale it is)."""
    refs = [a.ref for a in wire.respond] + [a.ref for a in wire.restart]
    if wire.message is not None or not refs:
        return None
    shown = await shown_pauses(agent.store, state, version)
    by_call = {state.pauses[p].record.call_ref: p for p in shown if p in state.pauses}
    if any(ref not in by_call for ref in refs):
        return None
    return {ref: by_call[ref] for ref in refs}


async def _may_take(
    service: Service, agent: Agent, session_id: str, principal: str, wire: genkit.GenkitTurn
) -> SessionSummary:
    """A message is the owner's to send (``can_converse``); answers are an approver's too."""
    if wire.message is not None:
        return await service.conversable(agent, session_id, principal)
    return await service.answerable(agent, session_id, principal)


@contextlib.contextmanager
def _snapshot_of(snapshot: str | None) -> Iterator[None]:
    """A snapshot id whose session is not there (or not the caller's: the same 404) names no
    snapshot, said as Genkit's server says it (``SNAPSHOT_NOT_FOUND``), not as a session the
    client never named by itself."""
    try:
        yield
    except (SessionNotFound, NotFound) as exc:
        if snapshot is None or exc.details.get("reason") == SNAPSHOT_NOT_FOUND:
            raise
        raise NotFound(f"no snapshot {snapshot!r}", snapshot_id=snapshot, reason=SNAPSHOT_NOT_FOUND) from None


def _notify_when_done(service: Service, agent: Agent, detached: DetachedTurn) -> None:
    async def wait() -> None:
        try:
            await detached.wait()
        finally:
            service.feed.notify(agent.name, detached.session_id)

    agent.sessions.keep(asyncio.ensure_future(wait()))
