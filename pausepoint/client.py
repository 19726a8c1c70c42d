"""A Python client for a pausepoint server, with the chat API of a local agent.

    async with Client("http://127.0.0.1:8000", token="...") as client:
        chat = client.agent("bankingAgent").chat()
        res = await chat.send("Transfer $500 to savings.")
        res = await chat.resume(respond=[res.interrupts[0].respond({"approved": True})])
        # or, in one call by ref: res = await chat.approve(res.interrupts[0].ref)

Calls return the same objects a local ``Chat`` returns (``AgentResponse``, ``PendingInterrupt``,
``AuditEntry``, the stream's chunks) and raise the same typed errors: arguments are checked before
anything is sent, by the checks a local chat makes (``runtime._arguments``: the same class, words
and details, at the same moment — a streamed verb's when it is called), and an error reply's
``code`` picks the class from ``pausepoint.errors``, its ``details`` kept.

Retries. Reads are retried on connection failures. A send, a resume (or approve) always carries
an idempotency key (``idempotency_key=`` or a fresh one), so it is retried on connection
failures, timeouts, "still in progress" and "shutting down" replies: the server returns the
first outcome instead of sending or answering twice. A stream that a broken connection or a
stopping server cuts after chunks came is completed by that keyed request, not streamed again;
a ``ShuttingDown``, ``ServerUnreachable`` or ``ServerTimeout`` raised by a send, a resume or an
approve names its key (``details["idempotency_key"]``) to send it again with.
A "still in progress" reply (``ResumeInProgress``: the first request's turn runs, in this
server process or another behind the same address) is asked again until that turn ends, for
up to ``timeout`` seconds, whatever ``retries`` says (unless 0).
A new chat names its session when it is made, as a local one does (a key
is the session's), so a send whose retries were spent leaves a chat that can read the session
(``last_response()``) to learn whether the server took it.
A server that cannot be reached (connection refused, a host name that does not resolve, a
connection that broke) raises ``ServerUnreachable`` once the retries are spent, and one that does
not answer within ``timeout`` seconds ``ServerTimeout`` (both from ``pausepoint.errors``, chained
to httpx's error); no httpx error reaches the caller.
Needs ``httpx`` (``pip install 'pausepoint[client]'``); not the server's dependencies.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, Literal, NoReturn, TypeAlias, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from . import errors as core_errors
from ._outgoing import encoded, key_header
from ._remote_stream import StreamSeen, sse_events, sse_lines
from ._rest import ApproveBody, CancelBody, GrantBody, RespondItem, RestartItem, ResumeBody, RevokeBody, SendBody
from .approval._answers import prepare_answers
from .approval._fit import ANSWER_THEM, BY_PAUSE_ID, unknown_call
from .content._messages import Message, Part
from .runtime._arguments import (
    MAX_OFFSET,
    WIDEST,
    checked_approval,
    checked_cancel,
    checked_message,
    checked_page,
    checked_revocation,
)
from .runtime._revoke import no_grant
from .session._grants import Grant, GrantInfo
from .session._ids import check_session_id
from .session._interrupts import AuditEntry, PendingInterrupt, ToolResponse, ToolRestart
from .session._json import AUDIT, GRANTS, INTERRUPTS, MESSAGES, RESPONSE, SUMMARY
from .session._response import AgentResponse
from .stores import SessionSummary
from .turn._streaming import Emit, TurnStream

__all__ = ["Client", "RemoteAgent", "RemoteChat"]

T = TypeVar("T")
B = TypeVar("B", bound=BaseModel)
#: what a request may be sent again after: ``"all"`` (a read, a keyed send or resume: any transport
#: failure or a retryable reply), ``"connect"`` (a cancel: only a connection that never opened)
Retry: TypeAlias = Literal["all", "connect"]

_ERRORS: dict[str, type[core_errors.PausepointError]] = {
    cls.code: cls
    for cls in (getattr(core_errors, name) for name in core_errors.__all__)
    if isinstance(cls, type) and issubclass(cls, core_errors.PausepointError)
}
_RETRY_CODES = {"resume_in_progress", "concurrent_update", "shutting_down"}
_STREAM = {"Accept": "text/event-stream"}


class Client:
    """A connection to a pausepoint server. ``token`` is sent as ``Authorization: Bearer``.

    ``timeout`` is seconds per request (``ServerTimeout`` past it); ``retries`` is how many times
    a failed request may be sent again (see the module docstring). Raises ``UsageError`` for a
    ``base_url`` that is not an http(s) URL.
    """

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
        url = httpx.URL(base_url)
        if url.scheme not in ("http", "https") or not url.host:
            raise core_errors.UsageError(f"base_url must be an http:// or https:// URL, not {base_url!r}")
        if retries < 0:
            raise core_errors.UsageError(f"retries must be 0 or more, not {retries}")
        all_headers = dict(headers or {})
        if token is not None:
            all_headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=all_headers, timeout=timeout, transport=transport
        )
        self.retries = retries
        self.timeout = timeout
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
        self,
        method: str,
        path: str,
        *,
        body: BaseModel | None = None,
        headers: dict[str, str] | None = None,
        params: dict[str, Any] | None = None,
        retry: Retry,
    ) -> Any:
        """One request, retried as ``retry`` allows; the JSON reply. ``params``: its query,
        encoded by httpx."""
        payload = None if body is None else encoded(body)
        sent = headers if payload is None else {**_JSON, **(headers or {})}

        async def attempt() -> Any:
            reply = await self._http.request(method, path, content=payload, headers=sent, params=params)
            if reply.status_code >= 400:
                raise _error_from(reply.status_code, reply.content)
            return reply.json()

        try:
            return await self._retrying(method, path, attempt, retry)
        except (core_errors.ShuttingDown, core_errors.ServerUnreachable) as error:
            _name_key(error, sent)
            raise

    async def _stream(
        self, path: str, body: BaseModel, emit: Emit, *, headers: dict[str, str] | None = None, retry: Retry
    ) -> AgentResponse:
        """A streamed turn: chunks go to ``emit``; returns the final response.

        Retried (as ``retry`` allows) only while no chunk has come; a turn whose stream breaks
        later — its connection, or a server that stopped (``shutting_down``) — is completed by
        asking again with its idempotency key, as ``retry`` allows the same failure before the
        first chunk: the consumer is then given only the chunks the broken stream owed
        (``StreamSeen``). A ``ShuttingDown`` or ``ServerUnreachable`` raised names that key in
        ``details["idempotency_key"]``.
        """
        payload, seen = encoded(body), StreamSeen(emit)
        sent = {**_JSON, **_STREAM, **(headers or {})}

        async def attempt() -> AgentResponse:
            try:
                return await self._streamed(path, payload, sent, seen)
            except (httpx.TransportError, core_errors.PausepointError) as error:
                if not seen.received:
                    raise
                if not _may_retry(error, retry):
                    raise _Final(error) from error  # the caller saw part of the turn: not sent again
            if seen.turn_end is not None:  # only the response event was cut off: the turn_end holds it
                return seen.turn_end.response
            try:  # the turn ran, or was cut short and recorded so: its outcome is one keyed request away
                body_json = await self._call("POST", path, body=body, headers=headers, retry="all")
            except core_errors.PausepointError as error:
                raise _Final(error) from error
            return seen.completed(RESPONSE.validate_python(body_json))

        try:
            return await self._retrying("POST", path, attempt, retry)
        except (core_errors.ShuttingDown, core_errors.ServerUnreachable) as error:
            _name_key(error, headers)
            raise

    async def _streamed(self, path: str, payload: bytes, headers: dict[str, str], seen: StreamSeen) -> AgentResponse:
        """One streamed request: its chunks handed to ``seen``; the turn's response, or the
        error its reply or its stream's ``error`` event names."""
        async with self._http.stream("POST", path, content=payload, headers=headers) as reply:
            if reply.status_code >= 400:
                raise _error_from(reply.status_code, await reply.aread())
            if not reply.headers.get("content-type", "").startswith("text/event-stream"):
                return RESPONSE.validate_python(json.loads(await reply.aread()))
            async for name, data in sse_events(sse_lines(reply.aiter_text())):
                if name == "chunk":
                    seen.chunk(data)
                elif name == "response":
                    return RESPONSE.validate_python(data)
                elif name == "error":
                    raise _error_from(500, json.dumps(data).encode())
            raise httpx.RemoteProtocolError("the event stream ended before the turn's response")

    async def _retrying(self, method: str, path: str, attempt: Callable[[], Awaitable[T]], retry: Retry) -> T:
        """``attempt()``, again after a short wait while its failure is one ``retry`` allows
        retrying (see the module docstring), up to ``retries`` times. The last failure is raised
        as a typed error: the server's own, or ``ServerUnreachable`` / ``ServerTimeout`` for
        transport failures, chained to httpx's."""
        failure: BaseException
        loop, number, waiting_since = asyncio.get_running_loop(), 0, None
        while True:
            try:
                return await attempt()
            except _Final as final:
                failure = final.error
                break
            except (httpx.TransportError, core_errors.PausepointError) as error:
                failure = error
                if not _may_retry(error, retry):
                    break
                if isinstance(error, core_errors.ResumeInProgress) and self.retries:  # its turn runs, here
                    waiting_since = loop.time() if waiting_since is None else waiting_since  # or in another
                    if loop.time() - waiting_since >= self.timeout:  # server process: asked again until
                        break  # it ends, for as long as one request may take
                elif number == self.retries:
                    break
                else:
                    number += 1
            await asyncio.sleep(min(0.05 * 2**number, 1.0) if waiting_since is None else 0.25)
        if isinstance(failure, httpx.TransportError):
            raise _transport_error(failure, method, self._http.base_url.join(path)) from failure
        raise failure


class RemoteAgent:
    """An agent on the server: start or continue chats, list sessions."""

    def __init__(self, client: Client, name: str) -> None:
        self.client = client
        self.name = name

    def chat(self, session_id: str | None = None) -> RemoteChat:
        """A chat on a new session (named now, created by the first ``send``) or on ``session_id``."""
        return RemoteChat(self, session_id)

    async def list_sessions(
        self, *, has_pending: bool | None = None, limit: int = 100, offset: int = 0
    ) -> list[SessionSummary]:
        """The sessions the caller may see, most recently updated first (``has_pending=True``: the
        inbox). Arguments are refused as ``Agent.list_sessions`` refuses them (``InvalidRequest``);
        the server's page is at most its ``Limits.max_page`` (400 past it)."""
        checked_page(limit, offset, has_pending)
        if limit == 0 or offset > MAX_OFFSET:  # a page that holds nothing: empty, as Agent.list_sessions answers
            return []
        query: dict[str, Any] = {"limit": limit, "offset": offset}
        if has_pending is not None:
            query["pending"] = has_pending  # true / false
        path = f"/v1/agents/{quote(self.name, safe='')}/sessions"
        body = await self.client._call("GET", path, params=query, retry="all")
        return [SUMMARY.validate_python(s) for s in body["sessions"]]


_JSON = {"Content-Type": "application/json"}


class RemoteChat:
    """One session on the server, with the calls of a local ``Chat``: their arguments checked as
    a local chat checks them, before anything is sent (a streamed verb's when it is called)."""

    def __init__(self, agent: RemoteAgent, session_id: str | None) -> None:
        self.agent = agent
        # A new chat names its session now, as a local one does (128 random bits in hex: an id
        # the server takes as a new session's, as Genkit's chat(session_id=...)): its id is known
        # before anything is sent, and a first send that fails after the server took it — a
        # timeout, a model that failed after a tool ran — leaves a chat that can still read the
        # session, rather than one that starts another and runs the tool again.
        self.session_id: str = secrets.token_hex(16) if session_id is None else session_id
        # A new chat: until a send made its session, it reads as empty.
        self._fresh = session_id is None

    def __repr__(self) -> str:
        return f"<RemoteChat {self.agent.name} session={self.session_id}>"

    @property
    def _path(self) -> str:
        session_id = self.session_id
        try:
            check_session_id(session_id)
        except core_errors.InvalidSessionId:  # no session has that id, as a local Chat says
            raise core_errors.SessionNotFound(f"no session {session_id!r}", session_id=str(session_id)) from None
        return f"/v1/agents/{quote(self.agent.name, safe='')}/sessions/{session_id}"

    # -- turns ----------------------------------------------------------------------------------

    async def send(
        self, message: str | Message | Sequence[Part], *, idempotency_key: str | None = None
    ) -> AgentResponse:
        """Send a user message (see ``Chat.send``); a new chat's session is created by it.
        Retried safely under one idempotency key (``idempotency_key=`` or a fresh one)."""
        return await self.send_stream(message, idempotency_key=idempotency_key)

    def send_stream(self, message: str | Message | Sequence[Part], *, idempotency_key: str | None = None) -> TurnStream:
        """``send``, streamed: iterate for chunks; ``await stream.response``."""
        checked = checked_message(message, WIDEST, idempotency_key)
        text_or_parts = message if isinstance(message, str) else list(checked.parts)
        body = _body("message", lambda: SendBody(message=text_or_parts))
        headers = key_header(idempotency_key)

        async def run(emit: Emit) -> AgentResponse:
            check_session_id(self.session_id)  # a new session's id: InvalidSessionId, as a local Chat's send
            path = f"{self._path}/messages"
            response = await self.agent.client._stream(path, body, emit, headers=headers, retry="all")
            self.session_id, self._fresh = response.session_id, False
            return response

        return self._start(run)

    async def resume(
        self,
        *,
        respond: Sequence[ToolResponse] | None = (),
        restart: Sequence[ToolRestart] | None = (),
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
        respond: Sequence[ToolResponse] | None = (),
        restart: Sequence[ToolRestart] | None = (),
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> TurnStream:
        """``resume``, streamed."""
        answers, kept = prepare_answers(respond, restart, metadata, WIDEST, idempotency_key=idempotency_key)
        body = _body(
            "resume",
            lambda: ResumeBody(
                respond=[RespondItem.of(a) for a in answers if isinstance(a, ToolResponse)],
                restart=[RestartItem.of(a) for a in answers if isinstance(a, ToolRestart)],
                metadata=kept,
            ),
        )
        headers = key_header(idempotency_key)

        async def run(emit: Emit) -> AgentResponse:
            return await self.agent.client._stream(f"{self._path}/resume", body, emit, headers=headers, retry="all")

        return self._start(run)

    async def approve(
        self,
        ref: str,
        *,
        replace_input: Any = ...,
        grant: Grant | None = None,
        pause_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> AgentResponse:
        """Approve the paused call ``ref`` as the console does, in one call (see ``Chat.approve``:
        ``replace_input`` approves an edited input, ``grant`` later calls too); retried safely
        under one idempotency key."""
        return await self.approve_stream(
            ref,
            replace_input=replace_input,
            grant=grant,
            pause_id=pause_id,
            metadata=metadata,
            idempotency_key=idempotency_key,
        )

    def approve_stream(
        self,
        ref: str,
        *,
        replace_input: Any = ...,
        grant: Grant | None = None,
        pause_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> TurnStream:
        """``approve``, streamed."""
        checked_approval(ref, pause_id, grant, WIDEST)
        _, kept = prepare_answers((), (), metadata, WIDEST, idempotency_key=idempotency_key)
        edit = {} if replace_input is ... else {"replace_input": replace_input}
        body = _body(
            "approval", lambda: ApproveBody(pause_id=pause_id, metadata=kept, grant=GrantBody.of(grant), **edit)
        )
        headers = key_header(idempotency_key)

        async def run(emit: Emit) -> AgentResponse:
            if not _one_segment(ref):
                await self._refused(unknown_call(ref, self.session_id))
            path = f"{self._path}/interrupts/{quote(ref, safe='')}/approve"
            return await self.agent.client._stream(path, body, emit, headers=headers, retry="all")

        return self._start(run)

    async def cancel_pending(self, reason: str) -> AgentResponse:
        """Resolve every paused call as cancelled (see ``Chat.cancel_pending``)."""
        checked_cancel(reason, None, WIDEST)
        body = await self.agent.client._call(
            "POST", f"{self._path}/cancel", body=CancelBody(reason=reason), retry="connect"
        )
        return RESPONSE.validate_python(body)

    # -- reads ----------------------------------------------------------------------------------

    async def interrupts(self) -> list[PendingInterrupt]:
        body = await self._read("/interrupts")
        return INTERRUPTS.validate_python(body["interrupts"]) if body else []

    async def audit_trail(self) -> list[AuditEntry]:
        body = await self._read("/audit")
        return AUDIT.validate_python(body["entries"]) if body else []

    async def grants(self) -> list[GrantInfo]:
        """The grants given in this session (see ``Chat.grants``)."""
        body = await self._read("/grants")
        return GRANTS.validate_python(body["grants"]) if body else []

    async def revoke_grant(self, grant_id: str, *, reason: str = "") -> GrantInfo:
        """Revoke a grant (see ``Chat.revoke_grant``; revoking it again changes nothing, so a
        retry is safe). Raises ``GrantNotFound``."""
        checked_revocation(reason, WIDEST)
        given: object = grant_id
        if not isinstance(given, str) or not _one_segment(given):
            await self._refused(no_grant(given, self.session_id))
        path = f"{self._path}/grants/{quote(grant_id, safe='')}/revoke"
        body = await self.agent.client._call("POST", path, body=RevokeBody(reason=reason), retry="all")
        return GRANTS.validate_python([body["grant"]])[0]

    async def history(self) -> list[Message]:
        body = await self._read("/history")
        return MESSAGES.validate_python(body["messages"]) if body else []

    async def last_response(self) -> AgentResponse | None:
        body = await self._read("")
        last = body.get("last_response")
        return None if last is None else RESPONSE.validate_python(last)

    async def _read(self, what: str) -> dict[str, Any]:
        """``GET`` the session's ``what``; ``{}`` for a new chat whose first send has not made
        its session yet (it reads as empty, as a local chat's does)."""
        try:
            body: dict[str, Any] = await self.agent.client._call("GET", self._path + what, retry="all")
        except core_errors.SessionNotFound:
            if self._fresh:
                return {}
            raise
        return body

    async def _refused(self, error: core_errors.PausepointError) -> NoReturn:
        """Raise ``error``, the refusal of a ref or grant id no request path can carry (no route
        of the server takes it), as a local chat refuses it: once the session is read, so that
        a chat on no session the caller may see gets ``SessionNotFound`` first, as it does there."""
        await self.agent.client._call("GET", self._path + "/interrupts", retry="all")
        raise error

    def _start(self, run: Callable[[Emit], Any]) -> TurnStream:
        return TurnStream(run, self.agent.client._background)


def _one_segment(text: str) -> bool:
    """Whether ``text`` reaches the server as one segment of a request's path, as it is: not
    empty, no ``/`` (the server decodes ``%2F`` before it routes), not ``.`` or ``..`` (httpx
    resolves them away), and text UTF-8 can carry."""
    if not text or "/" in text or text in (".", ".."):
        return False
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _body(what: str, build: Callable[[], B]) -> B:
    """The request body ``build`` makes of arguments checked already, as a local chat checks
    them; one it cannot make even so is ``InvalidRequest`` in a sentence, never pydantic's error."""
    try:
        return build()
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False))
        raise core_errors.InvalidRequest(f"not a {what} the server can take: {problems}") from None


class _Final(Exception):
    """Wraps a failure an attempt must not be retried after (a stream the caller already saw part of)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _name_key(error: core_errors.PausepointError, headers: dict[str, str] | None) -> None:
    """Name in ``error`` (a request the server may or may not have taken: it stopped, or could
    not be reached or heard from) the idempotency key its request was sent with — a fresh one
    the caller did not choose, maybe — as ``details["idempotency_key"]``: sent again with it,
    the message or answer gets what the first request started (its outcome), never a second
    turn. A request sent without a key names none."""
    key = (headers or {}).get("Idempotency-Key")
    if key is not None:
        error.details.setdefault("idempotency_key", key)


def _may_retry(error: BaseException, retry: Retry) -> bool:
    """Whether a request that failed with ``error`` may be sent again under ``retry``."""
    if isinstance(error, httpx.ConnectError | httpx.ConnectTimeout):
        return True  # no connection, so nothing was sent
    if isinstance(error, httpx.UnsupportedProtocol):
        return False
    if isinstance(error, httpx.TransportError):
        return retry == "all"
    return retry == "all" and isinstance(error, core_errors.PausepointError) and error.code in _RETRY_CODES


def _transport_error(error: httpx.TransportError, method: str, url: httpx.URL) -> core_errors.ServerUnreachable:
    """The typed error for httpx's failure to reach the server (or to hear back from it)."""
    where = f"{method} {url}"
    if isinstance(error, httpx.TimeoutException):
        return core_errors.ServerTimeout(
            f"the pausepoint server did not answer in time ({where}): {type(error).__name__}",
            method=method,
            url=str(url),
        )
    reason = str(error) or type(error).__name__
    return core_errors.ServerUnreachable(
        f"could not reach the pausepoint server ({where}): {reason}", method=method, url=str(url)
    )


def _error_from(status: int, content: bytes) -> core_errors.PausepointError:
    """The typed error an error reply names by its ``code``."""
    try:
        error = json.loads(content)["error"]
        code, message, details = str(error["code"]), str(error["message"]), dict(error.get("details") or {})
        details.pop("code", None)  # repeated in details for Genkit's clients, as is Genkit's
        if str(details.get("reason", "")).isupper():  # reason (INVALID_RESUME): an error's own is lower case
            details.pop("reason")
    except (ValueError, KeyError, TypeError):
        kind = core_errors.ServerError if status >= 500 else core_errors.UsageError
        return kind(f"HTTP {status}: {content[:200].decode(errors='replace')}", status=status)
    cls = _ERRORS.get(code) or (core_errors.ServerError if status >= 500 else core_errors.UsageError)
    if cls is core_errors.PendingInterrupts:  # said for REST; this chat's own verbs answer them
        message = message.split(": ", 1)[0] + ": " + ANSWER_THEM["python"]
    elif cls is core_errors.PauseChanged:  # likewise: the pause_id an answer carries here
        message = message.replace(f"({BY_PAUSE_ID['http']})", f"({BY_PAUSE_ID['python']})")
    try:
        return cls(message, **details)
    except TypeError:  # a detail named as a parameter of the class's own: kept all the same
        error = cls(message)
        error.details = details
        return error
