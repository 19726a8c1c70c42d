"""What a request writes in its headers, query string and path: integers, flags, the
``Idempotency-Key``.

An idempotency key is read as UTF-8 and checked as a Python caller's is (``key_text``: 1 to 200
characters, visible ASCII and spaces between them, what any HTTP client sends as it is), so a key
taken on one surface can be replayed on every other; a refusal is ``InvalidRequest`` (400) naming
the same ``path``, ``rule`` and ``limit``.

Integers are ASCII digits, nothing else.

Python's ``int`` and ``str.isdigit`` also take the digits of other scripts: ``int`` reads an
Arabic-Indic or a full-width three (U+0663, U+FF13) as 3, and ``"²".isdigit()`` is true while
``int("²")`` fails. Read with them, an Arabic-Indic ``0-1`` would name delivery ``0-1``, and
``²`` would crash a route with a 500. Every route reads its integers here instead: a
non-negative integer in ASCII digits, within its bounds, or ``InvalidRequest`` (400) naming
what was wrong. (A snapshot id's version, which is no route's integer but part of an id, is
checked with ``ascii_digits``: an id that cannot be one is ``NotFound``.)
"""

from __future__ import annotations

from starlette.requests import Request

from ..content._jsondata import KEY_PATH, MAX_KEY_CHARS, NotJsonData, key_text
from ..errors import InvalidRequest

__all__ = [
    "BIGGEST",
    "ascii_digits",
    "ascii_int",
    "checked_key",
    "flag",
    "idempotency_key",
    "last_event_id",
    "no_key_unless_named",
    "query_int",
]

#: the biggest integer a store keeps (a signed 64-bit one: SQLite's and PostgreSQL's ``bigint``)
BIGGEST = 2**63 - 1
_DIGITS = len(str(BIGGEST))


def ascii_digits(text: str) -> bool:
    """Whether ``text`` is a non-negative integer in ASCII digits (``str.isdigit`` also takes
    "²" and "٣", which ``int`` refuses or reads as 3)."""
    return text.isascii() and text.isdigit()


def ascii_int(text: str, what: str, low: int = 0, high: int = BIGGEST) -> int:
    """``text`` as an integer from ``low`` to ``high`` (``low`` >= 0), written in ASCII digits
    only; ``InvalidRequest`` naming ``what`` (like "query parameter 'limit'") otherwise."""
    # The length first: int() reads no more than 4,300 digits, and takes its time on fewer.
    if not ascii_digits(text) or len(text) > _DIGITS or not low <= int(text) <= high:
        raise InvalidRequest(f"{what} must be an integer from {low} to {high} in ASCII digits, not {text[:40]!r}")
    return int(text)


def query_int(request: Request, name: str, default: int, low: int, high: int) -> int:
    """The query parameter ``name`` as an integer from ``low`` to ``high`` (``default`` when it
    is absent); ``InvalidRequest`` otherwise."""
    value = request.query_params.get(name)
    if value is None:
        return default
    return ascii_int(value, f"query parameter {name!r}", low, high)


def flag(request: Request, name: str) -> bool | None:
    """The query parameter ``name`` as a boolean (``true``/``1``, ``false``/``0``; None when it
    is absent); ``InvalidRequest`` otherwise."""
    value = request.query_params.get(name)
    if value is None:
        return None
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise InvalidRequest(f"query parameter {name!r} must be true or false")


def idempotency_key(request: Request) -> str | None:
    """The ``Idempotency-Key`` header as ``checked_key`` takes it, or None; ``InvalidRequest``
    otherwise (two of them too: which one a retry would repeat cannot be known)."""
    given = _one_header(request, "Idempotency-Key")
    return checked_key(_header_text(given) if given is not None else None, "the Idempotency-Key header")


def last_event_id(request: Request) -> str | None:
    """The ``Last-Event-ID`` header as sent (its bytes read as UTF-8), or None; ``InvalidRequest``
    for two of them (which events were missed cannot be known) or bytes that are no UTF-8."""
    given = _one_header(request, "Last-Event-ID")
    if given is None:
        return None
    try:
        return given.encode("latin-1").decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest("the Last-Event-ID header is not UTF-8 text: send an id this feed sent") from None


def _one_header(request: Request, name: str) -> str | None:
    """The header ``name`` as starlette reads it (Latin-1), or None; ``InvalidRequest`` when a
    request gives it more than once."""
    given = request.headers.getlist(name.lower())
    if len(given) > 1:
        raise InvalidRequest(f"a request takes one {name} header, not several")
    return given[0] if given else None


def _header_text(value: str) -> str:
    """A header's bytes read as UTF-8, not as the Latin-1 starlette reads (where a UTF-8 "é"
    would be "Ã©", and "…" a control character), so a refusal names what the client sent;
    ``InvalidRequest`` (rule ``key_chars``) for bytes that are no UTF-8."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest(
            "the Idempotency-Key header is not UTF-8 text: an idempotency key holds visible ASCII "
            "characters and spaces between them only",
            path=KEY_PATH,
            rule="key_chars",
            limit=None,
        ) from None


def checked_key(key: str | None, what: str) -> str | None:
    """An idempotency key as every surface takes it (``key_text``: 1 to 200 characters, each
    visible ASCII or a space between them); ``InvalidRequest`` naming ``what`` carried it
    otherwise, with the ``path``, ``rule`` and ``limit`` a Python caller's refusal names."""
    if key is None:
        return None
    try:
        return key_text(key)
    except NotJsonData as exc:
        raise InvalidRequest(
            f"{what} must have 1 to {MAX_KEY_CHARS} characters, each visible ASCII or a space between them: "
            f"{exc.problem}",
            **exc.details(),
        ) from None


def no_key_unless_named(key: str | None, how: str) -> None:
    """``InvalidRequest`` for an idempotency ``key`` on a message to a session the server would
    name: a retry would start another session. ``how``: how the caller names one there."""
    if key is not None:
        raise InvalidRequest(
            f"a message to a new session takes an Idempotency-Key only where it names the session: {how}"
        )
