"""Limits on what a request may carry, and reading a JSON body within them.

A body is read in pieces and abandoned as soon as it passes ``max_body_bytes`` (whatever its
``Content-Length`` claimed), so a huge upload costs the server at most the limit. Malformed
JSON, a body that is not an object, and fields of the wrong type are ``InvalidRequest`` (400);
a body or a user message over its limit is ``RequestTooLarge`` (413); a send to a session whose
log holds ``max_history`` records is ``HistoryTooLong`` (422).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from ..content._jsondata import json_kind, read_json_text
from ..errors import DefinitionError, HistoryTooLong, InvalidRequest, RequestTooLarge
from ..runtime._arguments import MAX_OFFSET
from ..stores import SessionSummary
from ._params import ascii_int

__all__ = [
    "MAX_OFFSET",
    "MAX_PAGE",
    "Limits",
    "check_history",
    "check_message_size",
    "parse_body",
    "parse_json",
    "read_body",
    "read_json",
]

M = TypeVar("M", bound=BaseModel)


#: ``Limits.max_page``'s default
MAX_PAGE = 500


@dataclass(frozen=True, slots=True)
class Limits:
    """What one request may carry. All sizes are in bytes of JSON."""

    #: the whole request body
    max_body_bytes: int = 1024 * 1024
    #: one user message (its parts, encoded as JSON)
    max_message_bytes: int = 256 * 1024
    #: records in a session's log (messages, pauses, answers, turn ends) beyond which sends are refused
    max_history: int = 10_000
    #: the most sessions one listing returns
    max_page: int = MAX_PAGE

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_message_bytes", "max_history", "max_page"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise DefinitionError(f"Limits.{name} must be a whole number of at least 1, not {value!r}")


async def read_json(request: Request, limits: Limits) -> dict[str, Any]:
    """The request's JSON object. Raises ``RequestTooLarge`` or ``InvalidRequest``."""
    body = await read_body(request, limits)
    if not body:
        return {}
    value = parse_json(body)
    if not isinstance(value, dict):
        raise InvalidRequest(f"the request body must be a JSON object, not {json_kind(value)}")
    return value


def parse_json(body: bytes) -> Any:
    """``body``'s JSON value, read as every surface reads a request (a name given twice in one
    object, ``NaN``, an integer of more than 4,300 digits: ``InvalidRequest``)."""
    encoding = json.detect_encoding(body)
    if encoding != "utf-8":  # json.loads would read UTF-16 and UTF-32 too, and skip a BOM: not every surface
        shown = "UTF-8 with a byte-order mark" if encoding == "utf-8-sig" else encoding.upper()
        raise InvalidRequest(f"the request body must be JSON in UTF-8 without a byte-order mark, not {shown}")
    try:
        text = body.decode("utf-8", "surrogatepass")  # a surrogate's bytes: refused later, by path
    except UnicodeDecodeError as exc:
        raise InvalidRequest(
            f"the request body is not UTF-8: byte {body[exc.start]:#04x} at offset {exc.start} (JSON is UTF-8)"
        ) from None
    try:
        value = read_json_text(text)
    except RecursionError:
        raise InvalidRequest("the request body is nested too deeply to parse") from None
    except ValueError as exc:
        if "integer string conversion" in str(exc):  # Python's advice is for the server, not the caller
            raise InvalidRequest("the request body holds an integer of more than 4,300 digits") from None
        raise InvalidRequest(f"the request body is not valid JSON: {exc}") from None
    return value


async def read_body(request: Request, limits: Limits) -> bytes:
    """The request's body, abandoned (``RequestTooLarge``) as soon as it passes the limit."""
    declared = request.headers.get("content-length")
    if declared is not None and ascii_int(declared, "the Content-Length header") > limits.max_body_bytes:
        raise RequestTooLarge(
            f"the request body of {declared} bytes exceeds the limit of {limits.max_body_bytes} bytes",
            limit=limits.max_body_bytes,
        )
    body = bytearray()
    async for piece in request.stream():
        body += piece
        if len(body) > limits.max_body_bytes:
            raise RequestTooLarge(
                f"the request body exceeds the limit of {limits.max_body_bytes} bytes", limit=limits.max_body_bytes
            )
    return bytes(body)


def parse_body(model: type[M], value: Any, *, where: str = "body") -> M:
    """``value`` validated as ``model``; ``InvalidRequest`` naming every problem otherwise."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        path = getattr(model, "error_path", tuple)
        problems = [
            {"loc": [where, *(str(p) for p in path(e["loc"]))], "message": _wire_message(e), "type": e["type"]}
            for e in exc.errors(include_url=False)
        ]
        summary = "; ".join(f"{'.'.join(p['loc'])}: {p['message']}" for p in problems[:5])
        raise InvalidRequest(f"invalid request: {summary}", problems=problems) from None


# What pydantic would say in Python's words ("a valid dictionary or instance of _Message",
# "a valid list", "None"), said in JSON's, for every model a surface parses.
_JSON_WANTED = {
    "model_type": "a JSON object",
    "model_attributes_type": "a JSON object",
    "dataclass_type": "a JSON object",
    "dict_type": "a JSON object",
    "list_type": "a JSON array",
    "tuple_type": "a JSON array",
    "set_type": "a JSON array",
    "frozen_set_type": "a JSON array",
    "none_required": "null",
    "string_type": "a string",
    "bool_type": "true or false",
    "int_type": "an integer",
    "float_type": "a number",
}


def _wire_message(error: Any) -> str:
    if error["type"] == "unexpected_keyword_argument":  # a dataclass's words for a key not expected
        return "Extra inputs are not permitted"
    wanted = _JSON_WANTED.get(error["type"])
    if wanted is None:
        return str(error["msg"])
    return f"Input should be {wanted}, not {json_kind(error.get('input'))}"


def check_message_size(parts: Any, limits: Limits) -> None:
    # Its JSON's bytes in UTF-8, as a client sends it: ``\u`` escapes would count a character
    # outside ASCII as 6 or 12 bytes (a lone surrogate is refused later, by the session).
    try:
        text = json.dumps(parts, separators=(",", ":"), default=str, ensure_ascii=False)
    except RecursionError:
        raise InvalidRequest("the message is nested too deeply to be read") from None
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.max_message_bytes:
        raise RequestTooLarge(
            f"the message of {size} bytes exceeds the limit of {limits.max_message_bytes} bytes",
            size=size,
            limit=limits.max_message_bytes,
        )


def check_history(summary: SessionSummary | None, limits: Limits) -> None:
    if summary is not None and summary.version >= limits.max_history:
        raise HistoryTooLong(
            f"session {summary.session_id!r} holds {summary.version} records, the limit is {limits.max_history}: "
            "start a new session",
            session_id=summary.session_id,
            limit=limits.max_history,
        )
