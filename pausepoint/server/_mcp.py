"""An app's agents served as an MCP server, so an MCP client can talk to them and approve.

Four tools, each a thin door onto ``Chat`` (so every promise of a pause holds, and the audit
trail says ``via="mcp"`` and who):

- ``list_agents()``: the agents, what they do, and their tools;
- ``send_message(agent, text, session_id?, ask?)``: one turn; the reply, and the pauses it left
  — or, with ``ask=true``, each pause put to the client as a question (MCP elicitation: on a
  2026-07-28 connection the tool *returns* its questions and the client calls again with the
  answers), so the person at the client approves in its own UI and gets the final reply;
- ``list_pending(agent?)``: the pauses waiting for the caller (an approvals inbox);
- ``answer_pause(agent, session_id, ref, decision, ...)``: approve, deny or respond to one
  pause (``pause_id``: that pause only; ``idempotency_key``: a retry gets the first outcome).

A pause is reported with its ``ref`` (and ``pause_id``), its tool and input, how it reads to a
person (title, summary, risk) and what answering it takes — so the client's model, or the
person at the client (a desktop assistant showing the tool call for confirmation), approves.

Who is calling: over HTTP (``create_app(..., mcp=True)`` mounts this at ``/mcp``), the app's
own ``auth`` reads each request — the same bearer tokens — and its ``policy`` decides what the
caller sees and answers: with tenants, only the caller's tenant's sessions are listed, read
or answered, and a session it starts is of its tenant. Over stdio (``pausepoint serve
--mcp-stdio``) the client is whoever started the process: one principal, given when serving.
The ``ask=true`` rounds' questions, and the state a round leaves for the next, are ``_mcp_ask``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import json
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Literal

import mcp.types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from .._extras import installed_version
from ..content._jsondata import JsonLimits, NotJsonData, json_data, json_text
from ..errors import (
    ApprovalForbidden,
    DecisionNotAllowed,
    Forbidden,
    InvalidAnswer,
    InvalidRequest,
    NotFound,
    PausepointError,
    SessionNotFound,
)
from ..runtime._agent import Agent
from ..runtime._app import Pausepoint
from ..runtime._calls import answer_by_ref
from ..runtime._chat import Chat
from ..session._interrupts import PendingInterrupt, ToolResponse, ToolRestart
from ..session._response import AgentResponse
from ..stores import SessionSummary
from ..tools._display import ApprovalView
from ._auth import current_tenant, inbox_filters
from ._limits import Limits, check_history, check_message_size, parse_json, read_body
from ._mcp_ask import can_ask, carried_state, decision_of, dismissed, questions
from ._mcp_refusals import refusal, refuse_unanswerable, unkeepable_text
from ._params import checked_key
from ._service import visible_to

__all__ = ["mcp_server"]

#: who is calling, from the request (None over stdio): raises ``Unauthenticated`` when nobody
Who = Callable[[Any], Awaitable[str]]

VIA = "mcp"
_TAKES = {"approve": "no output nor reason", "deny": "a reason, not an output", "respond": "an output, not a reason"}


def mcp_server(
    ai: Pausepoint,
    *,
    principal: str | Who,
    policy: Any = None,
    name: str = "pausepoint",
    limits: Limits | None = None,
) -> MCPServer:
    """An MCP server (the SDK's ``MCPServer``) serving every agent of ``ai`` (module docstring).

    ``principal`` is the caller: a fixed name (stdio), or an async function of the HTTP request
    returning it (``create_app`` passes its ``auth``). ``policy`` is an ``AccessPolicy``
    (default: ``OwnerPolicy()``, each caller sees and answers its own sessions). ``limits``: the
    app's (``create_app``'s), held to a message as on REST (stdio: none but the session's own).
    """
    if policy is None:
        from ._auth import OwnerPolicy

        policy = OwnerPolicy()
    doors = _Doors(ai, principal, policy, limits)
    server = _Server(
        name,
        version=installed_version(),
        instructions=(
            "Talk to the agents with send_message. When a reply lists pauses, a tool call waits for a person: "
            "show it to the user and answer it with answer_pause (approve, deny with a reason, or respond with a "
            "value). list_pending shows every pause waiting for you."
        ),
    )
    tools: dict[str, Callable[..., Any]] = {
        "list_agents": doors.list_agents,
        "send_message": doors.send_message,
        "list_pending": doors.list_pending,
        "answer_pause": doors.answer_pause,
    }
    for tool_name, door in tools.items():
        server.add_tool(door, name=tool_name)
        server.arguments[tool_name] = frozenset(inspect.signature(door).parameters) - {"ctx"}
    return server


class _Server(MCPServer):
    """The SDK's server, whose refusal of a tool's arguments (a missing one, a decision none of
    the three) reads as every other refusal: ``invalid_request: <argument>: <why>``, not
    pydantic's report with its links."""

    #: each tool's arguments: one it does not take is refused, not dropped (a misspelled
    #: ``idempotencyKey`` would record a retried message twice, a ``sessionId`` start a new session)
    arguments: dict[str, frozenset[str]]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arguments = {}

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        known = self.arguments.get(name)
        unknown = sorted(set(arguments or {}) - known) if known is not None else []
        if unknown:
            takes = ", ".join(sorted(known or ()))
            raise ToolError(
                f"Error executing tool {name}: invalid_request: {name} takes no argument {unknown[0][:80]!r} "
                f"(it takes {takes})"
            )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                for e in exc.__cause__.errors(include_url=False)
            )
            raise ToolError(f"Error executing tool {name}: invalid_request: {problems}") from exc.__cause__


class _Doors:
    def __init__(self, ai: Pausepoint, principal: str | Who, policy: Any, limits: Limits | None) -> None:
        self.ai = ai
        self.principal = principal
        self.policy = policy
        self.limits = limits

    # -- the tools --------------------------------------------------------------------------------

    async def list_agents(self, ctx: Context) -> list[dict[str, Any]]:
        """The agents you can talk to: their names, what they do, and the tools they use."""
        await self._who(ctx)
        return [
            {"name": a.name, "description": a.description, "tools": sorted(a.tools)} for a in self.ai.agents.values()
        ]

    async def send_message(
        self,
        agent: str,
        text: str,
        ctx: Context,
        session_id: str | None = None,
        ask: bool = False,
        idempotency_key: str | None = None,
    ) -> dict[str, Any] | types.InputRequiredResult:
        """Send a message to an agent and get its reply. Without session_id a new conversation
        starts; the reply's session_id continues it. If the reply lists pauses, tool calls wait
        for a person: answer each with answer_pause — or pass ask=true to be asked about them
        here (approve or deny each, or give the answer asked for) and get the final reply.
        With session_id, repeat idempotency_key to retry safely: the message is sent once."""
        who = await self._who(ctx)
        found = self._agent(agent)
        async with _errors():
            checked_key(idempotency_key, "idempotency_key")  # as REST's header: 1 to 200 characters
            if idempotency_key is not None and session_id is None:
                raise InvalidRequest(
                    "idempotency_key needs a session_id (a new id of yours starts the session): "
                    "a retry without one would start another session"
                )
            if self.limits is not None:
                check_message_size(text, self.limits)
            carried = carried_state(ctx.request_state, found.name)
            put_aside = dismissed(carried, ctx.input_responses or {})  # listed, not asked again
            if carried is not None:  # a later round: the client answered what we asked
                session_id = str(carried["session_id"])
                answered = await self._answered(found, who, carried, ctx.input_responses or {})
                if not isinstance(answered, AgentResponse):
                    return answered  # asked again, or nothing answered
                res = answered
            elif session_id is None:
                chat = found.chat(principal=who, tenant=current_tenant())  # a session of the caller's tenant
                session_id = chat.session_id
                res = await chat.send(text, principal=who, via=VIA)
            else:
                summary = await self._to_message(found, session_id, who)
                if self.limits is not None:  # as REST and the Genkit wire (found by a probe: unchecked here)
                    check_history(summary, self.limits)
                chat = Chat(found, session_id, who, new=summary is None, tenant=current_tenant())
                res = await chat.send(text, idempotency_key=idempotency_key, principal=who, via=VIA)
        if ask and res.interrupts and can_ask(ctx):
            asking = questions(found, session_id, who, [p for p in res.interrupts if p.pause_id not in put_aside])
            if asking is not None:
                return asking
        return _turn(found, session_id, res, current_tenant())

    async def _answered(
        self, agent: Agent, who: str, carried: dict[str, Any], responses: dict[str, Any]
    ) -> AgentResponse | dict[str, Any] | types.InputRequiredResult:
        """A later round of ``send_message(ask=true)``: the client's answers, applied in one
        resume; the turn that follows (whose new pauses are asked about in turn). An answer the
        pause does not accept answers nothing: the questions are put again, saying why."""
        session_id = str(carried["session_id"])
        if carried.get("principal") != who:  # the state was minted for someone else's round
            raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
        summary = await self._visible(agent, session_id, who)
        if not self.policy.can_answer(who, summary):
            raise Forbidden(f"{who!r} may not answer pauses of session {session_id!r}", session_id=session_id)
        chat = agent.chat(session_id, principal=who)
        try:
            res = await self._client_answers(agent, chat, who, carried, responses)
        except (InvalidAnswer, ApprovalForbidden, DecisionNotAllowed) as exc:  # not an answer this pause takes
            refs = {asked["ref"] for asked in carried["pauses"].values()}
            again = [p for p in await chat.interrupts() if p.ref in refs]
            asking = questions(agent, session_id, who, again, refused=exc.message)
            if asking is None:
                raise
            return asking
        if res is None:  # the person dismissed every question: the pauses stay open, listed
            return _turn(agent, session_id, await _last(chat), current_tenant())  # listed, not asked again
        return res

    async def _client_answers(
        self, agent: Agent, chat: Chat, who: str, carried: dict[str, Any], responses: dict[str, Any]
    ) -> AgentResponse | None:
        """Answer the pauses we asked the client about, as it answered them (one resume; a
        retried round carries the same state and answers, so it gets the first outcome; other
        answers to a pause already answered are refused). None when every question was
        dismissed (MCP cancel) or left unanswered: nothing is answered."""
        live = {p.ref: p for p in await chat.interrupts()}
        respond: list[ToolResponse] = []
        restart: list[ToolRestart] = []
        for key, asked in carried["pauses"].items():
            answer = responses.get(key)
            if not isinstance(answer, types.ElicitResult) or answer.action == "cancel":
                continue  # not answered here: the pause stays open
            pause = live.get(asked["ref"])
            if pause is None or pause.pause_id != asked["pause_id"]:
                # answered (or replaced) since it was asked: resume() says so, or a retry of this
                # very round gets its first outcome by the idempotency key
                pause = PendingInterrupt(
                    name=asked["tool"], ref=asked["ref"], input=None, metadata=None, paused_at=agent.clock(),
                    pause_id=asked["pause_id"],
                )  # fmt: skip
            content = dict(answer.content or {})
            if answer.action == "decline":
                respond.append(pause.deny("declined at the MCP client"))
            elif asked["kind"] == "respond":
                respond.append(pause.respond(content))  # checked against the question by resume()
            elif (decided := decision_of(content, asked))[0] == "deny":
                respond.append(pause.deny(decided[1] or "denied at the MCP client"))
            else:
                given = agent.approval(pause)
                if isinstance(given, ToolResponse):
                    respond.append(given)
                else:
                    restart.append(given)
        if not respond and not restart:
            return None
        answers = {k: v.model_dump(mode="json") for k, v in sorted(responses.items()) if k in carried["pauses"]}
        digest = hashlib.sha256(json.dumps([carried, answers], sort_keys=True).encode()).hexdigest()[:32]
        return await chat.resume(
            respond=respond, restart=restart, principal=who, via=VIA, idempotency_key=f"mcp-ask-{digest}"
        )

    async def list_pending(self, ctx: Context, agent: str | None = None) -> list[dict[str, Any]]:
        """The pauses waiting for you (an approvals inbox), newest sessions first."""
        who = await self._who(ctx)
        agents = [self._agent(agent)] if agent is not None else list(self.ai.agents.values())
        found = []
        for each in agents:
            owner, tenant = inbox_filters(self.policy, who)  # the caller's tenant's, in the store
            async with _errors():
                for summary in await each.list_sessions(owner=owner, tenant=tenant, has_pending=True):
                    if not self.policy.can_view(who, summary):
                        continue
                    pauses = await each.chat(summary.session_id).interrupts()
                    found.append(
                        {
                            "agent": each.name,
                            "session_id": summary.session_id,
                            "can_answer": bool(self.policy.can_answer(who, summary)),
                            "pauses": [_pause(each, p, summary.tenant) for p in pauses],
                        }
                    )
        return found

    async def answer_pause(
        self,
        agent: str,
        session_id: str,
        ref: str,
        decision: Literal["approve", "deny", "respond"],
        ctx: Context,
        output: Any = None,
        reason: str = "",
        pause_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Answer one pause: "approve" lets the tool call run as shown, "deny" refuses it (the
        agent is told the reason), "respond" gives its result (output) without running it.
        Answering the same pause twice is refused; repeat idempotency_key to retry safely."""
        who = await self._who(ctx)
        found = self._agent(agent)
        async with _errors():
            summary = await self._visible(found, session_id, who)
            if not self.policy.can_answer(who, summary):
                raise Forbidden(f"{who!r} may not answer pauses of session {session_id!r}", session_id=session_id)
            if (output is not None and decision != "respond") or (reason and decision != "deny"):  # as REST
                raise InvalidRequest(f"{decision!r} takes {_TAKES.get(decision, 'neither')}: no more is recorded")
            _keepable(output, reason, found.json_limits)  # named by the argument, as a lone surrogate is
            chat = found.chat(session_id, principal=who)
            key = checked_key(idempotency_key, "idempotency_key")  # as REST's header: 1 to 200 characters
            options: dict[str, Any] = {"principal": who, "via": VIA, "idempotency_key": key}
            # the pause is looked up by its ref under the session's lock (the core refuses one
            # that is answered, stale or unknown), never from a read made here first
            if decision == "approve":
                res = await chat.approve(ref, pause_id=pause_id, **options)
            elif decision == "deny":
                deny = partial(_answer, ref, pause_id, decision="deny", reason=reason)
                res = await answer_by_ref(chat.calls, ref, deny, streamed=False, **options)
            elif decision == "respond":
                respond = partial(_answer, ref, pause_id, output=output)
                res = await answer_by_ref(chat.calls, ref, respond, streamed=False, **options)
            else:
                raise ToolError(f"decision must be 'approve', 'deny' or 'respond', not {decision!r}")
            return _turn(found, session_id, res, current_tenant())

    # -- access -----------------------------------------------------------------------------------

    async def _who(self, ctx: Context) -> str:
        if isinstance(self.principal, str):
            return self.principal
        async with _errors():
            return await self.principal(ctx.request_context.request)

    def _agent(self, name: str) -> Agent:
        found = self.ai.agents.get(name)
        if found is None:
            raise ToolError(f"not_found: no agent named {name!r} (list_agents names them)")
        return found

    async def _visible(self, agent: Agent, session_id: str, who: str) -> SessionSummary:
        return await visible_to(self.policy, agent, session_id, who)

    async def _to_message(self, agent: Agent, session_id: str, who: str) -> SessionSummary | None:
        if await agent.store.get_summary(session_id) is None:
            return None
        summary = await self._visible(agent, session_id, who)
        if not self.policy.can_converse(who, summary):
            raise Forbidden(f"{who!r} may not send to session {session_id!r}", session_id=session_id)
        return summary


def _keepable(output: Any, reason: str, limits: JsonLimits) -> None:
    """``InvalidAnswer`` naming the argument (``$.output...``, ``$.reason``) that holds what no
    session keeps — not the list of answers the core makes of it, which the caller never wrote."""
    try:
        json_data(output, limits, path="$.output")
        json_text(reason, limits, path="$.reason")
    except NotJsonData as exc:
        raise InvalidAnswer(f"the answer cannot be recorded: {exc}", **exc.details()) from None


@contextlib.asynccontextmanager
async def _errors() -> Any:
    """pausepoint's typed errors as tool errors the client reads: ``<code>: <message>``."""
    try:
        yield
    except PausepointError as exc:
        raise ToolError(f"{exc.code}: {exc.message}") from exc
    except (TypeError, ValueError) as exc:
        raise ToolError(f"invalid_request: {exc}") from exc


async def _last(chat: Chat) -> AgentResponse:
    last = await chat.last_response()
    if last is None:
        raise NotFound(f"no turn in session {chat.session_id!r}")
    return last


def _answer(
    ref: str, pause_id: str | None, name: str, *, output: Any = None, decision: str | None = None, reason: str = ""
) -> ToolResponse:
    """A response (or, with ``decision="deny"``, a denial) to the call ``ref`` of the tool
    ``name``, which the core looks up under the session's lock (``answer_by_ref``)."""
    if decision == "deny":
        return ToolResponse(ref, name, None, decision="deny", reason=reason, pause_id=pause_id)
    return ToolResponse(ref, name, output, pause_id=pause_id)


def _pause(agent: Agent, pause: PendingInterrupt, tenant: str | None) -> dict[str, Any]:
    """``pause`` of a session of ``tenant`` (whose members its approval names as who may decide it)."""
    view = agent.view(pause, tenant=tenant)
    tool = agent.tools.get(pause.name)
    asked = (pause.metadata or {}).get("elicitation")
    can_approve = not isinstance(asked, dict)
    try:
        agent.approval(pause)
    except ValueError:
        can_approve = False
    schema = asked.get("requested_schema") if isinstance(asked, dict) else tool.output_schema if tool else None
    answers = ["approve", "deny", "respond"] if can_approve else ["deny", "respond"]
    if pause.approval is not None:  # what the approval policy lets this pause take
        answers = [a for a in answers if a in pause.approval.decisions]
    return {
        "ref": pause.ref,
        "pause_id": pause.pause_id,
        "tool": pause.name,
        "input": pause.input,
        "metadata": _shown(pause.metadata),
        "title": view.title,
        "summary": view.summary,
        "risk": view.risk,
        "expires_at": to_jsonable_python(pause.expires_at),  # as REST writes every time
        "answers": answers,
        "output_schema": schema,
        "approval": None if view.approval is None else _approval(view.approval),
    }


def _shown(metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    """A pause's metadata as the client's user reads it: not the sealed state of an MCP server's
    question (``mcp_round``), which only the call carries back to that server."""
    if not metadata or "mcp_round" not in metadata:
        return metadata
    return {key: value for key, value in metadata.items() if key != "mcp_round"}


def _approval(approval: ApprovalView) -> dict[str, Any]:
    """Where a pause's approval stands (quorum, roles), as the REST API and the console say."""
    return {
        "required": approval.required,
        "approved_by": approval.approved_by,
        "progress": approval.progress,
        "waiting_for": approval.waiting_for,
        "may_approve": approval.may_approve,
    }


def _turn(agent: Agent, session_id: str, res: AgentResponse, tenant: str | None) -> dict[str, Any]:
    """A turn's reply in a session of ``tenant`` (the caller's: one converses and answers in one's tenant)."""
    return {
        "agent": agent.name,
        "session_id": session_id,
        "finish_reason": res.finish_reason.value,
        "text": res.text,
        "pauses": [_pause(agent, p, tenant) for p in res.interrupts],
        "error": res.error,
    }


class McpEndpoint:
    """The MCP server as an ASGI app for ``create_app(..., mcp=True)`` (at ``/mcp``).

    Every request is authenticated first, by the app's own ``auth`` (401 with the app's JSON
    error body otherwise); the tools read the caller again from the request. Stateless
    streamable HTTP with JSON responses: any server process can take any request. The SDK's
    session manager is started by the first request (a mounted app gets no lifespan) and
    stopped by ``close()``.
    """

    def __init__(self, ai: Pausepoint, service: Any) -> None:
        self.service = service
        self.server = mcp_server(ai, principal=service.principal, policy=service.policy, limits=service.limits)
        self._running: asyncio.Task[None] | None = None
        self._started: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.requests import Request

        request = Request(scope, receive)
        try:
            await self.service.principal(request)
            if request.method != "POST":  # stateless: no stream to open (GET), no session to end (DELETE)
                refused = refusal(
                    InvalidRequest(
                        "the MCP endpoint streams no server messages and keeps no sessions to end: POST each request"
                    )
                )
                refused.status_code, refused.headers["Allow"] = 405, "POST"
                await refused(scope, receive, send)
                return
            kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
            if request.method == "POST" and kind != "application/json":  # the SDK's refusal is plain text
                raise InvalidRequest(f"an MCP request is JSON (Content-Type: application/json), not {kind or 'none'}")
            body = await read_body(request, self.service.limits)  # the app's limit, as on every route
            # read as REST reads it: a name given twice is refused, not the last one taken
            if isinstance(message := parse_json(body), list):
                raise InvalidRequest("an MCP request is one JSON-RPC message, not a batch (a list of them)")
            refuse_unanswerable(message)
            # the SDK's parser says "unexpected end of hex escape"
            if (unkept := unkeepable_text(body, message)) is not None:
                await unkept(scope, receive, send)
                return
        except PausepointError as exc:
            await refusal(exc)(scope, receive, send)
            return
        await self._ensure_running()
        await self.server.session_manager.handle_request(scope, _replayed(body, receive), send)

    async def _ensure_running(self) -> None:
        if self._running is None or self._running.done():
            from mcp.server.transport_security import TransportSecuritySettings

            # A new session manager each time (one runs once). The app authenticates every request
            # with a token a browser page cannot attach, so the SDK's DNS-rebinding guard (localhost
            # only) is not needed, and would refuse every real host name.
            self.server.streamable_http_app(
                stateless_http=True,
                json_response=True,
                transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            )
            manager = self.server.session_manager
            started = self._started = asyncio.get_running_loop().create_future()
            stop = self._stop = asyncio.Event()

            async def run() -> None:
                async with manager.run():
                    started.set_result(None)
                    await stop.wait()

            self._running = asyncio.ensure_future(run())
        assert self._started is not None
        await asyncio.shield(self._started)

    async def close(self) -> None:
        self._stop.set()
        if self._running is not None:
            with contextlib.suppress(Exception):
                await self._running


def _replayed(body: bytes, receive: Any) -> Any:
    """An ASGI ``receive`` that gives ``body`` (read already), then what ``receive`` gives."""
    given = False

    async def replay() -> Any:
        nonlocal given
        if given:
            return await receive()  # a disconnect, say
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
