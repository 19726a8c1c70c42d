"""The request log: one line per HTTP request — method, path, status, latency, principal.

An ASGI middleware around the whole app. It never logs what could be a secret or a payload:
no query string (a token may ride in one), no header, no body. The principal is the one the
request authenticated as (``note_principal``, called by ``Service.principal``), or ``-``.
Records go to the ``pausepoint.server.access`` logger at INFO with the fields as ``extra``
(``method``, ``path``, ``status``, ``duration_ms``, ``principal``), so a JSON formatter (see
``pausepoint serve --log-format json``) shows them as fields. With metrics on, each request is
also counted by route template (``/v1/agents/{agent}/sessions/{session_id}``), never by path.
"""

from __future__ import annotations

import logging
import re
from contextvars import ContextVar
from time import perf_counter
from typing import Any

from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["RequestLog", "note_principal"]

log = logging.getLogger("pausepoint.server.access")

_CURRENT: ContextVar[dict[str, Any] | None] = ContextVar("pausepoint_request", default=None)


def note_principal(principal: str) -> None:
    """Tell the request log who the current request authenticated as."""
    holder = _CURRENT.get()
    if holder is not None:
        holder["principal"] = principal


class RequestLog:
    def __init__(self, app: ASGIApp, *, log: bool = True, metrics: Any = None) -> None:
        self.app = app
        self.log = log
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        holder: dict[str, Any] = {"status": 500}
        token = _CURRENT.set(holder)
        start = perf_counter()

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                holder["status"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            _CURRENT.reset(token)
            seconds = perf_counter() - start
            root = scope.get("root_path", "")
            path = scope["path"] if scope["path"].startswith(root) else root + scope["path"]
            method, status = scope["method"], holder["status"]
            principal = holder.get("principal", "-")
            if self.log and log.isEnabledFor(logging.INFO):
                log.info(
                    "%s %s %s %.1fms %s",
                    method,
                    path,
                    status,
                    seconds * 1000,
                    principal,
                    extra={
                        "method": method,
                        "path": path,
                        "status": status,
                        "duration_ms": round(seconds * 1000, 3),
                        "principal": principal,
                    },
                )
            if self.metrics is not None:
                self.metrics.request_served(method, _route(scope), status, seconds)


def _route(scope: Scope) -> str:
    """The template of the route that matched (Starlette notes it in ``scope["route"]``), never
    the path: ``/v1/agents/{agent}/sessions/{session_id}``; a mount's, ``/console/{path}`` (the
    files under it are many, and anyone may ask for any name)."""
    route = scope.get("route")
    if isinstance(route, Mount):
        return f"{route.path}/{{path}}"
    if isinstance(route, Route):
        return _CONVERTOR.sub(r"{\1}", route.path)  # ``{action:str}``: named as ``{action}``
    return "(unmatched)"


_CONVERTOR = re.compile(r"\{(\w+):\w+\}")
