"""What a session accepts: JSON data that every store keeps and every process reads back the same.

A session's records are stored as JSON and decoded by pydantic-core (its JSON parser, jiter) —
in this process, in another one, after a restart. Some Python values do not survive that trip,
so every value that enters a session (a user message, an answer, a model's output, a tool's
result, an ``Interrupt``'s metadata) goes through ``json_data`` first: it returns the value in
the normal form the stores keep, or raises ``NotJsonData`` naming the JSON path and the rule
broken — before anything is written. The rules, and the decoder behaviour behind each:

- **depth**: jiter refuses a document nested deeper than 200 arrays/objects, and a value sits
  inside its record (and inside the HTTP replies that show it: a Genkit snapshot wraps a tool
  input in 8 levels). ``max_depth`` (default 64) may be raised to ``MAX_DEPTH`` (192 = 200 - 8).
- **integers**: jiter reads integers of at most 4,300 digits, and Python's own ``json`` (the
  HTTP edge) those a process allows (``sys.set_int_max_str_digits``, which may be as low as
  640). ``max_int_digits`` defaults to 640, so every process reads them back; at most 4,300.
- **floats**: NaN and ±Infinity are not JSON (pydantic writes them as ``null``): refused.
- **strings** (values and keys): a lone surrogate (``"\\ud800"``) cannot be encoded as UTF-8:
  refused. One string holds at most ``max_string_bytes`` bytes of UTF-8 (default: the store's
  ``max_record_bytes``, which bounds each record as a whole).
- **types**: JSON's own (dict with string keys, list, str, int, float, bool, None). Other values
  pydantic knows how to serialise — models, dataclasses, tuples, sets, enums, ``Decimal``,
  dates — are converted to that JSON form first (``pydantic_core.to_jsonable_python``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from pydantic_core import to_jsonable_python

from ..errors import DefinitionError
from ..stores._base import DEFAULT_MAX_RECORD_BYTES

__all__ = [
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "KEY_PATH",
    "MAX_KEY_CHARS",
    "JsonLimits",
    "NotJsonData",
    "json_data",
    "json_kind",
    "json_text",
    "key_text",
    "printable",
    "read_json_text",
    "time_text",
]

#: the deepest ``max_depth`` allowed: jiter's 200 levels less the deepest wrapping of a value
MAX_DEPTH = 192
#: the longest integer jiter decodes, in decimal digits
MAX_INT_DIGITS = 4300


@dataclass(frozen=True, slots=True)
class JsonLimits:
    """How large a value a session accepts (see the module docstring for where each comes from).

    ``max_depth``: arrays/objects nested in one value (``[1]`` is 1 deep), at most ``MAX_DEPTH``.
    ``max_int_digits``: decimal digits of an integer, at most ``MAX_INT_DIGITS``.
    ``max_string_bytes``: UTF-8 bytes of one string or key; ``None`` is the agent's store's
    ``max_record_bytes``. Raises ``DefinitionError`` for a limit out of range.
    """

    max_depth: int = 64
    max_int_digits: int = 640
    max_string_bytes: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_depth", "max_int_digits", "max_string_bytes"):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool)) and value is not None:
                raise DefinitionError(f"{name} must be a whole number, not {value!r}")
        if self.max_depth is None or self.max_int_digits is None:
            raise DefinitionError("max_depth and max_int_digits must be whole numbers, not None")
        if not 1 <= self.max_depth <= MAX_DEPTH:
            raise DefinitionError(
                f"max_depth must be from 1 to {MAX_DEPTH} (deeper JSON cannot be read back), not {self.max_depth}"
            )
        if not 1 <= self.max_int_digits <= MAX_INT_DIGITS:
            raise DefinitionError(
                f"max_int_digits must be from 1 to {MAX_INT_DIGITS} (longer integers cannot be read back), "
                f"not {self.max_int_digits}"
            )
        if self.max_string_bytes is not None and self.max_string_bytes < 1:
            raise DefinitionError(f"max_string_bytes must be at least 1, not {self.max_string_bytes}")

    def bounded_by(self, max_record_bytes: int) -> JsonLimits:
        """These limits, with ``max_string_bytes`` defaulting to a store's record limit."""
        return self if self.max_string_bytes is not None else replace(self, max_string_bytes=max_record_bytes)


DEFAULT_LIMITS = JsonLimits(max_string_bytes=DEFAULT_MAX_RECORD_BYTES)


class NotJsonData(ValueError):
    """A value a session cannot keep: ``path`` (JSONPath, ``$`` is the value), ``rule`` broken
    (``max_depth``, ``max_int_digits``, ``max_string_bytes``, ``finite_number``,
    ``unpaired_surrogate``, ``json_type``, ``nul_in_name``, ``control_in_name``) and the ``limit`` (None for rules
    without one)."""

    def __init__(self, problem: str, rule: str, limit: int | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.rule = rule
        self.limit = limit
        self._inner: list[str | int] = []  # path segments, innermost first (added while unwinding)
        self.root = "$"

    @property
    def path(self) -> str:
        return self.root + "".join(_segment(s) for s in reversed(self._inner))

    @property
    def segments(self) -> list[str | int]:
        """The keys and indexes from the value checked to the part that broke the rule."""
        return list(reversed(self._inner))

    def details(self) -> dict[str, Any]:
        """What a typed error carries: the path, the rule and the limit."""
        return {"path": self.path, "rule": self.rule, "limit": self.limit}

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


def json_data(value: Any, limits: JsonLimits = DEFAULT_LIMITS, *, path: str = "$") -> Any:
    """``value`` in the JSON normal form the stores keep; raises ``NotJsonData`` otherwise.

    Plain JSON data is returned as it is (nothing copied); other values are converted once
    with ``to_jsonable_python`` and checked again. ``path`` names the value in errors.
    """
    longest = limits.max_string_bytes
    if longest is None:
        longest = DEFAULT_MAX_RECORD_BYTES
        limits = limits.bounded_by(longest)
    if value is None or (type(value) is str and value.isascii() and len(value) <= longest):
        return value  # the commonest values, at the cost of one test
    try:
        try:
            _check(value, limits, 0)
            return value
        except _Foreign:
            pass
        try:
            converted = to_jsonable_python(value)
        except (TypeError, ValueError) as exc:  # PydanticSerializationError is a ValueError
            raise _conversion_error(exc, limits) from None
        try:
            _check(converted, limits, 0)
        except _Foreign as foreign:  # to_jsonable_python left something that is not JSON
            raise NotJsonData(f"{type(foreign.value).__name__} is not JSON data", "json_type") from None
        return converted
    except NotJsonData as exc:
        exc.root = path
        raise


def json_text(value: Any, limits: JsonLimits = DEFAULT_LIMITS, *, path: str = "$", name: bool = False) -> str:
    """``value`` if it is a string a session can keep; ``NotJsonData`` otherwise.

    ``name=True`` also refuses control characters: a name (a principal, a session id) is kept in
    database text columns too, where PostgreSQL's cannot hold NUL, and is written in audit lines,
    where a line break would forge another ("alice\nApproved by: bob").
    """
    longest = limits.max_string_bytes
    if longest is None:
        longest = DEFAULT_MAX_RECORD_BYTES
        limits = limits.bounded_by(longest)
    if type(value) is str and value.isascii() and len(value) <= longest and not (name and _CONTROL.search(value)):
        return value
    try:
        if type(value) is not str:
            raise NotJsonData(f"expected a string, not {type(value).__name__}", "json_type")
        _check_str(value, limits)
        if name and (control := _CONTROL.search(value)) is not None:
            if control.group() == "\x00":
                raise NotJsonData("a NUL character, which a name cannot hold", "nul_in_name")
            raise NotJsonData(f"a control character ({control.group()!r}), which a name cannot hold", "control_in_name")
    except NotJsonData as exc:
        exc.root = path
        raise
    return value


#: the longest idempotency key, on every surface (REST's header, MCP's argument, Python's keyword)
MAX_KEY_CHARS = 200
#: the name a refused key's error gives it, on every surface (``key_text``'s default ``path``)
KEY_PATH = "$.idempotency_key"
#: what a key holds: the characters an HTTP header carries as they are (visible ASCII), and spaces
#: between them (HTTP drops a header's leading and trailing spaces), so any client can replay it
_KEY = re.compile(r"[!-~]([ -~]*[!-~])?")
_NOT_KEY = re.compile(r"[^ -~]")


def key_text(value: Any, limits: JsonLimits = DEFAULT_LIMITS, *, path: str = KEY_PATH) -> str:
    """``value`` if it is an idempotency key every surface takes, HTTP headers included: a string
    a name may hold (``json_text(name=True)``: ``json_type``, ``unpaired_surrogate``,
    ``nul_in_name``, ``control_in_name``) of 1 to 200 characters (``key_length``), each visible
    ASCII or a space between them (``key_chars``); ``NotJsonData`` naming the rule otherwise."""
    json_text(value, limits, path=path, name=True)
    if not 0 < len(value) <= MAX_KEY_CHARS:
        problem = NotJsonData(
            f"an idempotency key has 1 to {MAX_KEY_CHARS} characters, not {len(value)}", "key_length", MAX_KEY_CHARS
        )
    elif not _KEY.fullmatch(value):
        problem = NotJsonData(_not_key(value), "key_chars")
    else:
        return str(value)
    problem.root = path
    raise problem


def _not_key(value: str) -> str:
    """What makes ``value`` (1 to 200 characters) no key, for ``key_text``'s refusal."""
    bad = _NOT_KEY.search(value)
    if bad is not None:
        return (
            f"an idempotency key holds visible ASCII characters and spaces between them only, "
            f"not {bad.group()!r} (character {bad.start()})"
        )
    return "an idempotency key cannot start or end with a space (HTTP drops it from a header)"


_SURROGATES = re.compile("[\ud800-\udfff]")
#: what a name never holds: C0 and C1 controls (NUL, a line break, ...), the Unicode line and paragraph separators
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str, max_bytes: int = 16 * 1024) -> str:
    """``text`` made safe to keep, for messages built from others' text (an exception's, say):
    lone surrogates become U+FFFD and it is cut to ``max_bytes`` of UTF-8."""
    text = _SURROGATES.sub("\ufffd", text)
    if len(text) > max_bytes // 4 and len(text.encode()) > max_bytes:
        text = text.encode()[: max_bytes - 3].decode(errors="ignore") + "..."
    return text


# -- the walk -------------------------------------------------------------------------------------


def json_kind(value: Any) -> str:
    """What ``value`` is in JSON's words: ``null``, ``true``, ``a string``, ``an array``, ..."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    return "an object" if isinstance(value, dict) else "a value of another kind"


def time_text(at: datetime) -> str:
    """A time as every surface writes it, in a body or in words: ISO 8601, UTC as ``Z``
    ("2026-05-01T12:05:00Z", as pydantic writes the bodies' times; not ``+00:00``)."""
    return str(to_jsonable_python(at))


def read_json_text(text: str) -> Any:
    """``text``'s JSON value, read as every surface reads what a person or client sends:
    ``ValueError`` for what is no JSON, ``NaN`` and ``Infinity``, and a name given twice in one
    object (a proxy or log in front may read the first one: an approval it took for a denial);
    ``RecursionError`` for nesting too deep to read."""
    return _DECODER.decode(text)


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON number")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        twice = next(name for name, _ in pairs if name in seen or seen.add(name))  # type: ignore[func-returns-value]
        raise ValueError(f"the name {twice!r} is given twice in one object")
    return found


_DECODER = json.JSONDecoder(parse_constant=_not_json, object_pairs_hook=_object)


class _Foreign(Exception):
    """A value that is not plain JSON data: convert first (``to_jsonable_python``), then check."""

    def __init__(self, value: Any) -> None:
        self.value = value


_POW10: dict[int, int] = {}


def _int_bound(digits: int) -> int:
    bound = _POW10.get(digits)
    if bound is None:
        bound = _POW10[digits] = 10**digits
    return bound


def _check(value: Any, limits: JsonLimits, depth: int) -> None:
    # The loops test the common scalars inline (a call per leaf would double the cost); anything
    # else — containers, long or non-ASCII strings, large integers, odd floats — is checked by a
    # recursive call, which also records where a problem was found.
    kind = type(value)
    if kind is dict or kind is list:
        if depth >= limits.max_depth:
            raise _too_deep(limits)
        longest: int = limits.max_string_bytes  # type: ignore[assignment]
        for key, item in value.items() if kind is dict else enumerate(value):
            if kind is dict and (type(key) is not str or not key.isascii() or len(key) > longest):
                if type(key) is not str:
                    raise _Foreign(key)
                try:
                    _check_str(key, limits)
                except NotJsonData as exc:
                    exc._inner.append(key)
                    raise
            leaf = type(item)
            if leaf is str:
                if item.isascii() and len(item) <= longest:
                    continue
            elif leaf is int:
                if item.bit_length() <= 60:
                    continue
            elif leaf is float:
                if item - item == 0.0:
                    continue
            elif item is None or leaf is bool:
                continue
            try:
                _check(item, limits, depth + 1)
            except NotJsonData as exc:
                exc._inner.append(key)
                raise
    elif kind is str:
        _check_str(value, limits)
    elif kind is int:
        if value.bit_length() > 60 and abs(value) >= _int_bound(limits.max_int_digits):
            raise NotJsonData(
                f"an integer of more than {limits.max_int_digits} digits", "max_int_digits", limits.max_int_digits
            )
    elif kind is float:
        if value - value != 0.0:  # NaN and ±Infinity (inf - inf is NaN)
            raise NotJsonData(
                f"{value} is not a JSON number (NaN and Infinity are not JSON; a number beyond what a double "
                "holds, ±1.8e308, such as 1e400, reads as an infinity)",
                "finite_number",
            )
    elif value is not None and kind is not bool:
        raise _Foreign(value)


def _check_str(text: str, limits: JsonLimits) -> None:
    limit: int = limits.max_string_bytes  # type: ignore[assignment]
    if text.isascii():
        size = len(text)
    else:
        try:
            size = len(text.encode())
        except UnicodeEncodeError as exc:
            raise NotJsonData(
                f"a lone surrogate ({text[exc.start]!a}) at character {exc.start}: not encodable as UTF-8",
                "unpaired_surrogate",
            ) from None
    if size > limit:
        raise NotJsonData(f"a string of {size} bytes; the limit is {limit}", "max_string_bytes", limit)


def _too_deep(limits: JsonLimits) -> NotJsonData:
    return NotJsonData(f"nested more than {limits.max_depth} levels deep", "max_depth", limits.max_depth)


def _conversion_error(exc: Exception, limits: JsonLimits) -> NotJsonData:
    text = printable(str(exc), 500)
    if "depth" in text or "recursion" in text.lower():
        return _too_deep(limits)
    return NotJsonData(f"not JSON data: {text}", "json_type")


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _segment(part: str | int) -> str:
    if isinstance(part, int):
        return f"[{part}]"
    if _IDENTIFIER.match(part):
        return "." + part
    return "[" + json.dumps(part) + "]"  # ASCII: a lone surrogate in a key is shown escaped
