"""A Python client for a pausepoint server, with the chat API of a local agent.

    async with Client("http://127.0.0.1:8000", token="...") as client:
        chat = client.agent("bankingAgent").chat()
        res = await chat.send("Transfer $500 to savings.")
        res = await chat.resume(respond=[res.interrupts[0].respond({"approved": True})])

Calls return the same objects a local ``Chat`` returns (``AgentResponse``, ``PendingInterrupt``,
``AuditEntry``, the stream's chunks) and raise the same typed errors: an error reply's ``code``
picks the class from ``pausepoint.errors``.

Retries. Reads are retried on connection failures. A resume always carries an idempotency key
(``idempotency_key=`` or a fresh one), so it is retried on connection failures, timeouts and
"still in progress" replies: the server returns the first outcome instead of answering twice.
A send has no key, so it is retried only when the connection failed before the request went out.
Needs ``httpx`` (``pip install 'pausepoint[client]'``); not the server's dependencies.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

from . import errors as core_errors
from ._grants import GrantInfo
from ._interrupts import AuditEntry, PendingInterrupt, ToolResponse, ToolRestart
from ._messages import MediaPart, Message, Part, TextPart
from ._response import AgentResponse
from ._rest import AUDIT, CHUNK, GRANTS, INTERRUPTS, MESSAGES, RESPONSE, SUMMARY
from ._streaming import Emit, TurnEndChunk, TurnStream
from .stores import SessionSummary

__all__ = ["Client", "RemoteAgent", "RemoteChat"]

T = TypeVar("T")

_ERRORS: dict[str, type[core_errors.PausepointError]] = {
    cls.code: cls
    for cls in (getattr(core_errors, name) for name in core_errors.__all__)
    if isinstance(cls, type) and issubclass(cls, core_errors.PausepointError)
}
_RETRY_CODES = {"resume_in_progress", "concurrent_update"}
_STREAM = {"Accept": "text/event-stream"}


class Client:
    """A connection to a pausepoint server. ``token`` is sent as ``Authorization: Bearer``."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 120.0,
        retries: int = 4,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        all_headers = dict(headers or {})
        if token is not None:
            all_headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=all_headers, timeout=timeout, transport=transport
        )
        self.retries = retries
        self._background: set[asyncio.Task[Any]] = set()

    def agent(self, name: str) -> RemoteAgent:
        """The server's agent called ``name`` (nothing is checked until the first call)."""
        return RemoteAgent(self, name)

    async def agents(self) -> list[str]:
        body = await self._call("GET", "/v1/agents", retry="all")
        return [str(name) for name in body["agents"]]

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- transport ------------------------------------------------------------------------------

    async def _call(
        self, method: str, path: str, *, json_body: Any = None, headers: dict[str, str] | None = None, retry: str
    ) -> Any:
        """One request, retried as ``retry`` allows (``"all"``, ``"connect"``); the JSON reply."""
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                reply = await self._http.request(method, path, json=json_body, headers=headers)
            except (httpx.ConnectError, httpx.ConnectTimeout):
                if last:
                    raise
            except httpx.TransportError:
                if retry != "all" or last:
                    raise
            else:
                if reply.status_code < 400:
                    return reply.json()
                error = _error_from(reply.status_code, reply.content)
                if retry != "all" or last or error.code not in _RETRY_CODES:
                    raise error
            await asyncio.sleep(min(0.05 * 2**attempt, 1.0))
        raise AssertionError("unreachable")

    async def _stream(
        self, path: str, json_body: Any, emit: Emit, *, headers: dict[str, str] | None = None, retry: str
    ) -> AgentResponse:
        """A streamed turn: chunks go to ``emit``; returns the final response.

        Retried (as ``retry`` allows) only while nothing has been received; a resume whose
        stream breaks later is completed by asking again with its idempotency key.
        """
        received = False
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                async with self._http.stream(
                    "POST", path, json=json_body, headers={**_STREAM, **(headers or {})}
                ) as reply:
                    if reply.status_code >= 400:
                        raise _error_from(reply.status_code, await reply.aread())
                    if not reply.headers.get("content-type", "").startswith("text/event-stream"):
                        return RESPONSE.validate_python(json.loads(await reply.aread()))
                    async for name, data in _sse(reply.aiter_lines()):
                        received = True
                        if name == "chunk":
                            emit(CHUNK.validate_python(data))
                        elif name == "response":
                            return RESPONSE.validate_python(data)
                        elif name == "error":
                            raise _error_from(500, json.dumps(data).encode())
                    raise httpx.RemoteProtocolError("the event stream ended before the turn's response")
            except core_errors.PausepointError as error:
                if retry != "all" or last or error.code not in _RETRY_CODES or received:
                    raise
            except (httpx.ConnectError, httpx.ConnectTimeout):
                if last:
                    raise
            except httpx.TransportError:
                if retry != "all" or last:
                    raise
                if received:  # the turn ran: its outcome is one keyed request away
                    response = RESPONSE.validate_python(
                        await self._call("POST", path, json_body=json_body, headers=headers, retry="all")
                    )
                    emit(TurnEndChunk(response))
                    return response
            await asyncio.sleep(min(0.05 * 2**attempt, 1.0))
        raise AssertionError("unreachable")


class RemoteAgent:
    """An agent on the server: start or continue chats, list sessions."""

    def __init__(self, client: Client, name: str) -> None:
        self.client = client
        self.name = name

    def chat(self, session_id: str | None = None) -> RemoteChat:
        """A chat on a new session (created by the first ``send``) or on ``session_id``."""
        return RemoteChat(self, session_id)

    async def list_sessions(
        self, *, has_pending: bool | None = None, limit: int = 100, offset: int = 0
    ) -> list[SessionSummary]:
        """The sessions the caller may see, most recently updated first (``has_pending=True``: the inbox)."""
        query = f"?limit={limit}&offset={offset}" + ("" if has_pending is None else f"&pending={has_pending}".lower())
        body = await self.client._call("GET", f"/v1/agents/{self.name}/sessions{query}", retry="all")
        return [SUMMARY.validate_python(s) for s in body["sessions"]]


class RemoteChat:
    """One session on the server, with the calls of a local ``Chat``."""

    def __init__(self, agent: RemoteAgent, session_id: str | None) -> None:
        self.agent = agent
        self.session_id = session_id

    def __repr__(self) -> str:
        return f"<RemoteChat {self.agent.name} session={self.session_id}>"

    @property
    def _path(self) -> str:
        if self.session_id is None:
            raise core_errors.SessionNotFound("this chat has no session yet: send a message first")
        return f"/v1/agents/{self.agent.name}/sessions/{self.session_id}"

    # -- turns ----------------------------------------------------------------------------------

    async def send(self, message: str | Message | Sequence[Part]) -> AgentResponse:
        """Send a user message (see ``Chat.send``); a new chat's session is created by it."""
        return await self.send_stream(message)

    def send_stream(self, message: str | Message | Sequence[Part]) -> TurnStream:
        """``send``, streamed: iterate for chunks; ``await stream.response``."""
        body = {"message": _message_json(message)}

        async def run(emit: Emit) -> AgentResponse:
            path = f"/v1/agents/{self.agent.name}/sessions"
            path = path if self.session_id is None else f"{self._path}/messages"
            response = await self.agent.client._stream(path, body, emit, retry="connect")
            self.session_id = response.session_id
            return response

        return self._start(run)

    async def resume(
        self,
        *,
        respond: Sequence[ToolResponse] = (),
        restart: Sequence[ToolRestart] = (),
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> AgentResponse:
        """Answer paused calls (see ``Chat.resume``); retried safely under one idempotency key."""
        return await self.resume_stream(
            respond=respond, restart=restart, metadata=metadata, idempotency_key=idempotency_key
        )

    def resume_stream(
        self,
        *,
        respond: Sequence[ToolResponse] = (),
        restart: Sequence[ToolRestart] = (),
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> TurnStream:
        """``resume``, streamed."""
        body = {
            "respond": [
                {"ref": a.ref, "name": a.name, "output": a.output, "metadata": a.metadata, "decision": a.decision}
                | ({"reason": a.reason} if a.reason is not None else {})
                | ({"pause_id": a.pause_id} if a.pause_id else {})
                | ({"grant": a.grant.scope()} if a.grant is not None else {})
                for a in respond
            ],
            "restart": [
                {"ref": a.ref, "name": a.name, "replace_input": a.replace_input, "resumed_metadata": a.resumed_metadata}
                | ({"pause_id": a.pause_id} if a.pause_id else {})
                | ({"grant": a.grant.scope()} if a.grant is not None else {})
                for a in restart
            ],
            "metadata": metadata,
        }
        headers = {"Idempotency-Key": idempotency_key or secrets.token_urlsafe(16)}

        async def run(emit: Emit) -> AgentResponse:
            return await self.agent.client._stream(f"{self._path}/resume", body, emit, headers=headers, retry="all")

        return self._start(run)

    async def cancel_pending(self, reason: str) -> AgentResponse:
        """Resolve every paused call as cancelled (see ``Chat.cancel_pending``)."""
        body = await self.agent.client._call("POST", f"{self._path}/cancel", json_body={"reason": reason}, retry="no")
        return RESPONSE.validate_python(body)

    # -- reads ----------------------------------------------------------------------------------

    async def interrupts(self) -> list[PendingInterrupt]:
        body = await self.agent.client._call("GET", f"{self._path}/interrupts", retry="all")
        return INTERRUPTS.validate_python(body["interrupts"])

    async def audit_trail(self) -> list[AuditEntry]:
        body = await self.agent.client._call("GET", f"{self._path}/audit", retry="all")
        return AUDIT.validate_python(body["entries"])

    async def grants(self) -> list[GrantInfo]:
        """The grants given in this session (see ``Chat.grants``)."""
        body = await self.agent.client._call("GET", f"{self._path}/grants", retry="all")
        return GRANTS.validate_python(body["grants"])

    async def revoke_grant(self, grant_id: str, *, reason: str = "") -> GrantInfo:
        """Revoke a grant (see ``Chat.revoke_grant``; revoking it again changes nothing, so a
        retry is safe). Raises ``GrantNotFound``."""
        path = f"{self._path}/grants/{quote(grant_id, safe='')}/revoke"
        body = await self.agent.client._call("POST", path, json_body={"reason": reason}, retry="all")
        return GRANTS.validate_python([body["grant"]])[0]

    async def history(self) -> list[Message]:
        body = await self.agent.client._call("GET", f"{self._path}/history", retry="all")
        return MESSAGES.validate_python(body["messages"])

    async def last_response(self) -> AgentResponse | None:
        body = await self.agent.client._call("GET", self._path, retry="all")
        last = body["last_response"]
        return None if last is None else RESPONSE.validate_python(last)

    def _start(self, run: Callable[[Emit], Any]) -> TurnStream:
        return TurnStream(run, self.agent.client._background)


def _message_json(message: str | Message | Sequence[Part]) -> Any:
    if isinstance(message, str):
        return message
    parts = message.parts if isinstance(message, Message) else list(message)
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append({"kind": "text", "text": part.text})
        elif isinstance(part, MediaPart):
            out.append({"kind": "media", "url": part.url, "content_type": part.content_type})
        else:
            raise ValueError(f"a user message holds text and media parts, not {part!r}")
    return out


def _error_from(status: int, content: bytes) -> core_errors.PausepointError:
    """The typed error an error reply names by its ``code``."""
    try:
        error = json.loads(content)["error"]
        code, message, details = str(error["code"]), str(error["message"]), dict(error.get("details") or {})
        for echo in ("code", "reason"):  # repeated in details for Genkit's clients
            details.pop(echo, None)
    except (ValueError, KeyError, TypeError):
        kind = core_errors.ServerError if status >= 500 else core_errors.UsageError
        return kind(f"HTTP {status}: {content[:200].decode(errors='replace')}", status=status)
    cls = _ERRORS.get(code) or (core_errors.ServerError if status >= 500 else core_errors.UsageError)
    try:
        return cls(message, **details)
    except TypeError:
        return cls(message)


async def _sse(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, Any]]:
    """``(event name, JSON data)`` for each event of a server-sent event stream."""
    name, data = "message", list[str]()
    async for line in lines:
        if not line:
            if data:
                yield name, json.loads("\n".join(data))
            name, data = "message", list[str]()
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
