"""``McpConnection``: one MCP server, reached over stdio or streamable HTTP.

The SDK's ``Client`` is an async context manager whose task group must be entered and left by
one task, while tool calls come from many (every turn is its own task). So each connection is
owned by a background task that enters the client and waits; calls from any task of the same
event loop go through it. It is opened on first use and opened again after it broke: a server
that died is started again (stdio) or reconnected (HTTP) by the next call, never retried by the
call that saw it die — that call's outcome is unknown and the model is told so.

SDK errors are translated here, in one place (``_failure``), to ``McpUnavailable`` /
``McpTimeout`` / ``McpError`` (``pausepoint.errors``), chained with ``from exc``. An answer that
cannot be read — a reply that breaks the protocol, a stdio line that is not JSON-RPC, an HTTP
page or status where a JSON-RPC answer belongs — is one too, and fails its request at once:
sent and not understood, a tool call "may or may not have taken effect", as when the server
dies mid-call (an HTTP 4xx says the request was refused, so it did not).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import json
import sys
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio
import httpx2
import mcp.types as types
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CONNECTION_CLOSED, PARSE_ERROR, REQUEST_TIMEOUT
from pydantic import ValidationError

from ..errors import DefinitionError, McpError, McpTimeout, McpUnavailable

__all__ = ["McpConnection"]

Mode = Literal["auto", "legacy", "2026-07-28"]
T = TypeVar("T")

#: what a tool call that was sent but not answered readably may have done
_UNSURE = "; it may or may not have taken effect"


@dataclass(slots=True)
class _Live:
    """One open connection, owned by ``task`` on ``loop``. ``unread``: one future per request
    in flight, given a stdio line that could not be read (it may have been that answer)."""

    loop: asyncio.AbstractEventLoop
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    client: Client | None = None
    task: asyncio.Task[None] | None = None
    broken: bool = False
    unread: set[asyncio.Future[Exception]] = field(default_factory=set)


@dataclass(slots=True)
class _HttpReply:
    """What the HTTP layer saw of a request's answer: its status, type and body (an event
    stream's body is left to the SDK, which reads it as it comes). The SDK turns an answer that
    is no JSON-RPC message into an error of its own, which does not say what came back; this
    does (``unread``)."""

    status: int = 0
    content_type: str = ""
    body: bytes | None = None

    @property
    def streamed(self) -> bool:
        return 200 <= self.status < 300 and self.content_type == "text/event-stream"

    def unread(self, exc: MCPError) -> str | None:
        """What came back, when it was not a JSON-RPC answer and ``exc`` is the SDK's stand-in
        for it (None: it was one, or nothing is known)."""
        if self.streamed and exc.code == PARSE_ERROR:  # the SDK could not read an event's message
            return "an event stream whose message cannot be read"
        if self.body is None:
            return None
        if self.content_type == "application/json" and self.status != 202:
            try:
                message = types.jsonrpc_message_adapter.validate_json(self.body, by_name=False)
            except ValidationError:
                pass
            else:
                if 200 <= self.status < 300 or isinstance(message, types.JSONRPCError):
                    return None
        text = self.body[:1000].decode("utf-8", "replace").strip()
        return f"HTTP {self.status}" + (f" ({self.content_type or 'no type'}: {_excerpt(text)})" if text else "")


#: the request being sent from this context: the HTTP client's response hook notes its answer
#: there (the SDK runs each POST in a copy of the sender's context)
_REPLY: contextvars.ContextVar[_HttpReply | None] = contextvars.ContextVar("pausepoint_mcp_reply", default=None)


class McpConnection:
    """A connection to one MCP server. Build one with ``McpConnection.stdio`` or ``.http``.

    Nothing is started or reached until it is used (``Pausepoint.mcp_tools`` lists its tools;
    each tool call uses it). ``connect_timeout`` bounds starting or reaching the server and its
    handshake; ``call_timeout`` bounds each request (None: no bound). ``await conn.aclose()``
    (or ``async with conn``) closes it — a stdio server is stopped; using it again reopens it.
    """

    def __init__(
        self,
        target: StdioServerParameters | str,
        *,
        name: str,
        headers: Mapping[str, str] | None = None,
        connect_timeout: float = 30.0,
        call_timeout: float | None = 300.0,
        mode: Mode = "auto",
        errlog: Any = None,
    ) -> None:
        if connect_timeout <= 0 or (call_timeout is not None and call_timeout <= 0):
            raise DefinitionError(f"MCP server {name!r}: timeouts must be positive")
        self.target = target
        #: names the server in errors and pauses: given, or the server's own name once connected
        self.name = name or (Path(target.command).name if isinstance(target, StdioServerParameters) else target)
        self._named = bool(name)
        self.headers = dict(headers or {})
        self.connect_timeout = connect_timeout
        self.call_timeout = call_timeout
        self.mode = mode
        self._errlog = errlog
        self._live: _Live | None = None
        #: called when the server says its tool list changed (``notifications/tools/list_changed``)
        self.on_tools_changed: list[Callable[[], None]] = []
        self._opening: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        name: str | None = None,
        connect_timeout: float = 30.0,
        call_timeout: float | None = 300.0,
        mode: Mode = "auto",
        errlog: Any = None,
    ) -> McpConnection:
        """A server run as a subprocess, spoken to over its stdin and stdout.

        The process gets the SDK's minimal environment (``PATH``, ``HOME``, ...) plus ``env``.
        Its stderr goes to ``errlog`` (default: this process's stderr). ``name`` names the server
        in errors and pauses (default: the name the server gives itself).
        """
        params = StdioServerParameters(command=command, args=list(args), env=dict(env) if env else None, cwd=cwd)
        return cls(
            params,
            name=name or "",
            connect_timeout=connect_timeout,
            call_timeout=call_timeout,
            mode=mode,
            errlog=errlog,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        connect_timeout: float = 30.0,
        call_timeout: float | None = 300.0,
        mode: Mode = "auto",
    ) -> McpConnection:
        """A server reached over streamable HTTP at ``url`` (``headers``: e.g. ``Authorization``)."""
        if not url.startswith(("http://", "https://")):
            raise DefinitionError(f"an MCP server URL must start with http:// or https://, not {url!r}")
        return cls(
            url,
            name=name or "",
            headers=headers,
            connect_timeout=connect_timeout,
            call_timeout=call_timeout,
            mode=mode,
        )

    def __repr__(self) -> str:
        return f"<McpConnection {self.name}>"

    async def __aenter__(self) -> McpConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- requests -------------------------------------------------------------------------------

    async def list_tools(self) -> list[types.Tool]:
        """Every tool the server offers (all pages). Raises an ``McpError``."""
        found: list[types.Tool] = []
        cursor: str | None = None
        while True:

            async def listing(client: Client, at: str | None = cursor) -> types.ListToolsResult:
                return await client.list_tools(cursor=at, cache_mode="bypass")

            page = await self._send("listing tools", listing)
            found.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return found

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        input_responses: types.InputResponses | None = None,
        request_state: str | None = None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """One ``tools/call`` round: the result, or the server's questions (2026-07-28 servers).

        Raises ``McpUnavailable`` when the server cannot be reached or its connection closes
        during the call, ``McpTimeout``, or ``McpError`` for an error response or an answer that
        cannot be read. Every error of a call that was sent and not answered readably says it
        may or may not have taken effect (``details["outcome"] == "unknown"``).
        """

        async def call(client: Client) -> types.CallToolResult | types.InputRequiredResult:
            return await client.session.call_tool(
                name,
                arguments,
                read_timeout_seconds=self.call_timeout,
                input_responses=input_responses,
                request_state=request_state,
                allow_input_required=True,
            )

        return await self._send(f"calling {name!r}", call, effects=True)

    async def aclose(self) -> None:
        """Close the connection (stop a stdio server). Safe to call more than once."""
        live, self._live = self._live, None
        if live is None or live.task is None:
            return
        if live.loop is not asyncio.get_running_loop():
            return  # its loop is gone or elsewhere: the owner task ends with that loop
        live.stop.set()
        with contextlib.suppress(Exception):
            await live.task

    # -- plumbing -------------------------------------------------------------------------------

    async def _send(self, doing: str, request: Callable[[Client], Awaitable[T]], *, effects: bool = False) -> T:
        """Run one SDK request on the open connection; every way it fails, as an ``McpError``.

        ``effects``: the request may change something at the server (a tool call), so a failure
        after it was sent says that it may or may not have taken effect. The request runs in a
        task of its own, so that a stdio line that cannot be read fails it at once (it may have
        been its answer) instead of after ``call_timeout``.

        A request without effects (listing the tools, before a call) that finds a connection it
        did not open closed — a server that died or went away while idle — is sent once more,
        on a new one: so the call after it goes to the server started again.
        """
        reused = self._live is not None and not self._live.broken
        try:
            return await self._send_once(doing, request, effects)
        except McpUnavailable:
            if effects or not reused:
                raise
            return await self._send_once(doing, request, effects)

    async def _send_once(self, doing: str, request: Callable[[Client], Awaitable[T]], effects: bool) -> T:
        live = await self._open()
        assert live.client is not None
        client = live.client
        reply = _HttpReply()
        unread: asyncio.Future[Exception] = live.loop.create_future()
        token = _REPLY.set(reply)
        try:
            sent = asyncio.ensure_future(request(client))  # its context: a copy of this one, with reply
        finally:
            _REPLY.reset(token)
        live.unread.add(unread)
        either: list[asyncio.Future[Any]] = [sent, unread]
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if not sent.done():
                raise self._failure(live, doing, effects, unread.result(), reply, line=True) from unread.result()
            try:
                return sent.result()
            except Exception as exc:
                failure = self._failure(live, doing, effects, exc, reply)
                if failure is exc:
                    raise
                raise failure from exc
        finally:
            live.unread.discard(unread)
            if not sent.done():  # given up on (or this task was cancelled): the SDK abandons it
                sent.cancel()
                await asyncio.wait([sent])
                if not sent.cancelled():
                    sent.exception()  # retrieved: it is superseded by the failure raised here

    def _failure(
        self, live: _Live, doing: str, effects: bool, exc: Exception, reply: _HttpReply, *, line: bool = False
    ) -> Exception:
        """The one translation of a failed request (see the module docstring), to be chained
        with ``from exc``: ``line``, ``exc`` is a stdio line that could not be read, written
        while the request waited; ``reply``, what the HTTP layer saw of its answer. Anything
        that is no failure of the server or its connection (a bug here) is ``exc`` itself."""
        server = self.name
        unsure = _UNSURE if effects else ""
        outcome: dict[str, Any] = {"outcome": "unknown"} if effects else {}
        if line:
            return McpError(
                f"MCP server {server!r} answered {doing} with {_line(exc)}, not an MCP message{unsure}",
                server=server,
                **outcome,
            )
        unread = reply.unread(exc) if isinstance(exc, MCPError) else None
        if unread is not None:  # the SDK's stand-in for an HTTP answer that was no JSON-RPC message
            if 400 <= reply.status < 500:  # HTTP says the request was refused: it did not take effect
                return McpError(
                    f"MCP server {server!r} refused the request while {doing}: {unread}",
                    server=server,
                    http_status=reply.status,
                )
            gone = reply.status in (502, 503, 504)  # a gateway that could not reach it
            if gone:
                self._drop(live)
            return (McpUnavailable if gone else McpError)(
                f"MCP server {server!r} answered {doing} with {unread}, not an MCP answer{unsure}",
                server=server,
                http_status=reply.status,
                **outcome,
            )
        if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
            self._drop(live)
            return McpUnavailable(
                f"MCP server {server!r}: the connection closed while {doing}{unsure}", server=server, **outcome
            )
        if isinstance(exc, MCPError) and exc.code == REQUEST_TIMEOUT:
            return McpTimeout(
                f"MCP server {server!r} did not answer in {self.call_timeout}s while {doing}{unsure}",
                server=server,
                **outcome,
            )
        if isinstance(exc, MCPError):
            return McpError(
                f"MCP server {server!r} answered with an error while {doing}: {exc.message}",
                server=server,
                mcp_code=exc.code,
            )
        if isinstance(exc, ValidationError):  # a JSON-RPC answer whose result is not what MCP says
            return McpError(
                f"MCP server {server!r} answered {doing} with a reply that does not follow the MCP protocol "
                f"({_problems(exc)}){unsure}",
                server=server,
                **outcome,
            )
        if isinstance(exc, RuntimeError):  # a result the SDK refused: not the tool's output schema, say
            return McpError(
                f"MCP server {server!r} answered {doing} with a result that cannot be used ({exc}){unsure}",
                server=server,
                **outcome,
            )
        if isinstance(
            exc, OSError | httpx2.HTTPError | anyio.ClosedResourceError | anyio.BrokenResourceError | anyio.EndOfStream
        ):
            self._drop(live)
            return McpUnavailable(
                f"MCP server {server!r}: the connection failed while {doing} ({type(exc).__name__}: {exc}){unsure}",
                server=server,
                **outcome,
            )
        return exc

    def _drop(self, live: _Live) -> None:
        """Forget a broken connection: the next request opens a new one."""
        live.broken = True
        live.stop.set()
        if self._live is live:
            self._live = None

    async def _open(self) -> _Live:
        loop = asyncio.get_running_loop()
        live = self._live
        if live is not None and live.loop is loop and not live.broken and not live.stop.is_set():
            return live
        lock = self._opening.setdefault(loop, asyncio.Lock())
        async with lock:
            live = self._live
            if live is not None and live.loop is loop and not live.broken and not live.stop.is_set():
                return live
            live = _Live(loop)
            ready: asyncio.Future[None] = loop.create_future()
            live.task = loop.create_task(self._own(live, ready), name=f"mcp:{self.name}")
            try:
                await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout)
            except TimeoutError:
                self._drop(live)
                raise McpTimeout(
                    f"MCP server {self.name!r} did not start or answer within {self.connect_timeout}s",
                    server=self.name,
                ) from None
            except McpError:
                self._drop(live)
                raise
            self._live = live
            return live

    async def _own(self, live: _Live, ready: asyncio.Future[None]) -> None:
        """Enter the SDK client, hand it out, and hold it until asked to stop (or it breaks)."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = Client(
                    await self._transport(stack),
                    mode=self.mode,
                    cache=None,
                    message_handler=functools.partial(self._on_message, live),
                    elicitation_callback=_refuse_push_elicitation,
                )
                await stack.enter_async_context(client)
                live.client = client
                if not self._named and client.server_info is not None and client.server_info.name:
                    self.name, self._named = client.server_info.name, True
                if not ready.done():
                    ready.set_result(None)
                await live.stop.wait()
        except BaseException as exc:  # the transport failed, or the server died
            live.broken = True
            if not ready.done():
                ready.set_exception(self._opening_error(exc))
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise
        finally:
            live.broken = True
            if self._live is live:
                self._live = None

    async def _on_message(self, live: _Live, message: Any) -> None:
        if isinstance(message, Exception):
            # A stdio line that is not a JSON-RPC message may have been the answer to any request
            # in flight: they fail now rather than wait for call_timeout. (Other transport errors:
            # the request that meets them reports them.)
            if isinstance(message, ValueError) and isinstance(self.target, StdioServerParameters):
                for unread in list(live.unread):
                    if not unread.done():
                        unread.set_result(message)
            return
        if isinstance(getattr(message, "root", message), types.ToolListChangedNotification):
            for listener in list(self.on_tools_changed):
                listener()

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        if isinstance(self.target, StdioServerParameters):
            return stdio_client(self.target, errlog=self._errlog or sys.stderr)
        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=self.headers,
                follow_redirects=True,
                timeout=httpx2.Timeout(self.connect_timeout, read=max(self.call_timeout or 300.0, 300.0)),
                event_hooks={"response": [_note_reply]},
            )
        )
        return streamable_http_client(self.target, http_client=http)

    def _opening_error(self, exc: BaseException) -> McpError:
        where = (
            f"{self.target.command} {' '.join(self.target.args)}".strip()
            if isinstance(self.target, StdioServerParameters)
            else self.target
        )
        detail = _root(exc)  # inside the task group's ExceptionGroup, as often as not
        if isinstance(detail, MCPError):  # it answered, with a JSON-RPC error (credentials, say)
            return McpError(f"MCP server {self.name!r} refused the connection: {detail.message}", server=self.name)
        return McpUnavailable(
            f"MCP server {self.name!r} could not be started or reached ({where}): {type(detail).__name__}: {detail}",
            server=self.name,
        )


async def _refuse_push_elicitation(context: Any, params: Any) -> types.ErrorData:
    """A question asked over the handshake era's back-channel, while the request waits: it
    cannot outlive this process, so it is refused (2026-07-28 servers ask by returning the
    question instead, which pauses durably; see ``_elicitation``)."""
    return types.ErrorData(
        code=types.INVALID_REQUEST,
        message="this client answers elicitation only on 2026-07-28 connections, where the question is "
        "returned from the call (InputRequiredResult) and can wait durably for a person",
    )


async def _note_reply(response: httpx2.Response) -> None:
    """The HTTP client's response hook: keeps, for the request being sent (``_REPLY``), the
    answer to a JSON-RPC request, unless it is an event stream (the SDK reads that as it
    comes). Read only if the request fails (``_HttpReply.unread``)."""
    reply = _REPLY.get()
    if reply is None or response.request.method != "POST":
        return
    try:
        sent = json.loads(response.request.content)
    except ValueError:
        return
    if not isinstance(sent, dict) or "id" not in sent or "method" not in sent:
        return  # a notification, or an answer to the server: no answer comes back
    reply.status = response.status_code
    reply.content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    reply.body = None if reply.streamed else await response.aread()


def _problems(exc: ValidationError) -> str:
    """A short account of what is wrong with a reply, for people and models (not pydantic's)."""
    union = exc.title.startswith("union[")
    found: list[str] = []
    for error in exc.errors(include_url=False):
        loc = [str(part) for part in error["loc"]]
        if union:  # the first part names a kind of result the reply could have been: not useful
            loc = loc[1:]
            if not loc:
                continue
        said = f"{'.'.join(loc) or 'the reply'}: {error['msg']}"
        if said not in found:
            found.append(said)
    if not found:
        return exc.errors(include_url=False)[0]["msg"] if exc.error_count() else "not a valid result"
    more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
    return "; ".join(found[:3]) + more


def _line(exc: Exception) -> str:
    """The line a stdio server wrote that was no JSON-RPC message, as people read it."""
    line = None
    if isinstance(exc, ValidationError) and exc.error_count():
        line = exc.errors(include_url=False)[0].get("input")
    return f"the line {_excerpt(line)}" if isinstance(line, str) else "a line"


def _excerpt(text: str, size: int = 120) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= size else text[:size] + "...")


def _root(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (anyio wraps a transport's failure in one)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
