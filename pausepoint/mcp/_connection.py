"""``McpConnection``: one MCP server, reached over stdio or streamable HTTP.

The SDK's ``Client`` is an async context manager whose task group must be entered and left by
one task, while tool calls come from many (every turn is its own task). So each connection is
owned by a background task that enters the client and waits; calls from any task of the same
event loop go through it. It is opened on first use and opened again after it broke: a server
that died is started again (stdio) or reconnected (HTTP) by the next call, never retried by the
call that saw it die — that call's outcome is unknown and the model is told so.

SDK errors are translated here, in one place, to ``McpUnavailable`` / ``McpTimeout`` /
``McpError`` (``pausepoint.errors``), chained with ``from exc``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import weakref
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2
import mcp.types as types
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from ..errors import DefinitionError, McpError, McpTimeout, McpUnavailable

__all__ = ["McpConnection"]

Mode = Literal["auto", "legacy", "2026-07-28"]


@dataclass(slots=True)
class _Live:
    """One open connection, owned by ``task`` on ``loop``."""

    loop: asyncio.AbstractEventLoop
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    client: Client | None = None
    task: asyncio.Task[None] | None = None
    broken: bool = False


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
        async with self._request("listing tools") as client:
            while True:
                page = await client.list_tools(cursor=cursor, cache_mode="bypass")
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
        during the call (the call may or may not have taken effect), ``McpTimeout``, or
        ``McpError`` for an error response.
        """
        async with self._request(f"calling {name!r}") as client:
            return await client.session.call_tool(
                name,
                arguments,
                read_timeout_seconds=self.call_timeout,
                input_responses=input_responses,
                request_state=request_state,
                allow_input_required=True,
            )

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

    @contextlib.asynccontextmanager
    async def _request(self, doing: str) -> AsyncIterator[Client]:
        live = await self._open()
        assert live.client is not None
        try:
            yield live.client
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._drop(live)
                raise McpUnavailable(
                    f"MCP server {self.name!r}: the connection closed while {doing}; "
                    "it may or may not have taken effect",
                    server=self.name,
                ) from exc
            if exc.code == REQUEST_TIMEOUT:
                raise McpTimeout(
                    f"MCP server {self.name!r} did not answer in {self.call_timeout}s while {doing}",
                    server=self.name,
                ) from exc
            raise McpError(
                f"MCP server {self.name!r} answered with an error while {doing}: {exc.message}",
                server=self.name,
                mcp_code=exc.code,
            ) from exc
        except (
            OSError,
            httpx2.HTTPError,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
            anyio.EndOfStream,
        ) as exc:
            self._drop(live)
            raise McpUnavailable(
                f"MCP server {self.name!r}: the connection failed while {doing} ({type(exc).__name__}: {exc}); "
                "it may or may not have taken effect",
                server=self.name,
            ) from exc

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
                    message_handler=self._on_message,
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

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            return  # a transport error: the request that meets it reports it
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
            )
        )
        return streamable_http_client(self.target, http_client=http)

    def _opening_error(self, exc: BaseException) -> McpError:
        where = (
            f"{self.target.command} {' '.join(self.target.args)}".strip()
            if isinstance(self.target, StdioServerParameters)
            else self.target
        )
        if isinstance(exc, MCPError):
            return McpError(f"MCP server {self.name!r} refused the connection: {exc.message}", server=self.name)
        detail = _root(exc)
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


def _root(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (anyio wraps a transport's failure in one)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
