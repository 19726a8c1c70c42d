"""Anthropic's Messages API wire format, for scripting ``WireServer`` replies in tests.

``message(...)`` is a ``/v1/messages`` JSON body; ``events(...)`` the same message as the SSE
event stream the API sends with ``stream: true``. ``check_request`` applies the API's rules on
the request body (alternating roles, call ids of ``^[a-zA-Z0-9_-]+$`` only, each used by one
``tool_use`` in the whole request, every ``tool_use`` answered by a ``tool_result`` with its id
in the next user message), so a fake that uses it refuses what the real API would refuse.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from .wire_server import Json, Reply, Sse

__all__ = ["check_request", "error", "events", "message", "reply", "stream_error", "text", "thinking", "tool_use"]

#: the call ids the API takes, in ``tool_use.id`` and ``tool_result.tool_use_id``
CALL_ID = re.compile(r"[a-zA-Z0-9_-]+")


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def thinking(value: str, signature: str) -> dict[str, Any]:
    """A thinking block (extended thinking), which must come back unchanged."""
    return {"type": "thinking", "thinking": value, "signature": signature}


def tool_use(call_id: str, name: str, input: Any) -> dict[str, Any]:
    """A tool_use block; in ``events`` a string ``input`` is streamed as raw argument text."""
    return {"type": "tool_use", "id": call_id, "name": name, "input": input}


def message(
    blocks: Sequence[dict[str, Any]],
    *,
    stop_reason: str | None = "end_turn",
    input_tokens: int = 11,
    output_tokens: int = 7,
    model: str = "claude-test",
    **usage: int,
) -> dict[str, Any]:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(blocks),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens, **usage},
    }


def events(
    blocks: Sequence[dict[str, Any]],
    *,
    stop_reason: str | None = "end_turn",
    input_tokens: int = 11,
    output_tokens: int = 7,
    piece: int = 4,
    stop: bool = True,
) -> list[tuple[str, Any]]:
    """The SSE events of a streamed message: text in words, tool arguments in ``piece``-sized bits."""
    start = message([], stop_reason=None, input_tokens=input_tokens, output_tokens=1)
    out: list[tuple[str, Any]] = [("message_start", {"type": "message_start", "message": start})]
    out.append(("ping", {"type": "ping"}))
    for index, block in enumerate(blocks):
        if block["type"] == "thinking":
            head = {"type": "thinking", "thinking": "", "signature": ""}
            out.append(_event("content_block_start", index=index, content_block=head))
            for i in range(0, len(block["thinking"]), piece):
                delta = {"type": "thinking_delta", "thinking": block["thinking"][i : i + piece]}
                out.append(_event("content_block_delta", index=index, delta=delta))
            delta = {"type": "signature_delta", "signature": block["signature"]}
            out.append(_event("content_block_delta", index=index, delta=delta))
        elif block["type"] == "redacted_thinking":
            out.append(_event("content_block_start", index=index, content_block=dict(block)))
        elif block["type"] == "text":
            out.append(_event("content_block_start", index=index, content_block={"type": "text", "text": ""}))
            words = block["text"].split(" ")
            for i, word in enumerate(words):
                chunk = word if i == len(words) - 1 else word + " "
                out.append(_event("content_block_delta", index=index, delta={"type": "text_delta", "text": chunk}))
        else:
            head = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            out.append(_event("content_block_start", index=index, content_block=head))
            raw = block["input"] if isinstance(block["input"], str) else json.dumps(block["input"])
            for i in range(0, len(raw), piece):
                delta = {"type": "input_json_delta", "partial_json": raw[i : i + piece]}
                out.append(_event("content_block_delta", index=index, delta=delta))
        out.append(_event("content_block_stop", index=index))
    if stop:
        delta = {"stop_reason": stop_reason, "stop_sequence": None}
        out.append(_event("message_delta", delta=delta, usage={"output_tokens": output_tokens}))
        out.append(_event("message_stop"))
    return out


def error(status: int, kind: str, text: str = "error", **headers: str) -> Json:
    """An API error reply, e.g. ``error(429, "rate_limit_error", **{"retry-after": "0"})``."""
    body = {"type": "error", "error": {"type": kind, "message": text}}
    return Json(body, status=status, headers={k.replace("_", "-"): v for k, v in headers.items()})


def stream_error(kind: str, text: str = "error") -> tuple[str, Any]:
    """An ``error`` event inside a 200 stream."""
    return ("error", {"type": "error", "error": {"type": kind, "message": text}})


def reply(blocks: Sequence[dict[str, Any]], *, stream: bool, **options: Any) -> Reply:
    """A JSON or SSE reply carrying ``blocks``."""
    return Sse(events(blocks, **options)) if stream else Json(message(blocks, **options))


def check_request(body: dict[str, Any]) -> str | None:
    """What the real API would refuse in this request body, or None."""
    if not isinstance(body.get("max_tokens"), int):
        return "max_tokens: Field required"
    messages = body.get("messages") or []
    if not messages or messages[0]["role"] != "user":
        return "messages: the first message must use the user role"
    for before, after in pairwise(messages):
        if before["role"] == after["role"]:
            return "messages: roles must alternate between user and assistant"
    used_ids: set[str] = set()  # the API refuses a tool_use id used twice anywhere in the request
    for i, msg in enumerate(messages):
        content = msg["content"]
        if isinstance(content, str):
            continue
        for j, block in enumerate(content):
            if block["type"] == "tool_use":
                if block["id"] in used_ids:
                    return f"messages.{i}.content.{j}: `tool_use` ids must be unique"
                used_ids.add(block["id"])
            if block["type"] == "text" and not block["text"]:
                return f"messages.{i}: text content blocks must be non-empty"
            if block["type"] == "tool_use" and not isinstance(block["input"], dict):
                return f"messages.{i}: tool_use.input: Input should be a valid dictionary"
            id_field = {"tool_use": "id", "tool_result": "tool_use_id"}.get(block["type"])
            if id_field is not None and not CALL_ID.fullmatch(str(block.get(id_field))):
                where = f"messages.{i}.content.{j}.{block['type']}.{id_field}"
                return f"{where}: String should match pattern '^[a-zA-Z0-9_-]+$'"
        calls = [b["id"] for b in content if b["type"] == "tool_use"]
        if not calls or i + 1 == len(messages):
            continue
        if body.get("thinking") and content[0]["type"] not in ("thinking", "redacted_thinking"):
            return (
                f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                f"`{content[0]['type']}`. When `thinking` is enabled, a final `assistant` message must start "
                "with a thinking block"
            )
        following = messages[i + 1]["content"]
        kinds = [b["type"] for b in following] if isinstance(following, list) else ["text"]
        results = [b["tool_use_id"] for b in following if b["type"] == "tool_result"] if "tool_result" in kinds else []
        if sorted(results) != sorted(calls):
            return f"messages.{i + 1}: tool_use ids {calls} need tool_result blocks with the same ids, got {results}"
        if kinds[: len(results)] != ["tool_result"] * len(results):
            return f"messages.{i + 1}: tool_result blocks must come first"
    return None


def _event(kind: str, **data: Any) -> tuple[str, Any]:
    return (kind, {"type": kind, **data})
