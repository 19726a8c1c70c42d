"""Gemini Developer API wire shapes for tests: ``generateContent`` replies and their SSE chunks.

Each helper returns the JSON the API sends (camelCase), so a test reads like the wire.
"""

from __future__ import annotations

from typing import Any

from tests.models.wire_server import Json, WireRequest

__all__ = [
    "api_error",
    "call",
    "camel",
    "content_text",
    "function_calls",
    "function_responses",
    "reply",
    "text",
    "usage",
]


def text(value: str, **extra: Any) -> dict[str, Any]:
    return {"text": value, **extra}


def call(name: str, args: dict[str, Any], *, id: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "args": args}
    if id is not None:
        body["id"] = id
    return {"functionCall": body, **extra}


def usage(prompt: int, candidates: int, thoughts: int | None = None) -> dict[str, Any]:
    found = {"promptTokenCount": prompt, "candidatesTokenCount": candidates}
    if thoughts is not None:
        found["thoughtsTokenCount"] = thoughts
    found["totalTokenCount"] = prompt + candidates + (thoughts or 0)
    return found


def reply(
    *parts: dict[str, Any],
    finish: str | None = "STOP",
    tokens: dict[str, Any] | None = None,
    **candidate: Any,
) -> dict[str, Any]:
    """One ``GenerateContentResponse`` (a whole reply, or one SSE chunk of a stream)."""
    body: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0, **candidate}
    if finish is not None:
        body["finishReason"] = finish
    found: dict[str, Any] = {"candidates": [body], "modelVersion": "gemini-test"}
    if tokens is not None:
        found["usageMetadata"] = tokens
    return found


def api_error(status: int, state: str, message: str, *details: dict[str, Any], **headers: str) -> Json:
    """A Google API error reply (``{"error": {"code", "message", "status", "details"}}``)."""
    error: dict[str, Any] = {"code": status, "message": message, "status": state}
    if details:
        error["details"] = list(details)
    return Json({"error": error}, status=status, headers=dict(headers))


# -- reading what the SDK sent ------------------------------------------------------------------


def function_calls(request: WireRequest) -> list[dict[str, Any]]:
    """Every ``functionCall`` part of the request's contents, in order."""
    return [p["functionCall"] for c in request.body["contents"] for p in c["parts"] if "functionCall" in p]


def function_responses(request: WireRequest) -> list[dict[str, Any]]:
    """Every ``functionResponse`` part of the request's contents, in order."""
    return [p["functionResponse"] for c in request.body["contents"] for p in c["parts"] if "functionResponse" in p]


def content_text(content: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in content["parts"])


def camel(value: Any) -> Any:
    """``value`` with every dict key in camelCase: the SDK sends some fields snake_case, which
    the API accepts as well (protobuf JSON). Only for SDK-made structures, never user data."""
    if isinstance(value, dict):
        return {_camel(k): camel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [camel(v) for v in value]
    return value


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(word.title() for word in rest)
