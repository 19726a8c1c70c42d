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
from typing import Any

from pydantic_core import to_jsonable_python
from starlette.requests import Request
from starlette.responses import Response

from ..errors import Forbidden, InvalidRequest, NotFound
from ..stores import Delivery, SessionStore
from ..stores._base import event_stream
from ._auth import current_tenant, qualified
from ._errors import UnknownWebhook
from ._params import ascii_int, query_int
from ._removed_webhooks import webhooks_by_stream
from ._replies import json_response
from ._routes import PAGE_SIZE, Operation, query
from ._service import Service, service_of

__all__ = [
    "DELIVERIES",
    "HEALTHZ",
    "READYZ",
    "RETRY",
    "deliveries",
    "healthz",
    "metrics_page",
    "readyz",
    "retry",
]

_READY_TIMEOUT = 5.0
_STATES = ("pending", "delivered", "failed")
_MAX_OFFSET = 100_000  # deliveries skipped by one listing: past that, narrow it by state or webhook
_SCAN_PAGE = 500  # failed deliveries read a query while a retry looks for the one it names


_JSON = {"application/json": {"schema": {"type": "object"}}}

HEALTHZ: Operation[Any] = Operation(
    "The process serves requests (no credentials needed)",
    responses={"200": {"description": "alive", "content": _JSON}},
    public=True,
)


async def healthz(_request: Request) -> Response:
    return json_response({"status": "ok"})


READYZ: Operation[Any] = Operation(
    "Every store answers (503 naming the one that does not; no credentials needed)",
    responses={
        "200": {"description": "ready", "content": _JSON},
        "503": {"description": "a store does not answer", "content": _JSON},
    },
    public=True,
)


async def readyz(request: Request) -> Response:
    service = service_of(request)
    checks = await asyncio.gather(*(_check(store, service.probes) for store in service.stores))
    ready = all(c["ok"] for c in checks)
    return json_response({"status": "ready" if ready else "unavailable", "stores": checks}, 200 if ready else 503)


async def metrics_page(request: Request) -> Response:
    """The app's metrics in Prometheus' text format (served when ``create_app(metrics=...)``)."""
    body, content_type = service_of(request).metrics.exposition()
    return Response(body, media_type=content_type)


DELIVERIES: Operation[Any] = Operation(
    "Webhook deliveries of the outbox, newest first, a page at a time (operators only: 403 for others)",
    {"type": "object", "properties": {"deliveries": {"type": "array", "items": {"type": "object"}}}},
    params=[
        query("state", {"enum": list(_STATES)}),
        query("webhook", {"type": "string"}),
        PAGE_SIZE,
        query("offset", {"type": "integer", "minimum": 0, "maximum": _MAX_OFFSET}),
    ],
)


async def deliveries(request: Request) -> Response:
    service = service_of(request)
    await _operator(request, service)
    state = request.query_params.get("state")
    if state is not None and state not in _STATES:
        raise InvalidRequest(f"query parameter 'state' must be one of {', '.join(_STATES)}")
    limit = query_int(request, "limit", min(100, service.limits.max_page), 1, service.limits.max_page)
    offset = query_int(request, "offset", 0, 0, _MAX_OFFSET)
    target = request.query_params.get("webhook")
    # Each store lists its newest first. One store skips ``offset`` itself; of several, the first
    # offset + limit of each hold the page's, merged by when their events were written.
    skip = offset if len(service.stores) == 1 else 0
    found: list[tuple[Delivery, str]] = []
    for index, store in enumerate(service.stores):
        listed = await store.list_deliveries(state=state, target=target, limit=offset - skip + limit, offset=skip)  # type: ignore[arg-type]
        found += [(delivery, f"{index}-{delivery.id}") for delivery in listed]
    found.sort(key=lambda pair: pair[0].event.at, reverse=True)  # stable: each store's order kept
    page = found[offset - skip : offset - skip + limit]
    return json_response({"deliveries": [_delivery(key, delivery) for delivery, key in page]})


RETRY: Operation[Any] = Operation(
    "Send a failed delivery again (operators only; 409 unknown_webhook when no webhook of its name is configured)",
    {"type": "object", "properties": {"id": {"type": "string"}, "state": {"type": "string"}}},
)


async def retry(request: Request) -> Response:
    service = service_of(request)
    await _operator(request, service)
    key = request.path_params["delivery"]
    index, number = _delivery_id(key)
    if index >= len(service.stores):
        raise NotFound(f"no delivery {key!r}")
    store = service.stores[index]
    target = await _failed_target(store, number)
    if target is not None and target not in webhooks_by_stream(service.ai)[event_stream(store)]:
        raise UnknownWebhook(
            f"delivery {key!r} is to the webhook {target!r}, which is not configured here (removed from the "
            "configuration?): nothing would send it, so it stays failed. Configure the webhook again to retry it",
            delivery=key,
            webhook=target,
        )
    if not await store.requeue_delivery(number, service.ai.clock()):
        raise NotFound(f"no failed delivery {key!r}")
    return json_response({"id": key, "state": "pending"})


async def _failed_target(store: SessionStore, number: int) -> str | None:
    """The webhook of ``store``'s failed delivery ``number``, or None when it is not one of those
    read. The store's protocol reads deliveries by listing only: the failed ones are read newest
    first until it comes, stopping at the first page past it (every built-in store numbers
    deliveries as it writes them, and lists the greater number first) or after ``_MAX_OFFSET``."""
    offset = 0
    while offset <= _MAX_OFFSET:
        page = await store.list_deliveries(state="failed", limit=_SCAN_PAGE, offset=offset)
        found = next((d.target for d in page if d.id == number), None)
        if found is not None or len(page) < _SCAN_PAGE or page[-1].id < number:
            return found
        offset += len(page)
    return None


async def _operator(request: Request, service: Service) -> str:
    principal = await service.principal(request)
    if qualified(principal, current_tenant()) not in service.operators:  # a tenant's is "tenant/name"
        raise Forbidden(f"{principal!r} is not an operator of this server")
    return principal


async def _check(store: SessionStore, probes: set[asyncio.Task[Any]]) -> dict[str, Any]:
    """Whether ``store`` answers a read within ``_READY_TIMEOUT``: known in that time, whatever it does.

    Not ``asyncio.wait_for``, which waits for the cancelled read to unwind, and a store may take
    as long as its server to do that: asyncpg puts a connection back in its pool (shielded from
    cancellation) only once the server has acknowledged the cancelled query, and a frozen server
    never does. A read past its time is cancelled and left to end in ``probes``."""
    backend = type(store).__name__
    probe = asyncio.ensure_future(store.get_summary("pausepoint-readyz"))
    try:
        done, _ = await asyncio.wait({probe}, timeout=_READY_TIMEOUT)
    finally:
        if not probe.done():  # past its time (or this request was cancelled)
            probe.cancel()
            probes.add(probe)
            probe.add_done_callback(_ended)
            probe.add_done_callback(probes.discard)
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


def _delivery(key: str, delivery: Delivery) -> dict[str, Any]:
    event = delivery.event
    return {
        "id": key,
        "webhook": delivery.target,
        "state": delivery.state,
        "attempts": delivery.attempts,
        "due_at": to_jsonable_python(delivery.due_at),
        "updated_at": to_jsonable_python(delivery.updated_at),
        "last_error": delivery.last_error,
        "event": {
            "id": event.id,
            "type": event.kind,
            "at": to_jsonable_python(event.at),
            "agent": event.agent,
            "session_id": event.session_id,
        },
    }


def _delivery_id(key: str) -> tuple[int, int]:
    """A delivery's id as listed, ``<store index>-<number>``, read; ``InvalidRequest`` otherwise."""
    index, dash, number = key.partition("-")
    if not dash:
        raise InvalidRequest(f"delivery id {key[:40]!r} is not <store index>-<number>, as deliveries are listed")
    parsed = ascii_int(index, "a delivery id's store index"), ascii_int(number, "a delivery id's number")
    if f"{parsed[0]}-{parsed[1]}" != key:  # one spelling, as listed: no leading zeros
        raise InvalidRequest(f"delivery id {key[:40]!r} is not <store index>-<number>, as deliveries are listed")
    return parsed
