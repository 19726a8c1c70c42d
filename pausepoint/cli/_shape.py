"""A JSON schema as one line a person can type against: ``{"approved": boolean, "feedback"?: string}``.

The terminal chat shows it before asking for an answer as JSON. It reads the schemas pydantic
writes (objects, arrays, enums, unions, ``$ref`` into ``$defs``); what it does not know reads
as ``any``.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["shape"]


def shape(schema: dict[str, Any] | None) -> str:
    """``schema`` in one line; ``any JSON value`` when there is none."""
    if not schema:
        return "any JSON value"
    return _shape(schema, schema.get("$defs", {}), depth=0)


def _shape(schema: Any, defs: dict[str, Any], depth: int) -> str:
    if not isinstance(schema, dict) or depth > 6:
        return "any"
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _shape(defs.get(ref.removeprefix("#/$defs/")), defs, depth + 1)
    if "const" in schema:
        return json.dumps(schema["const"])
    if "enum" in schema:
        return " | ".join(json.dumps(value) for value in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " | ".join(_shape(option, defs, depth + 1) for option in schema[key])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_shape({**schema, "type": k}, defs, depth) for k in kind)
    if kind == "object" and "properties" in schema:
        required = set(schema.get("required", []))
        fields = [
            f"{json.dumps(name)}{'' if name in required else '?'}: {_shape(field, defs, depth + 1)}"
            for name, field in schema["properties"].items()
        ]
        return "{" + ", ".join(fields) + "}"
    if kind == "array":
        return f"[{_shape(schema.get('items'), defs, depth + 1)}, ...]"
    if isinstance(kind, str):
        return kind
    return "any"
