"""``create_app``: the ASGI app serving a ``Pausepoint``'s agents.

Mount it anywhere (``app.mount("/pp", create_app(ai, auth=...))`` in FastAPI or Starlette).
Unknown routes and methods answer with the same JSON error body as everything else. Every
response says ``X-Content-Type-Options: nosniff`` (a JSON error echoing input is never sniffed
as HTML), and the redirect from ``/`` to the console is a path, never built from ``Host``. A
request whose ``Transfer-Encoding`` is anything but ``chunked`` alone is refused (501) before
any route sees it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._extras import missing_extra
from ..errors import (
    DefinitionError,
    InvalidRequest,
    NotFound,
    PausepointError,
    UnsupportedContentCoding,
    UnsupportedTransferCoding,
)
from ..runtime._app import Pausepoint
from ..webhooks import ApprovalLinks, SlackApp
from ._auth import AccessPolicy, Authenticator, OwnerPolicy
from ._errors import dumps, error_response
from ._expiry import ExpirySweep
from ._feed import Feed
from ._limits import Limits
from ._openapi import openapi_document
from ._requestlog import RequestLog
from ._retention import EventRetention
from ._routes import starlette_routes
from ._service import Service
from ._sign_in import console_provider
from ._table import route_table
from ._webhooks import WebhookSender

__all__ = ["create_app"]


def create_app(
    ai: Pausepoint,
    *,
    auth: Authenticator,
    policy: AccessPolicy | None = None,
    limits: Limits | None = None,
    feed_interval: float = 1.0,
    expiry_interval: float | None = 30.0,
    console: bool = True,
    operators: Collection[str] = (),
    metrics: bool | Any = False,
    request_log: bool = True,
    webhooks: bool | WebhookSender = True,
    mcp: bool = False,
    links: ApprovalLinks | None = None,
    slack: SlackApp | None = None,
    keep_events: timedelta | None = None,
) -> Starlette:
    """An ASGI app serving every agent defined on ``ai``.

    ``auth`` maps a request to its principal (``BearerTokens({...})``, or your own callable);
    ``policy`` decides who sees a session, who answers its pauses and who converses in it
    (default ``OwnerPolicy()``: the owner only); ``limits`` bounds what a request may carry;
    ``feed_interval`` is how often, in seconds, the SSE feed polls the stores for changes made
    by other processes;
    ``expiry_interval`` is how often expired pauses are settled by their agent's expiry policy
    (None: never here, e.g. when a separate job calls ``agent.settle_expired()``). ``console``
    serves the web console at ``/console/`` (redirecting ``/`` there), which signs in with a bearer
    token, or through the provider of an ``OidcBearer`` in ``auth`` with a ``console_client_id``.

    Operating it: ``/healthz`` and ``/readyz`` always; ``metrics=True`` (or a
    ``pausepoint.metrics.PrometheusMetrics``; needs ``pausepoint[metrics]``) counts what the
    runtime and the server do and serves it at ``/metrics``; ``request_log`` logs one line per
    request (``pausepoint.server.access`` logger); ``operators`` may read and retry webhook
    deliveries (``/v1/ops/deliveries``) and span tenants (the default policy's ``operators``);
    ``webhooks`` sends the app's webhooks from this process (``False``: another process does; or
    a ``WebhookSender`` to tune it); ``keep_events`` (a ``timedelta``, at most 36500 days) prunes
    the stores' events older than that, once delivered: the feed's replay and the webhooks' outbox
    (default: every event is kept; the sessions' histories and audit trails are never pruned).
    ``mcp=True`` serves the agents as an MCP server at ``/mcp`` (streamable HTTP; the same
    ``auth`` and ``policy``; needs ``pausepoint[mcp]``; see ``pausepoint.mcp``).

    Reaching approvers (``pausepoint.webhooks``): ``links`` (``ApprovalLinks``) puts a signed,
    expiring link to the pause's card in every pause the webhooks announce, and serves
    ``GET /v1/links/{token}``; ``slack`` (``SlackApp``; needs ``pausepoint[slack]`` and
    ``links``) takes the Approve / Deny buttons' callbacks at ``POST /v1/slack/actions``.

    When the server stops (the ASGI lifespan's shutdown), ``ai.aclose()`` closes the plugins'
    connections and the agents' stores.
    """
    ops = frozenset(operators)
    policy = policy or OwnerPolicy(operators=ops)  # operators span tenants
    _check_access(auth, policy)
    _check_reach(links, slack)
    feed = Feed(ai, interval=feed_interval)
    expiry = ExpirySweep(ai, interval=expiry_interval, settled=feed.notify)
    prometheus = _metrics(ai, metrics)
    sender = _sender(ai, webhooks, links)
    retention = EventRetention(ai, keep_events)
    service = Service(ai, auth, policy, limits or Limits(), feed, expiry, sender, retention, ops, prometheus)
    service.links, service.slack, service.sign_in = links, slack, console_provider(auth) if console else None
    service.mcp = _mcp_endpoint(ai, service) if mcp else None
    reach = {"links": links is not None, "slack": slack is not None}
    table = route_table(mcp=service.mcp, metrics=prometheus is not None, console=console, **reach)
    service.openapi = dumps(openapi_document(table, max_page=service.limits.max_page))
    middleware = [Middleware(_StoppedMidReply), Middleware(_NoSniff)]
    if request_log or prometheus is not None:
        middleware.append(Middleware(RequestLog, log=request_log, metrics=prometheus))
    middleware += [Middleware(_OnlyChunked), Middleware(_OneValueEach)]
    app = Starlette(
        routes=starlette_routes(table),
        exception_handlers={HTTPException: _http_error},
        lifespan=_lifespan,
        middleware=middleware,
    )
    # A slash too many or too few is a 404, not Starlette's redirect to a URL built from the Host header.
    app.router.redirect_slashes = False
    app.state.pausepoint = service  # where the handlers find it (``service_of``)
    return app


def _sender(ai: Pausepoint, webhooks: bool | WebhookSender, links: ApprovalLinks | None) -> WebhookSender | None:
    """The sender of ``create_app(webhooks=...)``, putting ``links`` in the pauses it announces."""
    sender = webhooks if isinstance(webhooks, WebhookSender) else (WebhookSender(ai) if webhooks else None)
    if sender is not None and sender.links is None:
        sender.links = links
    return sender


def _check_access(auth: Authenticator, policy: AccessPolicy) -> None:
    if not callable(auth):  # else every request would be a 500
        raise DefinitionError(
            f"auth must be a callable from a request to its principal (BearerTokens({{...}}), OidcBearer(...), "
            f"your own), not {auth!r}"
        )
    missing = [m for m in ("can_view", "can_answer", "can_converse", "inbox_owner") if not hasattr(policy, m)]
    if missing:
        raise DefinitionError(
            f"the access policy {policy!r} lacks {', '.join(missing)} (see AccessPolicy: viewing, answering "
            "and conversing are separate rights)"
        )


def _check_reach(links: ApprovalLinks | None, slack: SlackApp | None) -> None:
    if links is not None and not isinstance(links, ApprovalLinks):
        raise DefinitionError(f"links must be an ApprovalLinks, not {links!r}")
    if slack is not None:
        if not isinstance(slack, SlackApp):
            raise DefinitionError(f"slack must be a SlackApp, not {slack!r}")
        if links is None:
            raise DefinitionError("slack needs links=ApprovalLinks(...): its buttons carry signed approval links")
        try:
            import slack_sdk.signature  # noqa: F401 - checked here, used by the route
        except ImportError as exc:
            raise missing_extra("slack_sdk", "slack") from exc


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such route, a method the route does not take) in the app's
    JSON error body; a 405 says in ``Allow`` which methods the path takes (every route's of it)."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return error_response(NotFound("no such route"))
    error = error_response(InvalidRequest(exc.detail or "bad request"))
    error.status_code = exc.status_code
    if exc.status_code == 405:
        routes = request.app.router.routes
        partial = [r for r in routes if r.matches(request.scope)[0] is Match.PARTIAL]
        error.headers["Allow"] = ", ".join(sorted({m for r in partial for m in getattr(r, "methods", None) or ()}))
    return error


@asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    service: Service = app.state.pausepoint
    service.start_background()
    yield
    await service.close()


class _StoppedMidReply:
    """A reply the stopping server cut short once it had begun (a stream: its last event says
    so, ``_turns``) ends there: the server's cancellation goes no further, where uvicorn would log
    it as an application's error with a traceback. One cut short before it began is answered 503
    ``shutting_down`` (``guarded``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        begun = False

        async def sending(message: Message) -> None:
            nonlocal begun
            begun = begun or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except asyncio.CancelledError:
            if not begun or scope["type"] != "http":
                raise


class _NoSniff:
    """Adds ``X-Content-Type-Options: nosniff`` to every response that does not say it already."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == b"x-content-type-options" for name, _ in headers):
                    headers.append((b"x-content-type-options", b"nosniff"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_header)


class _OneValueEach:
    """Refuses a request whose query string gives one name twice (400 ``invalid_request``):
    which value it meant cannot be known, and a proxy in front of the server may have read the
    other one (``?session_id=a&session_id=b``), as for a JSON object's names and the headers."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("query_string"):
            names = [name for name, _ in parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)]
            twice = next((name for i, name in enumerate(names) if name in names[:i]), None)
            if twice is not None:
                refusal = InvalidRequest(f"query parameter {twice[:100]!r} is given more than once: give it once")
                await refused(refusal, scope)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class _OnlyChunked:
    """Refuses a request whose ``Transfer-Encoding`` is anything but ``chunked`` alone: a 501
    with the usual JSON error body, and the connection closed; no route sees it. A body with a
    ``Content-Encoding`` (gzip, br, ...) is refused too (415): read as it comes, it would be
    taken for what it is not, while a proxy that decodes it sees another request.

    RFC 9112 (section 6.1): a server that receives a transfer coding it does not understand
    ought to answer 501. httptools (uvicorn's parser when installed) frames ``gzip, chunked`` as
    chunked and hands on a body that is still gzip-coded, or, from a request that lies about it,
    plain JSON an app would act on; h11 refuses such a request with its own 400 before the app
    is called. Checked here, the refusal does not depend on the parser.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            codings = [value for name, value in scope["headers"] if name == b"transfer-encoding"]
            if codings and [c.strip().lower() for v in codings for c in v.split(b",")] != [b"chunked"]:
                said = ", ".join(v.decode("latin-1") for v in codings)
                refusal = refused(
                    UnsupportedTransferCoding(
                        f"Transfer-Encoding {said[:100]!r} is not supported: send the body with Content-Length, "
                        "or with Transfer-Encoding: chunked alone",
                        transfer_encoding=said[:100],
                    ),
                    scope,
                )
                refusal.headers["Connection"] = "close"  # what follows the head is no request we can read
                await refusal(scope, receive, send)
                return
            coded = [value for name, value in scope["headers"] if name == b"content-encoding"]
            if any(c.strip().lower() not in (b"", b"identity") for v in coded for c in v.split(b",")):
                said = ", ".join(v.decode("latin-1") for v in coded)
                refusal = refused(
                    UnsupportedContentCoding(
                        f"Content-Encoding {said[:100]!r} is not supported: send the body uncoded",
                        content_encoding=said[:100],
                    ),
                    scope,
                )
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


def refused(error: PausepointError, scope: Scope) -> Response:
    """The response refusing a request before any route saw it: the app's error body, or at
    ``/mcp`` a JSON-RPC error carrying it (``_mcp_refusals.refusal``), as every refusal there
    is — an MCP client shows only that shape's message."""
    if not _to_mcp(scope):
        return error_response(error)
    from ._mcp_refusals import refusal  # the mcp extra is installed: the app serves /mcp

    return refusal(error)


def _to_mcp(scope: Scope) -> bool:
    """Whether the request goes to the app's MCP endpoint (wherever the app is mounted)."""
    app = scope.get("app")
    service = getattr(getattr(app, "state", None), "pausepoint", None)
    endpoint = getattr(service, "mcp", None)
    if endpoint is None:
        return False
    return any(
        getattr(route, "endpoint", None) is endpoint and route.matches(scope)[0] is Match.FULL
        for route in app.router.routes  # type: ignore[union-attr]
    )


def _mcp_endpoint(ai: Pausepoint, service: Service) -> Any:
    try:
        from ._mcp import McpEndpoint
    except ImportError as exc:
        raise missing_extra("mcp", "mcp") from exc
    return McpEndpoint(ai, service)


def _metrics(ai: Pausepoint, wanted: bool | Any) -> Any:
    """The PrometheusMetrics the app reports to, made and given to ``ai`` when asked for."""
    if wanted is False or wanted is None:
        return None
    if wanted is True:
        existing = ai.telemetry.metrics
        if existing is not None and hasattr(existing, "exposition"):
            return existing
        if existing is not None:
            raise DefinitionError(
                "metrics=True would replace the metrics the app reports to: pass metrics=False and expose "
                "your own, or give create_app the PrometheusMetrics to serve"
            )
        try:
            from ..metrics import PrometheusMetrics
        except ImportError as exc:
            raise missing_extra("prometheus-client", "metrics") from exc
        wanted = PrometheusMetrics()
    ai.telemetry.metrics = wanted
    return wanted
