"""An app's agents served as an MCP server, so an MCP client can talk to them and approve.

Four tools, each a thin door onto ``Chat`` (so every promise of a pause holds, and the audit
trail says ``via="mcp"`` and who):

- ``list_agents()``: the agents, what they do, and their tools;
- ``send_message(agent, text, session_id?)``: one turn; the reply, and the pauses it left;
- ``list_pending(agent?)``: the pauses waiting for the caller (an approvals inbox);
- ``answer_pause(agent, session_id, ref, decision, ...)``: approve, deny or respond to one
  pause (``pause_id``: that pause only; ``idempotency_key``: a retry gets the first outcome).

A pause is reported with its ``ref`` (and ``pause_id``), its tool and input, how it reads to a
person (title, summary, risk) and what answering it takes — so the client's model, or the
person at the client (a desktop assistant showing the tool call for confirmation), approves.

Who is calling: over HTTP (``create_app(..., mcp=True)`` mounts this at ``/mcp``), the app's
own ``auth`` reads each request — the same bearer tokens — and its ``policy`` decides what the
caller sees and answers. Over stdio (``pausepoint serve --mcp-stdio``) the client is whoever
started the process: one principal, given when serving.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from .._agent import Agent
from .._app import Pausepoint
from .._chat import Chat
from .._interrupts import PendingInterrupt, ToolResponse
from .._response import AgentResponse
from ..errors import Forbidden, NotFound, PausepointError, SessionNotFound
from ..stores import SessionSummary

__all__ = ["mcp_server"]

#: who is calling, from the request (None over stdio): raises ``Unauthenticated`` when nobody
Who = Callable[[Any], Awaitable[str]]

VIA = "mcp"


def mcp_server(
    ai: Pausepoint,
    *,
    principal: str | Who,
    policy: Any = None,
    name: str = "pausepoint",
) -> MCPServer:
    """An MCP server (the SDK's ``MCPServer``) serving every agent of ``ai`` (module docstring).

    ``principal`` is the caller: a fixed name (stdio), or an async function of the HTTP request
    returning it (``create_app`` passes its ``auth``). ``policy`` is an ``AccessPolicy``
    (default: ``OwnerPolicy()``, each caller sees and answers its own sessions).
    """
    if policy is None:
        from ..server._auth import OwnerPolicy

        policy = OwnerPolicy()
    doors = _Doors(ai, principal, policy)
    server = MCPServer(
        name,
        instructions=(
            "Talk to the agents with send_message. When a reply lists pauses, a tool call waits for a person: "
            "show it to the user and answer it with answer_pause (approve, deny with a reason, or respond with a "
            "value). list_pending shows every pause waiting for you."
        ),
    )
    server.add_tool(doors.list_agents, name="list_agents")
    server.add_tool(doors.send_message, name="send_message")
    server.add_tool(doors.list_pending, name="list_pending")
    server.add_tool(doors.answer_pause, name="answer_pause")
    return server


class _Doors:
    def __init__(self, ai: Pausepoint, principal: str | Who, policy: Any) -> None:
        self.ai = ai
        self.principal = principal
        self.policy = policy

    # -- the tools --------------------------------------------------------------------------------

    async def list_agents(self, ctx: Context) -> list[dict[str, Any]]:
        """The agents you can talk to: their names, what they do, and the tools they use."""
        await self._who(ctx)
        return [
            {"name": a.name, "description": a.description, "tools": sorted(a.tools)} for a in self.ai.agents.values()
        ]

    async def send_message(self, agent: str, text: str, ctx: Context, session_id: str | None = None) -> dict[str, Any]:
        """Send a message to an agent and get its reply. Without session_id a new conversation
        starts; the reply's session_id continues it. If the reply lists pauses, tool calls wait
        for a person: answer each with answer_pause."""
        who = await self._who(ctx)
        found = self._agent(agent)
        async with _errors():
            if session_id is None:
                chat = found.chat(principal=who)
            else:
                summary = await self._to_message(found, session_id, who)
                chat = Chat(found, session_id, who, new=summary is None)
            return _turn(found, chat.session_id, await chat.send(text, principal=who, via=VIA))

    async def list_pending(self, ctx: Context, agent: str | None = None) -> list[dict[str, Any]]:
        """The pauses waiting for you (an approvals inbox), newest sessions first."""
        who = await self._who(ctx)
        agents = [self._agent(agent)] if agent is not None else list(self.ai.agents.values())
        found = []
        for each in agents:
            owner = self.policy.inbox_owner(who)
            async with _errors():
                for summary in await each.list_sessions(owner=owner, has_pending=True):
                    if not self.policy.can_view(who, summary):
                        continue
                    pauses = await each.chat(summary.session_id).interrupts()
                    found.append(
                        {
                            "agent": each.name,
                            "session_id": summary.session_id,
                            "can_answer": bool(self.policy.can_answer(who, summary)),
                            "pauses": [_pause(each, p) for p in pauses],
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
            chat = found.chat(session_id, principal=who)
            pause = next((p for p in await chat.interrupts() if p.ref == ref), None)
            if pause is None or (pause_id is not None and pause.pause_id != pause_id):
                # no live pause by that ref: let resume() say why (answered, stale, unknown)
                pause = PendingInterrupt(
                    name=_name_of(await chat.history(), ref), ref=ref, input=None, metadata=None,
                    paused_at=found.clock(), pause_id=pause_id or "",
                )  # fmt: skip
            options: dict[str, Any] = {"principal": who, "via": VIA, "idempotency_key": idempotency_key}
            if decision == "approve":
                answer = found.approval(pause)
                if isinstance(answer, ToolResponse):
                    res = await chat.resume(respond=[answer], **options)
                else:
                    res = await chat.resume(restart=[answer], **options)
            elif decision == "deny":
                res = await chat.resume(respond=[pause.deny(reason)], **options)
            elif decision == "respond":
                res = await chat.resume(respond=[pause.respond(output)], **options)
            else:
                raise ToolError(f"decision must be 'approve', 'deny' or 'respond', not {decision!r}")
            return _turn(found, session_id, res)

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
        summary = await agent.store.get_summary(session_id) if isinstance(session_id, str) else None
        if summary is None or summary.agent != agent.name or not self.policy.can_view(who, summary):
            raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
        return summary

    async def _to_message(self, agent: Agent, session_id: str, who: str) -> SessionSummary | None:
        if await agent.store.get_summary(session_id) is None:
            return None
        summary = await self._visible(agent, session_id, who)
        if not self.policy.can_converse(who, summary):
            raise Forbidden(f"{who!r} may not send to session {session_id!r}", session_id=session_id)
        return summary


@contextlib.asynccontextmanager
async def _errors() -> Any:
    """pausepoint's typed errors as tool errors the client reads: ``<code>: <message>``."""
    try:
        yield
    except PausepointError as exc:
        raise ToolError(f"{exc.code}: {exc.message}") from exc
    except (TypeError, ValueError) as exc:
        raise ToolError(f"invalid_request: {exc}") from exc


def _name_of(history: list[Any], ref: str) -> str:
    for message in history:
        for request in message.tool_requests:
            if request.ref == ref:
                return str(request.name)
    raise NotFound(f"no tool call {ref!r} in this session", ref=ref)


def _pause(agent: Agent, pause: PendingInterrupt) -> dict[str, Any]:
    view = agent.view(pause)
    tool = agent.tools.get(pause.name)
    asked = (pause.metadata or {}).get("elicitation")
    can_approve = not isinstance(asked, dict)
    try:
        agent.approval(pause)
    except ValueError:
        can_approve = False
    schema = asked.get("requested_schema") if isinstance(asked, dict) else tool.output_schema if tool else None
    return {
        "ref": pause.ref,
        "pause_id": pause.pause_id,
        "tool": pause.name,
        "input": pause.input,
        "metadata": pause.metadata,
        "title": view.title,
        "summary": view.summary,
        "risk": view.risk,
        "expires_at": pause.expires_at.isoformat() if pause.expires_at else None,
        "answers": ["approve", "deny", "respond"] if can_approve else ["deny", "respond"],
        "output_schema": schema,
    }


def _turn(agent: Agent, session_id: str, res: AgentResponse) -> dict[str, Any]:
    return {
        "agent": agent.name,
        "session_id": session_id,
        "finish_reason": res.finish_reason.value,
        "text": res.text,
        "pauses": [_pause(agent, p) for p in res.interrupts],
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
        self.server = mcp_server(ai, principal=service.principal, policy=service.policy)
        self._running: asyncio.Task[None] | None = None
        self._started: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.requests import Request

        from ..server._errors import error_response

        try:
            await self.service.principal(Request(scope, receive))
        except PausepointError as exc:
            await error_response(exc)(scope, receive, send)
            return
        await self._ensure_running()
        await self.server.session_manager.handle_request(scope, receive, send)

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
