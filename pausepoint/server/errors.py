"""Errors of the HTTP edge, beside the core tree in ``pausepoint.errors``.

They are ``UsageError`` subclasses (a caller's mistake) with stable codes, raised by the
server and raised again by ``pausepoint.client`` when a response carries their code::

    UsageError
    ├── InvalidRequest       malformed JSON, wrong types, unknown fields, unsupported parts (400)
    ├── Unauthenticated      no credentials, or credentials nobody issued (401)
    ├── Forbidden            the caller may see the session but not act on it (403)
    ├── NotFound             no such agent or route (404; sessions: ``SessionNotFound``)
    ├── RequestTooLarge      a body or a message over the configured limit (413)
    ├── HistoryTooLong       the session's history reached the configured limit (422)
    ├── StaleSnapshot        a Genkit snapshot id that is not the session's latest (409)
    └── ClientStateRefused   a Genkit ``init.state``: the server is the source of truth (400)

``ServerError`` stands for an unexpected failure the server did not explain (500); the server
never sends its details.
"""

from __future__ import annotations

from ..errors import PausepointError, UsageError

__all__ = [
    "ClientStateRefused",
    "Forbidden",
    "HistoryTooLong",
    "InvalidRequest",
    "NotFound",
    "RequestTooLarge",
    "ServerError",
    "StaleSnapshot",
    "Unauthenticated",
]


class InvalidRequest(UsageError):
    code = "invalid_request"


class Unauthenticated(UsageError):
    code = "unauthenticated"


class Forbidden(UsageError):
    code = "forbidden"


class NotFound(UsageError):
    code = "not_found"


class RequestTooLarge(UsageError):
    code = "request_too_large"


class HistoryTooLong(UsageError):
    code = "history_too_long"


class StaleSnapshot(UsageError):
    code = "stale_snapshot"


class ClientStateRefused(UsageError):
    code = "client_state_refused"


class ServerError(PausepointError):
    code = "internal"
