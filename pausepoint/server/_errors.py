"""The one place where errors become HTTP responses.

Every error body has one shape, readable by pausepoint's client (``code``) and by Genkit's
remote clients (``status``, the status the reference answers for the same meaning; ``details``
repeats the ``code``, as Genkit's clients keep only ``status``, ``message`` and ``details``,
and names the reference's ``reason`` where it has one)::

    {"error": {"code": "already_resolved", "status": "FAILED_PRECONDITION", "message": "...",
               "details": {"code": "already_resolved", "reason": "INVALID_RESUME", ...}}}

Caller mistakes (``UsageError``) are 4xx; runtime and provider failures keep their meaning
(409 for a lost race, 502/503/504 for the model); anything unexpected is a 500 whose body
names nothing internal (the exception is logged).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import re
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic_core import PydanticSerializationError, to_json
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from .. import errors as core

__all__ = [
    "UnknownWebhook",
    "as_pausepoint_error",
    "dumps",
    "error_body",
    "error_response",
    "failure_json",
    "feed_shutting_down",
    "guarded",
    "http_status",
    "shutting_down",
    "sse_json",
]

log = logging.getLogger("pausepoint.server")


class UnknownWebhook(core.UsageError):
    """A failed delivery retried whose webhook this server does not have (removed from its
    configuration): nothing would send it, so it stays failed (409)."""

    code = "unknown_webhook"


# Most specific class first: the first match in an error's MRO wins.
_STATUS: dict[type[core.PausepointError], tuple[int, str]] = {
    core.UnsupportedTransferCoding: (501, "UNIMPLEMENTED"),
    core.UnsupportedContentCoding: (415, "INVALID_ARGUMENT"),
    core.InvalidRequest: (400, "INVALID_ARGUMENT"),
    core.Unauthenticated: (401, "UNAUTHENTICATED"),
    core.Forbidden: (403, "PERMISSION_DENIED"),
    core.NotFound: (404, "NOT_FOUND"),
    core.RequestTooLarge: (413, "RESOURCE_EXHAUSTED"),
    core.HistoryTooLong: (422, "RESOURCE_EXHAUSTED"),
    UnknownWebhook: (409, "FAILED_PRECONDITION"),
    core.StaleSnapshot: (409, "INVALID_ARGUMENT"),  # the reference: a snapshot it cannot resume
    core.ClientStateRefused: (400, "FAILED_PRECONDITION"),
    core.ServerError: (500, "INTERNAL"),
    core.SessionNotFound: (404, "NOT_FOUND"),
    core.InvalidSessionId: (400, "INVALID_ARGUMENT"),
    core.UnknownInterrupt: (404, "INVALID_ARGUMENT"),  # the reference: an unresolved tool request
    core.AlreadyResolved: (409, "FAILED_PRECONDITION"),  # the reference: nothing to resume
    core.PauseChanged: (409, "FAILED_PRECONDITION"),
    core.StaleInterrupt: (409, "FAILED_PRECONDITION"),
    core.NotPaused: (409, "FAILED_PRECONDITION"),
    core.InterruptExpired: (409, "FAILED_PRECONDITION"),
    core.NothingToResume: (409, "FAILED_PRECONDITION"),
    core.ToolDefinitionChanged: (409, "FAILED_PRECONDITION"),
    core.IdempotencyKeyReused: (409, "ALREADY_EXISTS"),
    core.InterruptNameMismatch: (422, "INVALID_ARGUMENT"),
    core.DuplicateAnswer: (422, "INVALID_ARGUMENT"),
    core.InvalidAnswer: (422, "INVALID_ARGUMENT"),
    core.InputEditNotAllowed: (422, "INVALID_ARGUMENT"),
    core.ApprovalForbidden: (403, "PERMISSION_DENIED"),
    core.AlreadyApproved: (409, "ALREADY_EXISTS"),
    core.DecisionNotAllowed: (422, "INVALID_ARGUMENT"),
    core.InvalidGrant: (422, "INVALID_ARGUMENT"),
    core.GrantNotFound: (404, "NOT_FOUND"),
    core.PendingInterrupts: (409, "FAILED_PRECONDITION"),
    core.InvalidMessage: (422, "INVALID_ARGUMENT"),
    core.DefinitionError: (422, "INVALID_ARGUMENT"),
    core.ModelNotFound: (422, "INVALID_ARGUMENT"),
    core.UsageError: (400, "INVALID_ARGUMENT"),
    core.ConcurrentUpdate: (409, "ABORTED"),
    core.ResumeInProgress: (409, "ABORTED"),
    core.TurnInProgress: (409, "ABORTED"),
    core.TurnLost: (409, "ABORTED"),
    core.PayloadTooLarge: (413, "RESOURCE_EXHAUSTED"),
    core.StoreError: (503, "UNAVAILABLE"),
    core.IdentityProviderUnavailable: (503, "UNAVAILABLE"),
    core.ShuttingDown: (503, "UNAVAILABLE"),
    core.ModelRateLimited: (429, "RESOURCE_EXHAUSTED"),
    core.ModelTimeout: (504, "DEADLINE_EXCEEDED"),
    core.ModelUnavailable: (503, "UNAVAILABLE"),
    core.ModelError: (502, "UNAVAILABLE"),
    core.PausepointError: (500, "INTERNAL"),
}


def http_status(error: core.PausepointError | type[core.PausepointError]) -> tuple[int, str]:
    """The HTTP status code and the Genkit status name for ``error`` (or an error class)."""
    for cls in (error if isinstance(error, type) else type(error)).__mro__:
        found = _STATUS.get(cls)
        if found is not None:
            return found
    return 500, "INTERNAL"


def failure_json(error: str) -> dict[str, Any]:
    """A failed turn's ``error`` on the Genkit wire: its Genkit status, and pausepoint's code in
    ``details``, as for an error answered as such. A turn ends failed with the text of what
    failed it — ``"ModelError: ..."``, ``"StoreError: ..."`` (their code and status, as when
    they fail a call before anything was recorded) or ``"tool 'x' failed: ..."``
    (``tool_failed``, with Genkit's reason for it)."""
    named = getattr(core, error.partition(":")[0], None)
    if isinstance(named, type) and issubclass(named, core.PausepointError):
        return {"status": http_status(named)[1], "message": error, "details": {"code": named.code}}
    return {"status": "INTERNAL", "message": error, "details": {"code": "tool_failed", "reason": "TOOL_FAILED"}}


def as_pausepoint_error(exc: BaseException) -> core.PausepointError:
    """``exc`` itself if it is a pausepoint error; otherwise a ``ServerError`` that says nothing
    about it (the original is logged)."""
    if isinstance(exc, core.PausepointError):
        return exc
    log.error("unexpected error while serving a request", exc_info=exc)
    return core.ServerError("the server failed unexpectedly; the error was logged")


# The reference's ``details.reason`` for the same refusal (``genkit``'s RuntimeErrorReason).
_REASON: dict[type[core.PausepointError], str] = {
    core.UnknownInterrupt: "UNRESOLVED_TOOL_REQUEST",
    core.InterruptNameMismatch: "UNRESOLVED_TOOL_REQUEST",
    core.AlreadyResolved: "INVALID_RESUME",
    core.PauseChanged: "INVALID_RESUME",
    core.NotPaused: "INVALID_RESUME",
    core.StaleInterrupt: "INVALID_RESUME",
    core.NothingToResume: "INVALID_RESUME",
    core.StaleSnapshot: "SNAPSHOT_NOT_RESUMABLE",
    core.InvalidSessionId: "INVALID_SESSION_ID",
    core.InvalidAnswer: "INVALID_INPUT",
}


def error_body(exc: BaseException) -> dict[str, Any]:
    error = as_pausepoint_error(exc)
    _, status = http_status(error)
    details = {**_jsonable(error.details), "code": error.code}
    reason = next((_REASON[cls] for cls in type(error).__mro__ if cls in _REASON), None)
    if reason is not None:
        details["reason"] = reason
    return {"error": {"code": error.code, "status": status, "message": error.message, "details": details}}


def error_response(exc: BaseException) -> Response:
    error = as_pausepoint_error(exc)
    code, _ = http_status(error)
    headers = {}
    if isinstance(error, core.Unauthenticated):
        headers["WWW-Authenticate"] = 'Bearer realm="pausepoint"'
    if isinstance(error, core.ModelError) and error.retry_after is not None and math.isfinite(error.retry_after):
        headers["Retry-After"] = str(max(1, math.ceil(error.retry_after)))
    return Response(dumps(error_body(error)), status_code=code, media_type="application/json", headers=headers)


def dumps(value: Any) -> bytes:
    """Compact JSON, as the reference's handlers write it (UTF-8). A string that is not valid
    Unicode — which only an error echoing bad input can hold, a lone surrogate — is written with
    U+FFFD in its place: its escape is JSON no strict parser reads, and the whole reply would be
    lost to such a client."""
    try:
        return to_json(value, fallback=str, inf_nan_mode="constants")
    except (PydanticSerializationError, ValueError, TypeError):
        text = json.dumps(value, separators=(",", ":"), default=str, ensure_ascii=False)
        return _LONE_SURROGATE.sub("\ufffd", text).encode()


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def sse_json(value: Any) -> bytes:
    """``value`` as compact JSON (``dumps``) for an event stream's ``data:`` line, with U+2028,
    U+2029 and U+0085 escaped: a JSON string may hold them as they are, but many clients split
    an event stream's lines where Python's ``str.splitlines`` does (httpx's ``aiter_lines``
    among them), which breaks the JSON apart at them. (In UTF-8 their bytes occur nowhere else.)"""
    return (
        dumps(value)
        .replace(b"\xe2\x80\xa8", b"\\u2028")
        .replace(b"\xe2\x80\xa9", b"\\u2029")
        .replace(b"\xc2\x85", b"\\u0085")
    )


def _jsonable(details: dict[str, Any]) -> dict[str, Any]:
    try:
        return dict(json.loads(json.dumps(details, default=str)))
    except (TypeError, ValueError):
        return {}


Handler = Callable[[Request], Awaitable[Response]]


def guarded(handler: Handler) -> Handler:
    """``handler``, with every exception it raises turned into its error response."""

    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except ClientDisconnect:
            # The client went away before its request was read: nothing was done, and nobody
            # reads this reply (it is no server error to log).
            return Response(status_code=400)
        except asyncio.CancelledError:
            # The server is stopping and its grace period ran out (uvicorn cancels what is left):
            # say so in the API's shape rather than uvicorn's plain-text 500. A turn runs in a
            # task of its own and is not cut short by this; it may still end before the process.
            return error_response(shutting_down())
        except Exception as exc:
            return error_response(exc)

    return endpoint


def shutting_down() -> core.ShuttingDown:
    """What a request the stopping server cut short is told (its reply, or its stream's last event)."""
    return core.ShuttingDown(
        "the server stopped before it could answer: what the request started may have "
        "ended or not. Send it again with the same Idempotency-Key (a message or an answer "
        "sent so is never applied twice), or read the session first if it had no key"
    )


def feed_shutting_down() -> core.ShuttingDown:
    """What a feed open when the stopping server cut it short is told (its last event)."""
    return core.ShuttingDown(
        "the server stopped: reconnect to the feed (to this server or another) with the last "
        "event's id as Last-Event-ID to get the events sent since, none missed"
    )
