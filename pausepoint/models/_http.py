"""What every provider's HTTP API has in common: error statuses, Retry-After, transport failures,
and replies whose body has the wrong shape.

Each adapter's ``_map_errors`` reads its SDK's exception (status, the provider's message and
error kind, headers) and hands them here, so a status means the same error whichever provider
answered it:

==========================  ======================  =========
HTTP status                 error                   retried
==========================  ======================  =========
401, 403                    ``ModelAuthError``      no
429                         ``ModelRateLimited``    yes, after ``retry_after`` when the provider said
408, 504                    ``ModelTimeout``        yes
409, 5xx (529 included)     ``ModelUnavailable``    yes, after ``retry_after`` when the provider said
other 4xx                   ``ModelBadRequest``     no
==========================  ======================  =========

Every such error carries ``details``: ``provider`` (the plugin's prefix), ``status`` (the HTTP
status), and what the provider said beside it (``error_type``, ``request_id``). A
``ModelAuthError``'s message says only that the provider refused the server's credentials: the
provider's text about a refused key may quote the key (OpenAI's shows a fragment of it), so it
goes to the log, never to clients.

``ReplyReader`` reads the fields of a 200 reply the SDK parsed without validating it (see there).
A streamed request's 200 that is no event stream (``ReplyReader.require_event_stream``) and a
config value JSON cannot carry (``refuse_unsendable``) are refused alike by every adapter.
"""

from __future__ import annotations

import email.utils
import importlib
import json
import logging
import math
import time
from collections.abc import Collection, Iterable, Mapping
from contextlib import suppress
from functools import cache
from typing import Any, TypeVar

import pydantic
import pydantic_core

from ..errors import (
    ModelAuthError,
    ModelBadRequest,
    ModelError,
    ModelOutputError,
    ModelRateLimited,
    ModelTimeout,
    ModelUnavailable,
)

__all__ = [
    "ReplyReader",
    "error_kind",
    "refuse_reserved",
    "refuse_unsendable",
    "retry_after",
    "status_error",
    "transport_error",
    "transport_errors",
]

log = logging.getLogger("pausepoint")

T = TypeVar("T")


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
    where: str | None = None,
    **details: Any,
) -> ModelError:
    """The typed error for a provider's error reply: ``kind`` (default: by ``status``), whose
    message names the provider, the provider's own ``detail`` and ``where`` it was said
    (default: ``HTTP <status>``).

    A ``ModelAuthError``'s message leaves ``detail`` out (it is logged instead: see the module
    docstring). ``details`` (``error_type``, ``request_id``, ...) are kept beside ``provider`` and
    ``status``; ``retry_after`` goes to a ``ModelRateLimited`` or a ``ModelUnavailable``.
    """
    kind = kind or error_kind(status)
    where = where or f"HTTP {status}"
    message = f"{provider}: {detail} ({where})"
    if issubclass(kind, ModelAuthError):
        log.warning("%s refused the server's credentials (%s): %s", provider, where, detail)
        message = f"{provider}: the provider refused the server's credentials ({where})"
    info = {"provider": provider, "status": status, **details}
    if issubclass(kind, ModelRateLimited | ModelUnavailable):
        return kind(message, retry_after=retry_after, **info)
    return kind(message, **info)


def refuse_reserved(config: Mapping[str, Any], reserved: Collection[str]) -> None:
    """Raise ``ModelBadRequest`` for config keys the adapter sets itself (``reserved``: the model,
    the messages, the system prompt, the tools, streaming): an agent's config never replaces the
    session's history or its tools, on any provider."""
    taken = sorted(key for key in config if key in reserved)
    if taken:
        keys = ", ".join(repr(key) for key in taken)
        raise ModelBadRequest(
            f"config key{'s' if len(taken) > 1 else ''} {keys} {'are' if len(taken) > 1 else 'is'} set by pausepoint "
            "from the agent and the session, not by its config",
            keys=taken,
        )


def refuse_unsendable(config: Mapping[str, Any], *, sdk_kinds: tuple[type, ...] = ()) -> None:
    """Raise ``ModelBadRequest`` before sending for a config value JSON cannot carry, naming its key
    (``details["key"]``) and where inside the value: a number that is not finite (NaN, infinity),
    or an object JSON has no form for (a set, a date, a ``Decimal``, an object of the caller's).
    Pydantic models count as their JSON form; ``sdk_kinds`` are kinds the provider's SDK turns
    into JSON itself (Gemini's schema classes). Without this the SDK fails while encoding the
    request (an internal ``ValueError``), or sends ``NaN``, which is no JSON."""
    for key, value in config.items():
        problem = _unsendable(value, "", sdk_kinds)
        if problem is not None:
            raise ModelBadRequest(f"config key {key!r} cannot be sent as JSON: {problem}", key=key)


def _unsendable(value: Any, path: str, sdk_kinds: tuple[type, ...]) -> str | None:
    """What makes ``value`` (at ``path`` inside a config value) no JSON, or None when it is JSON
    throughout."""
    where = f"the value at {path}" if path else "the value"
    if value is None or isinstance(value, (str, int, *sdk_kinds)):  # bool is an int
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where} is {value!r}, a number JSON has no form for"
    if isinstance(value, pydantic.BaseModel):
        try:
            value = value.model_dump(mode="json", exclude_none=True)
        except pydantic_core.PydanticSerializationError:
            return f"{where} is a {type(value).__name__} holding what JSON has no form for"
    if isinstance(value, Mapping):
        items: Iterable[tuple[Any, Any]] = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return f"{where} is {_json_kind(value)}, which JSON has no form for"
    for index, item in items:
        if not isinstance(index, str | int):
            return f"{where} has the key {index!r}, which JSON has no form for"
        problem = _unsendable(item, f"{path}[{index!r}]", sdk_kinds)
        if problem is not None:
            return problem
    return None


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, else ``retry-after`` (seconds or an HTTP date); None
    when the headers say nothing usable (a number that is not finite included). A date in the
    past is 0."""
    if headers is None:
        return None
    milliseconds = _number(headers.get("retry-after-ms"))
    if milliseconds is not None:
        return max(0.0, milliseconds / 1000)
    value = headers.get("retry-after")
    if not value:
        return None
    seconds = _number(value)
    if seconds is not None:
        return max(0.0, seconds)
    if _number(value, finite=False) is not None:
        return None  # inf, nan: nothing to wait for
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _number(text: str | None, *, finite: bool = True) -> float | None:
    """``text`` as a number (a finite one, unless ``finite`` is False), else None."""
    try:
        number = float(text) if text else None
    except ValueError:
        return None
    return number if number is None or not finite or math.isfinite(number) else None


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


class ReplyReader:
    """Reads the fields of a reply that an SDK parsed without validating it.

    The OpenAI and Anthropic SDKs build their types from whatever JSON a 200 carried, so a body
    of the wrong shape (a proxy's, a compatible server's) leaves any field None or of another
    type than its annotation says. Each field method returns one field as the type it names, or
    raises ``ModelOutputError`` naming the field (``details["field"]``) and what it held.

    The SDKs read a streamed request's 200 that is no event stream (a proxy's HTML page, a JSON
    body) as a stream that ended at once, which a retry policy would take for a cut stream:
    ``require_event_stream`` and ``no_event_stream`` make it a ``ModelOutputError``, not retried.
    """

    def __init__(self, provider: str) -> None:
        self.provider = provider

    def unusable(self, field: str, value: object, wanted: str) -> ModelOutputError:
        """The error for ``field`` holding ``value`` where ``wanted`` (``a list``, ...) was due."""
        held = "missing" if value is None else f"{_json_kind(value)}, not {wanted}"
        return ModelOutputError(
            f"{self.provider}: unusable response: {field} is {held}", provider=self.provider, field=field
        )

    def items(self, value: object, field: str, *, required: bool = False) -> list[Any]:
        """A list field; a missing one is empty unless ``required``."""
        if isinstance(value, list):
            return value
        if value is None and not required:
            return []
        raise self.unusable(field, value, "a list")

    def text(self, value: object, field: str) -> str:
        """A string field; a missing one is empty."""
        return self.optional_text(value, field) or ""

    def optional_text(self, value: object, field: str) -> str | None:
        """A string field, or None."""
        if value is None or isinstance(value, str):
            return value
        raise self.unusable(field, value, "a string")

    def instance(self, value: object, kind: type[T], field: str) -> T:
        """A field the SDK made a ``kind`` of (an object of its types, or ``str``, ``int``); a
        missing one is refused too."""
        if isinstance(value, kind) and not (isinstance(value, bool) and kind is int):
            return value
        raise self.unusable(field, value, _JSON_KINDS.get(kind, "an object"))

    def optional_instance(self, value: object, kind: type[T], field: str) -> T | None:
        """An object field the SDK made a ``kind`` of, or None."""
        return None if value is None else self.instance(value, kind, field)

    def mapping(self, value: object, field: str) -> dict[str, Any]:
        """A JSON object the SDK kept as a dict (a field its types do not describe, such as the
        content parts of a compatible server); a missing one is refused too."""
        if isinstance(value, dict):
            return value
        raise self.unusable(field, value, "an object")

    def require_event_stream(self, headers: Mapping[str, str] | None) -> None:
        """Raise ``ModelOutputError`` for a streamed request's 200 whose content type is given and
        is not ``text/event-stream``. Unknown headers (None), or none naming a content type, leave
        it to the events (``no_event_stream``)."""
        given = next((value for name, value in (headers or {}).items() if name.lower() == "content-type"), "")
        if given and given.split(";", 1)[0].strip().lower() != "text/event-stream":
            raise self.no_event_stream(f"content type {given}")

    def no_event_stream(self, what: str = "not one event in it") -> ModelOutputError:
        """The error for a streamed request's 200 that is no event stream: ``what`` it was instead
        (by default: a body without a single event). A stream cut after its first events is not
        this: it is ``ModelUnavailable``, retried while nothing of it was reported."""
        return ModelOutputError(
            f"{self.provider}: unreadable response: the reply to a streamed request is no event stream ({what})",
            provider=self.provider,
        )

    @staticmethod
    def arguments(text: str) -> Any:
        """A call's arguments from their JSON text: none is ``{}``; text that is no JSON stays the
        raw string, for the runtime to report to the model as invalid input."""
        if not text.strip():
            return {}
        try:
            return json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nested too deep for the parser
            return text

    @staticmethod
    def count(value: object) -> int | None:
        """A token count, or None when the reply gives none usable: usage is an account of the
        reply, not part of it, and a gateway's odd usage should not discard the answer."""
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


_JSON_KINDS: dict[type, str] = {str: "a string", int: "a whole number", list: "a list"}


def _json_kind(value: object) -> str:
    """How ``value`` reads as JSON: ``a string``, ``a number``, ..."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict | pydantic.BaseModel):
        return "an object"
    return f"a {type(value).__name__}"
