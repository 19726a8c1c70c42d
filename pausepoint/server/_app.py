"""``create_app``: the ASGI app serving a ``Pausepoint``'s agents.

Mount it anywhere (``app.mount("/pp", create_app(ai, auth=...))`` in FastAPI or Starlette).
Unknown routes and methods answer with the same JSON error body as everything else.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .._app import Pausepoint
from ..errors import InvalidRequest, NotFound
from ._agent_routes import agent_routes
from ._approvals import rest_routes
from ._auth import AccessPolicy, Authenticator, OwnerPolicy
from ._errors import dumps, error_response
from ._feed import Feed
from ._limits import Limits
from ._openapi import openapi_document
from ._service import Service

__all__ = ["create_app"]


def create_app(
    ai: Pausepoint,
    *,
    auth: Authenticator,
    policy: AccessPolicy | None = None,
    limits: Limits | None = None,
    feed_interval: float = 1.0,
) -> Starlette:
    """An ASGI app serving every agent defined on ``ai``.

    ``auth`` maps a request to its principal (``BearerTokens({...})``, or your own callable);
    ``policy`` decides who sees and acts on a session (default ``OwnerPolicy()``: the owner
    only); ``limits`` bounds what a request may carry; ``feed_interval`` is how often, in
    seconds, the SSE feed polls the stores for changes made by other processes.
    """
    feed = Feed(ai, interval=feed_interval)
    service = Service(ai, auth, policy or OwnerPolicy(), limits or Limits(), feed)
    document = dumps(openapi_document())

    async def openapi(_request: Request) -> Response:
        return Response(document, media_type="application/json")

    async def http_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            return error_response(NotFound("no such route"))
        error = error_response(InvalidRequest(exc.detail or "bad request"))
        error.status_code = exc.status_code
        return error

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        yield
        await feed.close()

    app = Starlette(
        routes=[Route("/openapi.json", openapi, methods=["GET"]), *rest_routes(service), *agent_routes(service)],
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )
    app.state.pausepoint = service
    return app
