"""What the MCP endpoint refuses before the SDK reads a request, and how it says so.

A request the SDK would drop or answer in its own words — another JSON-RPC version, an ``id`` a
reply cannot name — is refused as a JSON-RPC error (``refuse_unanswerable``, ``refusal``). Text
no session keeps (a lone surrogate: the SDK's parser fails on it) is refused as REST refuses it:
in a tool's arguments, as the tool's error ``invalid_message: ...`` (``send_message``) or
``invalid_answer: ...`` (``answer_pause``) naming the argument's path and the rule, as every
other refusal of a tool reads over MCP; anywhere else, as a JSON-RPC error naming the request's
id (``unkeepable_text``).
"""

from __future__ import annotations

import json
import re
from typing import Any

import mcp.types as types
from starlette.responses import Response

from ..content._jsondata import MAX_DEPTH, MAX_INT_DIGITS, JsonLimits, NotJsonData, json_data, json_kind
from ..errors import InvalidAnswer, InvalidMessage, InvalidRequest, PausepointError
from ._errors import dumps, error_body, error_response

__all__ = ["refusal", "refuse_unanswerable", "unkeepable_text"]

# a \\uD800-\\uDFFF escape, or the raw bytes of a surrogate (read with surrogatepass)
_MAY_HOLD_SURROGATE = re.compile(rb"\\[uU][dD][89a-fA-F]|\xed[\xa0-\xbf]")
_ANY_SIZE = JsonLimits(max_depth=MAX_DEPTH, max_int_digits=MAX_INT_DIGITS, max_string_bytes=2**62)
# the tools whose arguments are recorded: what REST calls their refusal
_RECORDED: dict[str, tuple[type[PausepointError], str]] = {
    "send_message": (InvalidMessage, "message"),
    "answer_pause": (InvalidAnswer, "answer"),
}


def refuse_unanswerable(message: Any) -> None:
    """``InvalidRequest`` for a message the SDK would drop or refuse in its own words (pydantic's,
    naming its classes): no JSON object, one of another JSON-RPC version, a method that is no
    string, params that are no object, or a request whose ``id`` a reply cannot name (MCP: a
    string or an integer) — the SDK took such a request for a notification, 202 and no answer."""
    if not isinstance(message, dict):
        raise InvalidRequest(f"an MCP request is one JSON-RPC message, a JSON object, not {json_kind(message)}")
    if message.get("jsonrpc") != "2.0":
        given = json.dumps(message["jsonrpc"])[:40] if "jsonrpc" in message else "missing"
        raise InvalidRequest(f'an MCP message is JSON-RPC 2.0 ("jsonrpc": "2.0"), not {given}')
    if "method" not in message and not ("id" in message and ("result" in message or "error" in message)):
        raise InvalidRequest("an MCP message has a method (a request, a notification) or an id and a result or error")
    if "method" in message and not isinstance(message["method"], str):
        raise InvalidRequest(f"a message's method is a string, not {json_kind(message['method'])}")
    if "params" in message and not isinstance(message["params"], dict):
        raise InvalidRequest(f"a message's params are a JSON object, not {json_kind(message['params'])}")
    if "method" in message and "id" in message:
        given = message["id"]
        if isinstance(given, bool) or not isinstance(given, str | int):
            raise InvalidRequest(f"a request's id is a string or an integer, not {json.dumps(given)[:40]}")


def unkeepable_text(body: bytes, message: Any) -> Response | None:
    """The answer to a request (``message``, read from ``body``) holding text no session keeps —
    a lone surrogate — or None when it holds none."""
    if not _MAY_HOLD_SURROGATE.search(body):
        return None
    request = message if isinstance(message, dict) else {}
    params = request.get("params")
    tool = params.get("name") if request.get("method") == "tools/call" and isinstance(params, dict) else None
    recorded = _RECORDED.get(tool) if isinstance(tool, str) else None
    if recorded is not None and isinstance(params, dict) and "id" in request:
        found = _lone_surrogate(params.get("arguments"))
        if found is not None:
            kind, what = recorded
            error = kind(f"the {what} cannot be recorded: {found}", **found.details())
            said = f"Error executing tool {tool}: {error.code}: {error.message}"  # as the SDK's server says one
            result = {"content": [{"type": "text", "text": said}], "isError": True}
            answer = {"jsonrpc": "2.0", "id": request["id"], "result": result}
            return Response(dumps(answer), media_type="application/json")
    found = _lone_surrogate(message)
    if found is None:
        return None
    refused = InvalidRequest(f"the request holds text no session keeps: {found}", **found.details())
    return refusal(refused, request.get("id"))


def _lone_surrogate(value: Any) -> NotJsonData | None:
    """Where ``value`` holds a lone surrogate (its path from ``value``, and the rule), or None."""
    try:
        json_data(value, _ANY_SIZE)
    except NotJsonData as exc:
        if exc.rule == "unpaired_surrogate":
            return exc
    return None


def refusal(exc: PausepointError, request_id: str | int | None = None) -> Response:
    """The app's error response for a request refused before the MCP server saw it (401 with
    its ``WWW-Authenticate``, say), its body a JSON-RPC error: an MCP client reads the reason
    from that (the SDK's client replaces any other body at an error status with "Server returned
    an error response"). The app's error body is the error's ``data``; the id is the request's
    when it was read (an unauthenticated body is not: null)."""
    app = error_response(exc)
    error = {"code": types.INVALID_REQUEST, "message": f"{exc.code}: {exc.message}", "data": error_body(exc)["error"]}
    headers = {k: v for k, v in app.headers.items() if k.lower() not in ("content-length", "content-type")}
    body = dumps({"jsonrpc": "2.0", "id": request_id, "error": error})
    return Response(body, status_code=app.status_code, media_type="application/json", headers=headers)
