"""``McpConnection``: one MCP server, reached over stdio or streamable HTTP.

The SDK's ``Client`` is an async context manager whose task group must be entered and left by
one task, while tool calls come from many (every turn is its own task). So each connection is
owned by a background task that enters the client and waits; calls from any task of the same
event loop go through it. It is opened on first use and opened again after it broke: a server
that died is started again (stdio) or reconnected (HTTP) by the next call, never retried by the
call that saw it die — that call's outcome is unknown and the model is told so.

Every request is bounded by ``call_timeout`` here (the SDK is given no timeout of its own), and
the transport's read stream is watched (``_Watched``) so that its end is known: what a failure
means is decided in one place, ``_failures``. A stdio line that is not JSON-RPC fails the
requests waiting then, at once (it may have been their answer). Roots requests from the server
are answered with no roots; its questions over the handshake era's back-channel are refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import sys
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import httpx2
import mcp.types as types
from anyio import EndOfStream
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.message import SessionMessage

from ..errors import DefinitionError, McpError, McpTimeout, McpUnavailable
from ._failures import REPLY, HttpReply, excerpt, failure, note_reply, opening_error, timed_out, unreadable_line

__all__ = ["McpConnection"]

Mode = Literal["auto", "legacy", "2026-07-28"]
T = TypeVar("T")

#: more pages than any server's listing of tools has: a listing that goes on is refused
MAX_PAGES = 1000

#: how long a ``subscriptions/listen`` that ended waits before it is opened again, at first
#: and at most (doubling while it cannot be)
_RELISTEN_FIRST = 0.1
_RELISTEN_MOST = 5.0
#: a server's refusal of ``subscriptions/listen``: it is not asked again on this connection
_REFUSED = (types.METHOD_NOT_FOUND, types.INVALID_REQUEST, types.INVALID_PARAMS)


@dataclass(slots=True)
class _Live:
    """One open connection, owned by ``task`` on ``loop``. ``unread``: one future per request
    in flight, given a stdio line that could not be read (it may have been that answer).
    ``ended``: the transport's read stream has ended (the server exited, the transport closed)."""

    loop: asyncio.AbstractEventLoop
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    client: Client | None = None
    task: asyncio.Task[None] | None = None
    broken: bool = False
    ended: bool = False
    unread: set[asyncio.Future[Exception]] = field(default_factory=set)


class _Watched:
    """The transport's read stream, as the SDK reads it, noting in ``live`` when the SDK stops
    reading it — the stream ended, or the SDK's task group was torn down because the transport
    failed: the SDK then fails every request waiting with "Connection closed"
    (``_failures.closed_by_sdk``). A line that cannot be read is an item, not an end."""

    def __init__(self, inner: Any, live: _Live) -> None:
        self._inner = inner
        self._live = live

    @property
    def last_context(self) -> Any:  # the sender's context of the last item (the SDK reads it)
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._inner.receive()
        except BaseException:  # its end, or the SDK's task group torn down (a transport that failed)
            self._live.ended = True
            raise
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _Watched:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        suppressed: bool | None = await self._inner.__aexit__(*exc)
        return suppressed


@contextlib.asynccontextmanager
async def _watching(transport: Any, live: _Live) -> AsyncIterator[Any]:
    async with transport as (read_stream, write_stream):
        yield _Watched(read_stream, live), write_stream


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
        self.target = target
        #: names the server in errors and pauses: given, or the server's own name once connected
        self.name = name or (Path(target.command).name if isinstance(target, StdioServerParameters) else target)
        _check_timeout(self.name, "connect_timeout", connect_timeout)
        if call_timeout is not None:
            _check_timeout(self.name, "call_timeout", call_timeout, " (or None: no bound)")
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
        """Every tool the server offers (all pages). Raises an ``McpError``, also for a listing
        that would never end: a cursor the server gave already, or more than ``MAX_PAGES`` pages."""
        found: list[types.Tool] = []
        cursor: str | None = None
        given: set[str] = set()
        for _ in range(MAX_PAGES):

            async def listing(client: Client, at: str | None = cursor) -> types.ListToolsResult:
                return await client.list_tools(cursor=at, cache_mode="bypass")

            page = await self._send("listing tools", listing)
            found.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return found
            if cursor in given:
                raise McpError(
                    f"MCP server {self.name!r} listed its tools with a cursor it had given already "
                    f"({excerpt(cursor)}): its listing would never end",
                    server=self.name,
                )
            given.add(cursor)
        raise McpError(
            f"MCP server {self.name!r} listed its tools in more than {MAX_PAGES} pages: its listing is refused",
            server=self.name,
        )

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
        reply = HttpReply()
        unread: asyncio.Future[Exception] = live.loop.create_future()
        token = REPLY.set(reply)
        try:
            sent = asyncio.ensure_future(request(client))  # its context: a copy of this one, with reply
        finally:
            REPLY.reset(token)
        live.unread.add(unread)
        either: list[asyncio.Future[Any]] = [sent, unread]
        try:
            await asyncio.wait(either, timeout=self.call_timeout, return_when=asyncio.FIRST_COMPLETED)
            if unread.done() and not sent.done():
                raise unreadable_line(self.name, doing, effects, unread.result()) from unread.result()
            if not sent.done():  # given up on below: the SDK sends the server a cancellation
                raise timed_out(self.name, doing, effects, self.call_timeout)
            try:
                return sent.result()
            except Exception as exc:
                translated = failure(self.name, doing, effects, exc, reply, ended=live.ended)
                if translated is exc:
                    raise
                if isinstance(translated, McpUnavailable):
                    self._drop(live)
                raise translated from exc
        finally:
            live.unread.discard(unread)
            if not sent.done():  # given up on (or this task was cancelled): the SDK abandons it
                sent.cancel()
                await asyncio.wait([sent])
                if not sent.cancelled():
                    sent.exception()  # retrieved: it is superseded by the failure raised here

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
            # The handshake is a request in flight: a stdio line that is no JSON-RPC fails it at once.
            handshake: asyncio.Future[Exception] = loop.create_future()
            live.unread.add(handshake)
            live.task = loop.create_task(self._own(live, ready), name=f"mcp:{self.name}")
            try:
                either: list[asyncio.Future[Any]] = [ready, handshake]
                await asyncio.wait(either, timeout=self.connect_timeout, return_when=asyncio.FIRST_COMPLETED)
            finally:
                live.unread.discard(handshake)
            if not ready.done() or ready.exception() is not None:
                self._drop(live)
                failed = ready.exception() if ready.done() else None
                ready.cancel()  # nobody waits for it any more (when it fails later, nobody is told)
                if failed is not None:
                    raise failed
                if handshake.done():
                    raise unreadable_line(self.name, "the handshake", False, handshake.result())
                raise McpTimeout(
                    f"MCP server {self.name!r} did not start or answer within {self.connect_timeout}s",
                    server=self.name,
                )
            self._live = live
            return live

    async def _own(self, live: _Live, ready: asyncio.Future[None]) -> None:
        """Enter the SDK client, hand it out, and hold it until asked to stop (or it breaks).

        The handshake's requests are sent from here: what the HTTP layer saw of their answers is
        noted in ``reply`` (as ``_send_once`` does for a request), which says what came back when
        the handshake fails."""
        reply = HttpReply()
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = Client(
                    _watching(await self._transport(stack), live),
                    mode=self.mode,
                    cache=None,
                    message_handler=functools.partial(self._on_message, live),
                    elicitation_callback=_refuse_push_elicitation,
                    list_roots_callback=_no_roots,
                )
                token = REPLY.set(reply)
                try:
                    await stack.enter_async_context(client)
                finally:
                    REPLY.reset(token)
                live.client = client
                if not self._named and client.server_info is not None and client.server_info.name:
                    self.name, self._named = client.server_info.name, True
                if not ready.done():
                    ready.set_result(None)
                listening = asyncio.ensure_future(self._listen(live, client))
                try:
                    await live.stop.wait()
                finally:
                    listening.cancel()
                    await asyncio.gather(listening, return_exceptions=True)
        except BaseException as exc:  # the transport failed, or the server died
            live.broken = True
            if not ready.done():
                ready.set_exception(self._opening_error(live, exc, reply))
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise
        finally:
            live.broken = True
            if self._live is live:
                self._live = None

    async def _listen(self, live: _Live, client: Client) -> None:
        """Hear the server say its tools changed on a 2026 connection, which tells only the
        subscribers of ``subscriptions/listen`` (an earlier one sends the notice to every client:
        ``_on_message``). A server that takes no subscription is compared when calls need it
        (``_tools._Catalog``).

        A subscription that ends while the connection is open — an HTTP server restarted
        behind it, whose requests still succeed — is opened again (after a pause that grows
        while it cannot be), and the listing is compared again, both when it ends and when it
        is back: a notice sent meanwhile went to nobody."""
        again, wait = False, _RELISTEN_FIRST
        while not live.ended:
            opened = False
            try:
                async with client.listen(tools_list_changed=True) as changes:
                    opened = True
                    if again:  # back: a notice sent while it was not went to nobody
                        self._tools_changed()
                    async for _ in changes:
                        self._tools_changed()
            except ListenNotSupportedError:
                return  # an earlier protocol: the notice comes to every client
            except MCPError as exc:
                if exc.code in _REFUSED:
                    return  # a server that takes no subscription
            except Exception:  # noqa: S110 - lost, or not answered: opened again below
                pass
            self._tools_changed()  # notices may go unheard until it is back
            again, wait = True, _RELISTEN_FIRST if opened else min(wait * 2, _RELISTEN_MOST)
            await asyncio.sleep(wait)

    def _tools_changed(self) -> None:
        for listener in list(self.on_tools_changed):
            listener()

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
            self._tools_changed()

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        if isinstance(self.target, StdioServerParameters):
            return stdio_client(self.target, errlog=self._errlog or sys.stderr)
        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=self.headers,
                follow_redirects=True,
                timeout=httpx2.Timeout(self.connect_timeout, read=max(self.call_timeout or 300.0, 300.0)),
                event_hooks={"response": [note_reply]},
            )
        )
        return streamable_http_client(self.target, http_client=http)

    def _opening_error(self, live: _Live, exc: BaseException, reply: HttpReply) -> McpError:
        where = (
            f"{self.target.command} {' '.join(self.target.args)}".strip()
            if isinstance(self.target, StdioServerParameters)
            else self.target
        )
        return opening_error(self.name, where, exc, ended=live.ended, reply=reply)


def _check_timeout(server: str, which: str, seconds: object, unbounded: str = "") -> None:
    """A timeout is a positive, finite number of seconds: anything else (0, NaN, infinity, a
    string, a bool) is refused where the connection is defined, not where it is first used."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds <= 0:
        raise DefinitionError(
            f"MCP server {server!r}: {which} must be a positive, finite number of seconds{unbounded}, not {seconds!r}"
        )


async def _no_roots(context: Any) -> types.ListRootsResult:
    """A server's ``roots/list``: no roots, as docs/mcp.md says (the SDK's default is an error)."""
    return types.ListRootsResult(roots=[])


async def _refuse_push_elicitation(context: Any, params: Any) -> types.ErrorData:
    """A question asked over the handshake era's back-channel, while the request waits: it
    cannot outlive this process, so it is refused (2026-07-28 servers ask by returning the
    question instead, which pauses durably; see ``_elicitation``)."""
    return types.ErrorData(
        code=types.INVALID_REQUEST,
        message="this client answers elicitation only on 2026-07-28 connections, where the question is "
        "returned from the call (InputRequiredResult) and can wait durably for a person",
    )
