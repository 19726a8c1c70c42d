"""What a request writes in its headers, query string and path: integers, flags, the
``Idempotency-Key``.

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

from ..content._jsondata import MAX_KEY_CHARS
from ..errors import InvalidRequest

__all__ = [
    "BIGGEST",
    "ascii_digits",
    "ascii_int",
    "checked_key",
    "flag",
    "idempotency_key",
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
    """The ``Idempotency-Key`` header (1 to 200 characters), or None; ``InvalidRequest`` otherwise
    (two of them too: which one a retry would repeat cannot be known)."""
    given = request.headers.getlist("idempotency-key")
    if len(given) > 1:
        raise InvalidRequest("a request takes one Idempotency-Key header, not several")
    return checked_key(given[0] if given else None, "the Idempotency-Key header")


def checked_key(key: str | None, what: str) -> str | None:
    """An idempotency key as every surface takes it (1 to 200 characters); ``InvalidRequest``
    naming ``what`` carried it otherwise."""
    if key is not None and not 0 < len(key) <= MAX_KEY_CHARS:
        raise InvalidRequest(f"{what} must have 1 to {MAX_KEY_CHARS} characters")
    return key


def no_key_unless_named(key: str | None, how: str) -> None:
    """``InvalidRequest`` for an idempotency ``key`` on a message to a session the server would
    name: a retry would start another session. ``how``: how the caller names one there."""
    if key is not None:
        raise InvalidRequest(
            f"a message to a new session takes an Idempotency-Key only where it names the session: {how}"
        )
