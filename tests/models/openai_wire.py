"""OpenAI's Chat Completions wire format, for scripting ``WireServer`` replies in tests.

``completion(...)`` is a ``/chat/completions`` JSON body; ``chunks(...)`` the same answer as the
SSE stream the API sends with ``stream: true`` (text in words, tool-call arguments in small
pieces, a usage chunk when asked, then ``[DONE]``). ``check_request`` applies the API's rules on
the request body (every assistant ``tool_calls`` entry answered by a ``tool`` message with its id,
right after it, each ``tool_call_id`` used once in the whole request), so a fake that uses it
refuses what the real API would refuse.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from .wire_server import Json, Reply, Sse, WireRequest

__all__ = ["check_request", "chunks", "completion", "error", "reply", "strict", "tool_call"]

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def tool_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """An assistant tool call; a string ``arguments`` is sent as is (it may be malformed JSON)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


def completion(
    content: str | None = None,
    calls: Sequence[dict[str, Any]] = (),
    *,
    finish_reason: str | None = None,
    refusal: str | None = None,
    prompt_tokens: int = 11,
    completion_tokens: int = 7,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    if calls:
        message["tool_calls"] = list(calls)
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason or _default_finish(calls)}],
        "usage": _usage(prompt_tokens, completion_tokens),
    }


def chunks(
    content: str | None = None,
    calls: Sequence[dict[str, Any]] = (),
    *,
    finish_reason: str | None = None,
    refusal: str | None = None,
    prompt_tokens: int = 11,
    completion_tokens: int = 7,
    piece: int = 3,
    usage: bool = True,
    done: bool = True,
) -> list[Any]:
    """The SSE events of a streamed answer. ``done=False`` cuts the stream before the end."""
    out: list[Any] = [_chunk({"role": "assistant", "content": ""})]
    for text, key in ((content, "content"), (refusal, "refusal")):
        if text:
            words = text.split(" ")
            out += [_chunk({key: w if i == len(words) - 1 else w + " "}) for i, w in enumerate(words)]
    for index, call in enumerate(calls):
        head = {"index": index, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"]}}
        out.append(_chunk({"tool_calls": [{**head, "function": {**head["function"], "arguments": ""}}]}))
        raw = call["function"]["arguments"]
        for i in range(0, len(raw), piece):
            out.append(_chunk({"tool_calls": [{"index": index, "function": {"arguments": raw[i : i + piece]}}]}))
    if not done:
        return out
    out.append(_chunk({}, finish_reason=finish_reason or _default_finish(calls)))
    if usage:
        out.append({**_chunk({}), "choices": [], "usage": _usage(prompt_tokens, completion_tokens)})
    out.append("[DONE]")
    return out


def reply(content: str | None = None, calls: Sequence[dict[str, Any]] = (), *, stream: bool, **options: Any) -> Reply:
    """A JSON or SSE reply carrying ``content`` and ``calls``."""
    if stream:
        return Sse(chunks(content, calls, **options))
    return Json(completion(content, calls, **options))


def error(
    status: int, text: str = "error", *, kind: str = "server_error", code: str | None = None, **headers: str
) -> Json:
    """An API error reply, e.g. ``error(429, kind="rate_limit_error", retry_after="0")``."""
    body = {"error": {"message": text, "type": kind, "param": None, "code": code}}
    return Json(body, status=status, headers={k.replace("_", "-"): v for k, v in headers.items()})


def check_request(body: Any) -> str | None:
    """What the real API would refuse in this request body, or None."""
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        return "you must provide a model parameter"
    if body.get("stream_options") is not None and not body.get("stream"):
        return "The 'stream_options' parameter is only allowed when 'stream' is enabled."
    for tool in body.get("tools") or []:
        if tool.get("type") != "function" or not _NAME.match(tool["function"].get("name", "")):
            return f"Invalid 'tools': {tool!r}"
    messages = body.get("messages") or []
    if not messages:
        return "messages: must not be empty"
    open_ids: list[str] = []
    answered: dict[str, int] = {}  # tool_call_id → the message that answered it
    for i, msg in enumerate(messages):
        role = msg.get("role")
        if role == "tool":
            if msg.get("tool_call_id") in answered:
                where = f"in messages[{answered[msg['tool_call_id']]}] and messages[{i}]"
                return f"Invalid parameter: Duplicate value for 'tool_call_id' of '{msg['tool_call_id']}' {where}."
            if msg.get("tool_call_id") not in open_ids:
                return f"messages.[{i}].role: 'tool' must answer a preceding message with 'tool_calls'"
            answered[msg["tool_call_id"]] = i
            if not isinstance(msg.get("content"), str):
                return f"messages.[{i}].content: expected a string"
            open_ids.remove(msg["tool_call_id"])
            continue
        if open_ids:
            return f"An assistant message with 'tool_calls' must be followed by tool messages for {open_ids}"
        if role == "assistant":
            calls = msg.get("tool_calls") or []
            if msg.get("content") is None and not calls:
                return f"messages.[{i}].content: required unless tool_calls is given"
            for j, call in enumerate(calls):
                if not isinstance(call.get("function", {}).get("arguments"), str):
                    return f"messages.[{i}].tool_calls: function.arguments must be a string"
                if not _NAME.match(call.get("function", {}).get("name", "")):
                    return f"Invalid 'messages[{i}].tool_calls[{j}].function.name': string does not match pattern"
            open_ids = [call["id"] for call in calls]
        elif role not in ("system", "developer", "user"):
            return f"messages.[{i}].role: invalid role {role!r}"
    if open_ids:
        return f"An assistant message with 'tool_calls' must be followed by tool messages for {open_ids}"
    return None


def strict(handler: Callable[[WireRequest], Reply]) -> Callable[[WireRequest], Reply]:
    """``handler`` behind ``check_request``: an invalid request gets the API's 400."""

    def checked(request: WireRequest) -> Reply:
        problem = check_request(request.body)
        if problem is not None:
            return error(400, problem, kind="invalid_request_error")
        return handler(request)

    return checked


def _default_finish(calls: Sequence[dict[str, Any]]) -> str:
    return "tool_calls" if calls else "stop"


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _chunk(delta: dict[str, Any], *, finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
