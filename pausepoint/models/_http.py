"""What every provider's HTTP API has in common: error statuses, Retry-After, transport failures.

Each adapter's ``_map_errors`` reads its SDK's exception (status, the provider's message and
error kind, headers) and hands them here, so a status means the same error whichever provider
answered it:

==========================  ======================  =========
HTTP status                 error                   retried
==========================  ======================  =========
401, 403                    ``ModelAuthError``      no
429                         ``ModelRateLimited``    yes, after ``retry_after`` when the provider said
408, 504                    ``ModelTimeout``        yes
409, 5xx (529 included)     ``ModelUnavailable``    yes
other 4xx                   ``ModelBadRequest``     no
==========================  ======================  =========

Every such error carries ``details``: ``provider`` (the plugin's prefix), ``status`` (the HTTP
status), and what the provider said beside it (``error_type``, ``request_id``).
"""

from __future__ import annotations

import email.utils
import importlib
import time
from collections.abc import Mapping
from contextlib import suppress
from functools import cache
from typing import Any

from ..errors import ModelAuthError, ModelBadRequest, ModelError, ModelRateLimited, ModelTimeout, ModelUnavailable

__all__ = ["error_kind", "retry_after", "status_error", "transport_error", "transport_errors"]


def error_kind(status: int) -> type[ModelError]:
    """The error class for an HTTP error ``status`` (see the module's table)."""
    if status in (401, 403):
        return ModelAuthError
    if status == 429:
        return ModelRateLimited
    if status in (408, 504):
        return ModelTimeout
    if status == 409 or status >= 500:
        return ModelUnavailable
    return ModelBadRequest


def status_error(
    provider: str,
    status: int,
    detail: str,
    *,
    kind: type[ModelError] | None = None,
    retry_after: float | None = None,
    **details: Any,
) -> ModelError:
    """The typed error for a provider's error reply: ``kind`` (default: by ``status``), whose
    message names the provider, the status and the provider's own ``detail``.

    ``details`` (``error_type``, ``request_id``, ...) are kept beside ``provider`` and ``status``;
    ``retry_after`` goes to a ``ModelRateLimited``.
    """
    kind = kind or error_kind(status)
    message = f"{provider}: {detail} (HTTP {status})"
    info = {"provider": provider, "status": status, **details}
    if issubclass(kind, ModelRateLimited):
        return kind(message, retry_after=retry_after, **info)
    return kind(message, **info)


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, else ``retry-after`` (seconds or an HTTP date); None
    when the headers say nothing usable. A date in the past is 0."""
    if headers is None:
        return None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        with suppress(ValueError):
            return max(0.0, float(milliseconds) / 1000)
    value = headers.get("retry-after")
    if not value:
        return None
    with suppress(ValueError):
        return max(0.0, float(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@cache
def transport_errors() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(timeouts, other transport failures) of the HTTP stacks an SDK may use: ``httpx``,
    ``httpx2`` and ``aiohttp``, whichever are installed. SDKs let some of them through unwrapped
    (while a stream is read, or always: google-genai)."""
    timeouts: list[type[BaseException]] = [TimeoutError]
    failures: list[type[BaseException]] = []
    for name in ("httpx", "httpx2"):
        with suppress(ImportError):
            module = importlib.import_module(name)
            timeouts.append(module.TimeoutException)
            failures.append(module.TransportError)
    with suppress(ImportError):
        aiohttp = importlib.import_module("aiohttp")
        timeouts.append(aiohttp.ServerTimeoutError)
        failures.append(aiohttp.ClientError)
    return tuple(timeouts), tuple(failures)


def transport_error(provider: str, exc: BaseException) -> ModelError | None:
    """``ModelTimeout`` or ``ModelUnavailable`` for a transport failure of the HTTP stack; None
    for any other exception."""
    timeouts, failures = transport_errors()
    if isinstance(exc, timeouts):
        return ModelTimeout(f"{provider}: no answer in time ({type(exc).__name__})", provider=provider)
    if isinstance(exc, failures):
        return ModelUnavailable(f"{provider}: the connection failed: {exc!r}", provider=provider)
    return None
