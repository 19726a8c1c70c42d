"""What operators use: ``/healthz``, ``/readyz``, ``/metrics`` and the outbox's deliveries.

``/healthz`` says the process serves requests; ``/readyz`` that every store answers within
5 s (a 503 naming the failing backend otherwise, in that time whatever the store does), for
load balancers and orchestrators. Neither needs credentials, nor does ``/metrics``
(Prometheus text format, when metrics are on): expose them to your infrastructure, not to the
internet. The deliveries (listed, and a failed one sent again) are for the principals named
``operators``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..errors import Forbidden, InvalidRequest, NotFound
from ..runtime._app import Pausepoint
from ..stores import Delivery, SessionStore
from ._errors import dumps
from ._params import ascii_int, query_int
from ._routes import Endpoint, Operation, query
from ._service import Service

__all__ = ["ops_routes", "stores_of"]

_READY_TIMEOUT = 5.0
_STATES = ("pending", "delivered", "failed")


def stores_of(ai: Pausepoint) -> list[SessionStore]:
    """The app's distinct stores, in the order of its agents."""
    found: dict[int, SessionStore] = {}
    for agent in ai.agents.values():
        found.setdefault(id(agent.store), agent.store)
    return list(found.values())


def ops_routes(service: Service, *, operators: Collection[str], metrics: Any) -> list[Endpoint]:
    stores = stores_of(service.ai)
    allowed = frozenset(operators)
    unwinding: set[asyncio.Task[Any]] = set()  # probes past their time, cancelled, still ending

    async def healthz(_request: Request) -> Response:
        return _json({"status": "ok"})

    async def readyz(_request: Request) -> Response:
        checks = await asyncio.gather(*(_check(store, unwinding) for store in stores))
        ready = all(c["ok"] for c in checks)
        return _json({"status": "ready" if ready else "unavailable", "stores": checks}, 200 if ready else 503)

    async def metrics_page(_request: Request) -> Response:
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type)

    async def deliveries(request: Request) -> Response:
        await _operator(request)
        state = request.query_params.get("state")
        if state is not None and state not in _STATES:
            raise InvalidRequest(f"query parameter 'state' must be one of {', '.join(_STATES)}")
        limit = query_int(request, "limit", 100, 1, service.limits.max_page)
        target = request.query_params.get("webhook")
        found: list[dict[str, Any]] = []
        for index, store in enumerate(stores):
            for delivery in await store.list_deliveries(state=state, target=target, limit=limit):  # type: ignore[arg-type]
                found.append(_delivery(index, delivery))
        found.sort(key=lambda d: d["updated_at"], reverse=True)
        return _json({"deliveries": found[:limit]})

    async def retry(request: Request) -> Response:
        await _operator(request)
        key = request.path_params["delivery"]
        index, number = _delivery_id(key)
        if index >= len(stores):
            raise NotFound(f"no delivery {key!r}")
        if not await stores[index].requeue_delivery(number, service.ai.clock()):
            raise NotFound(f"no failed delivery {key!r}")
        return _json({"id": key, "state": "pending"})

    async def _operator(request: Request) -> str:
        principal = await service.principal(request)
        if principal not in allowed:
            raise Forbidden(f"{principal!r} is not an operator of this server")
        return principal

    json = {"application/json": {"schema": {"type": "object"}}}
    routes = [
        Endpoint(
            "GET",
            "/v1/ops/deliveries",
            deliveries,
            Operation(
                "Webhook deliveries of the outbox, newest first (operators only: 403 for others)",
                {"type": "object", "properties": {"deliveries": {"type": "array", "items": {"type": "object"}}}},
                params=[
                    query("state", {"enum": list(_STATES)}),
                    query("webhook", {"type": "string"}),
                    query("limit", {"type": "integer", "minimum": 1}),
                ],
            ),
        ),
        Endpoint(
            "POST",
            "/v1/ops/deliveries/{delivery}/retry",
            retry,
            Operation(
                "Send a failed delivery again (operators only)",
                {"type": "object", "properties": {"id": {"type": "string"}, "state": {"type": "string"}}},
            ),
        ),
        Endpoint(
            "GET",
            "/healthz",
            healthz,
            Operation(
                "The process serves requests (no credentials needed)",
                responses={"200": {"description": "alive", "content": json}},
                public=True,
            ),
        ),
        Endpoint(
            "GET",
            "/readyz",
            readyz,
            Operation(
                "Every store answers (503 naming the one that does not; no credentials needed)",
                responses={
                    "200": {"description": "ready", "content": json},
                    "503": {"description": "a store does not answer", "content": json},
                },
                public=True,
            ),
        ),
    ]
    if metrics is not None:
        routes.append(Endpoint("GET", "/metrics", metrics_page))
    return routes


async def _check(store: SessionStore, unwinding: set[asyncio.Task[Any]]) -> dict[str, Any]:
    """Whether ``store`` answers a read within ``_READY_TIMEOUT``: known in that time, whatever it does.

    Not ``asyncio.wait_for``, which waits for the cancelled read to unwind, and a store may take
    as long as its server to do that: asyncpg puts a connection back in its pool (shielded from
    cancellation) only once the server has acknowledged the cancelled query, and a frozen server
    never does. A read past its time is cancelled and left to end in ``unwinding``."""
    backend = type(store).__name__
    probe = asyncio.ensure_future(store.get_summary("pausepoint-readyz"))
    try:
        done, _ = await asyncio.wait({probe}, timeout=_READY_TIMEOUT)
    finally:
        if not probe.done():  # past its time (or this request was cancelled)
            probe.cancel()
            unwinding.add(probe)
            probe.add_done_callback(_ended)
            probe.add_done_callback(unwinding.discard)
    if not done:
        return {"backend": backend, "ok": False, "error": "TimeoutError"}
    error = probe.exception()
    if error is not None:  # any failure means "not ready"; its code, not its message (no DSNs)
        return {"backend": backend, "ok": False, "error": str(getattr(error, "code", type(error).__name__))}
    return {"backend": backend, "ok": True}


def _ended(probe: asyncio.Task[Any]) -> None:
    """Take the outcome of a probe nobody waits for any more (unretrieved, asyncio would log it)."""
    if not probe.cancelled():
        probe.exception()


def _delivery(index: int, delivery: Delivery) -> dict[str, Any]:
    event = delivery.event
    return {
        "id": f"{index}-{delivery.id}",
        "webhook": delivery.target,
        "state": delivery.state,
        "attempts": delivery.attempts,
        "due_at": delivery.due_at.isoformat(),
        "updated_at": delivery.updated_at.isoformat(),
        "last_error": delivery.last_error,
        "event": {
            "id": event.id,
            "type": event.kind,
            "at": event.at.isoformat(),
            "agent": event.agent,
            "session_id": event.session_id,
        },
    }


def _delivery_id(key: str) -> tuple[int, int]:
    """A delivery's id as listed, ``<store index>-<number>``, read; ``InvalidRequest`` otherwise."""
    index, dash, number = key.partition("-")
    if not dash:
        raise InvalidRequest(f"delivery id {key[:40]!r} is not <store index>-<number>, as deliveries are listed")
    return ascii_int(index, "a delivery id's store index"), ascii_int(number, "a delivery id's number")


def _json(value: Any, status: int = 200) -> Response:
    return Response(dumps(value), status_code=status, media_type="application/json")
