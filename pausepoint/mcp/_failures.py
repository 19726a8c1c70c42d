"""How a failed MCP request reads: the one translation of the SDK's errors.

``failure`` turns what a request raised into ``McpUnavailable`` / ``McpTimeout`` / ``McpError``
(``pausepoint.errors``), to be chained with ``from exc``; ``opening_error`` does the same for a
connection that could not be opened. An answer that cannot be read — a reply that breaks the
protocol, a stdio line that is not JSON-RPC, an HTTP page or status where a JSON-RPC answer
belongs — is one too: sent and not understood, a tool call "may or may not have taken effect",
as when the server dies mid-call (an HTTP 4xx says the request was refused, so it did not).

The SDK reports its own conditions with JSON-RPC codes a server may send too: a connection
that closed is ``CONNECTION_CLOSED`` (-32000), as a server's generic error often is. So the
code alone never says the connection closed: ``closed_by_sdk`` asks where the error came from
(the transport had ended; a write found it gone; the HTTP transport's stand-in for an event
stream that ended without an answer). Timeouts are pausepoint's own (the SDK is given none),
so a ``REQUEST_TIMEOUT`` (-32001) is always the server's answer.

Importing this module puts a filter on the SDK's HTTP transport's logger: an answer it cannot
read, for a request pausepoint sends, is logged on one line, without pydantic's report as a
traceback (``_without_traceback``) — the typed error says what came back.
"""

from __future__ import annotations

import contextvars
import json
import logging
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import mcp.types as types
from mcp import MCPError
from mcp.types import CONNECTION_CLOSED, PARSE_ERROR
from pydantic import ValidationError

from ..errors import McpError, McpTimeout, McpUnavailable

__all__ = [
    "REPLY",
    "HttpReply",
    "closed_by_sdk",
    "excerpt",
    "failure",
    "note_reply",
    "opening_error",
    "timed_out",
    "unreadable_line",
    "unusable_result",
]

#: what a tool call that was sent but not answered readably may have done
_UNSURE = "; it may or may not have taken effect"

#: how much of a problem with a result is said (its first line)
_PROBLEM_SIZE = 300

#: what the SDK's dispatcher wakes its waiters with when the transport ends
_SDK_CLOSED = "Connection closed"

#: how the SDK's HTTP transport says an event stream ended or failed without the answer
_SDK_STREAM_LOST = "SSE stream"


@dataclass(slots=True)
class HttpReply:
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
        return f"HTTP {self.status}" + (f" ({self.content_type or 'no type'}: {excerpt(text)})" if text else "")


#: the request being sent from this context: the HTTP client's response hook notes its answer
#: there (the SDK runs each POST in a copy of the sender's context)
REPLY: contextvars.ContextVar[HttpReply | None] = contextvars.ContextVar("pausepoint_mcp_reply", default=None)


#: what the SDK's HTTP transport logs, with a traceback, about an answer it cannot read before
#: it fails the request with a stand-in error that pausepoint reports (``HttpReply.unread``)
_SDK_UNREAD_LOGS = frozenset({"Error parsing JSON response", "Error parsing SSE message"})


def _without_traceback(record: logging.LogRecord) -> bool:
    """A filter on the SDK's HTTP transport's logger: its record of an answer that cannot be read,
    logged for a request pausepoint sends (``REPLY`` is set), keeps its line but loses its
    traceback (pydantic's report, dozens of lines): the typed error says what came back."""
    if REPLY.get() is not None and record.msg in _SDK_UNREAD_LOGS:
        record.exc_info, record.exc_text = None, None
    return True


logging.getLogger("mcp.client.streamable_http").addFilter(_without_traceback)


async def note_reply(response: httpx2.Response) -> None:
    """The HTTP client's response hook: keeps, for the request being sent (``REPLY``), the
    answer to a JSON-RPC request, unless it is an event stream (the SDK reads that as it
    comes). Read only if the request fails (``HttpReply.unread``)."""
    reply = REPLY.get()
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


def closed_by_sdk(exc: MCPError, *, ended: bool, reply: HttpReply | None = None) -> bool:
    """Whether ``exc`` is the SDK's word that the connection closed (see the module docstring),
    not an error the server sent with the same code. ``ended``: the transport's read stream had
    ended when the request failed."""
    if exc.code != CONNECTION_CLOSED or exc.data is not None:
        return False
    if exc.message == _SDK_CLOSED:
        # the dispatcher, after the transport ended; or a write that found the transport gone
        return ended or isinstance(exc.__context__, anyio.BrokenResourceError | anyio.ClosedResourceError)
    return reply is not None and reply.streamed and exc.message.startswith(_SDK_STREAM_LOST)


def unreadable_line(server: str, doing: str, effects: bool, exc: Exception) -> McpError:
    """A stdio line that was no JSON-RPC message, written while the request waited."""
    unsure = _UNSURE if effects else ""
    outcome: dict[str, Any] = {"outcome": "unknown"} if effects else {}
    return McpError(
        f"MCP server {server!r} answered {doing} with {_line(exc)}, not an MCP message{unsure}",
        server=server,
        **outcome,
    )


def timed_out(server: str, doing: str, effects: bool, timeout: float | None) -> McpTimeout:
    """A request that got no answer in ``timeout`` seconds (``call_timeout``)."""
    unsure = _UNSURE if effects else ""
    outcome: dict[str, Any] = {"outcome": "unknown"} if effects else {}
    return McpTimeout(
        f"MCP server {server!r} did not answer in {timeout}s while {doing}{unsure}", server=server, **outcome
    )


def failure(server: str, doing: str, effects: bool, exc: Exception, reply: HttpReply, *, ended: bool) -> Exception:
    """The one translation of a failed request, to be chained with ``from exc``: ``reply``,
    what the HTTP layer saw of its answer; ``ended``, whether the transport had ended. Anything
    that is no failure of the server or its connection (a bug here) is ``exc`` itself. An
    ``McpUnavailable`` says the connection is broken: the caller drops it."""
    unsure = _UNSURE if effects else ""
    outcome: dict[str, Any] = {"outcome": "unknown"} if effects else {}
    if isinstance(exc, MCPError):
        return _rpc_failure(server, doing, effects, exc, reply, ended=ended)
    if isinstance(exc, ValidationError):  # a JSON-RPC answer whose result is not what MCP says
        return McpError(
            f"MCP server {server!r} answered {doing} with a reply that does not follow the MCP protocol "
            f"({_problems(exc)}){unsure}",
            server=server,
            **outcome,
        )
    if isinstance(exc, RuntimeError):  # a result the SDK refused: not the tool's output schema, say
        return unusable_result(server, doing, effects, exc)
    if isinstance(
        exc, OSError | httpx2.HTTPError | anyio.ClosedResourceError | anyio.BrokenResourceError | anyio.EndOfStream
    ):
        return McpUnavailable(
            f"MCP server {server!r}: the connection failed while {doing} ({type(exc).__name__}: {exc}){unsure}",
            server=server,
            **outcome,
        )
    return exc


def unusable_result(server: str, doing: str, effects: bool, exc: RuntimeError) -> McpError:
    """A result the SDK refused after the server answered (it does not fit the tool's output
    schema, say): a tool call ran — what it did took effect — but its result cannot be used.
    Only the first problem is said, on one line (not the validator's report)."""
    problem = " ".join(str(exc).strip().split("\n", 1)[0].split())
    problem = problem if len(problem) <= _PROBLEM_SIZE else problem[:_PROBLEM_SIZE] + "..."
    if not effects:
        return McpError(f"MCP server {server!r} answered {doing} with a result that cannot be used: {problem}",
                        server=server)  # fmt: skip
    return McpError(
        f"MCP server {server!r} answered {doing}: the call ran (what it did took effect), but returned a result "
        f"that cannot be used: {problem}",
        server=server,
        outcome="ran",
    )


def _rpc_failure(server: str, doing: str, effects: bool, exc: MCPError, reply: HttpReply, *, ended: bool) -> McpError:
    """``failure`` of a request that ended in a JSON-RPC error: the server's, or the SDK's."""
    unsure = _UNSURE if effects else ""
    outcome: dict[str, Any] = {"outcome": "unknown"} if effects else {}
    unread = reply.unread(exc)
    if unread is not None:  # the SDK's stand-in for an HTTP answer that was no JSON-RPC message
        if 400 <= reply.status < 500:  # HTTP says the request was refused: it did not take effect
            return McpError(
                f"MCP server {server!r} refused the request while {doing}: {unread}",
                server=server,
                http_status=reply.status,
            )
        gone = reply.status in (502, 503, 504)  # a gateway that could not reach it
        return (McpUnavailable if gone else McpError)(
            f"MCP server {server!r} answered {doing} with {unread}, not an MCP answer{unsure}",
            server=server,
            http_status=reply.status,
            **outcome,
        )
    if closed_by_sdk(exc, ended=ended, reply=reply):
        return McpUnavailable(
            f"MCP server {server!r}: the connection closed while {doing}{unsure}", server=server, **outcome
        )
    return McpError(
        f"MCP server {server!r} answered with an error while {doing}: {exc.message}",
        server=server,
        mcp_code=exc.code,
    )


def opening_error(
    server: str, where: str, exc: BaseException, *, ended: bool, reply: HttpReply | None = None
) -> McpError:
    """Why a connection could not be opened: ``where`` names the command or URL; ``ended``,
    whether the transport had ended (a stdio server that exited, say); ``reply``, what the HTTP
    layer saw of the handshake's last answer. An HTTP answer that was no JSON-RPC message reads
    as a request's does (``_rpc_failure``): a 4xx refused the connection, a gateway's 502, 503
    or 504 is ``McpUnavailable``, anything else is an answer that cannot be read. It is chained
    to the SDK's exception (its ``__cause__``), as a request's failure is."""
    detail = root(exc)  # inside the task group's ExceptionGroup, as often as not
    error = _opening_error(server, where, detail, ended=ended, reply=reply)
    error.__cause__ = detail
    return error


def _opening_error(server: str, where: str, detail: BaseException, *, ended: bool, reply: HttpReply | None) -> McpError:
    """``opening_error`` of ``detail``, the exception itself (not its group)."""
    if isinstance(detail, MCPError):
        unread = reply.unread(detail) if reply is not None else None
        if reply is not None and unread is not None:
            if 400 <= reply.status < 500:
                return McpError(f"MCP server {server!r} refused the connection: {unread}",
                                server=server, http_status=reply.status)  # fmt: skip
            gone = reply.status in (502, 503, 504)  # a gateway that could not reach it
            return (McpUnavailable if gone else McpError)(
                f"MCP server {server!r} answered the handshake with {unread}, not an MCP answer",
                server=server,
                http_status=reply.status,
            )
        if closed_by_sdk(detail, ended=ended):
            return McpUnavailable(
                f"MCP server {server!r} could not be started or reached ({where}): it closed the connection "
                "before answering the handshake (it exited, or closed its output)",
                server=server,
            )
        # it answered, with a JSON-RPC error (credentials, say)
        return McpError(f"MCP server {server!r} refused the connection: {detail.message}", server=server)
    return McpUnavailable(
        f"MCP server {server!r} could not be started or reached ({where}): {type(detail).__name__}: {detail}",
        server=server,
    )


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
    return f"the line {excerpt(line)}" if isinstance(line, str) else "a line"


def excerpt(text: str, size: int = 120) -> str:
    """``text`` on one line, cut to ``size`` characters, quoted."""
    text = " ".join(text.split())
    return repr(text if len(text) <= size else text[:size] + "...")


def root(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (anyio wraps a transport's failure in one)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
