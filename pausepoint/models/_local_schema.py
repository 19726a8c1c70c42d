"""JSON Schema to GBNF rules: the grammar a local model's tool arguments are decoded under.

pausepoint's own converter, so the grammar does not depend on the runtime's (llama.cpp's JSON
schema converter emits llguidance syntax in the runtime we ship). It narrows what it
understands and leaves the rest to the runtime's input validation, so it never fails:

- enforced: ``type`` (one or a list), ``properties`` with ``required`` (declared properties
  only, in schema order), ``additionalProperties`` as a schema for objects without declared
  properties, ``items`` / ``prefixItems``, ``minItems`` / ``maxItems``, ``minLength`` /
  ``maxLength``, ``enum``, ``const``, ``anyOf`` / ``oneOf``, ``allOf`` of one schema, local
  ``$ref`` (``#/$defs/...``, ``#/definitions/...``, ``#``), recursion included;
- left to validation: ``pattern``, ``format``, numeric bounds, ``not``, conditionals, and
  anything else, which the grammar treats as "any JSON value" of the declared type.

Lengths and counts are enforced up to ``MAX_BOUND``; larger bounds are left to validation (a
repetition bound becomes that many grammar rules). Rule names are ``<prefix>-<path>``, so the
rules of several tools can share one grammar without clashing.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["MAX_BOUND", "SchemaRules", "literal"]

MAX_BOUND = 256

# JSON primitives: strings of what JSON allows unescaped (no control characters, which also
# stops a runaway multi-line string), bounded digit runs, at most one line break of layout.
PRIMITIVES = {
    "space": '| " " | "\\n" [ \\t]{0,20}',
    "char": '[^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4})',
    "string": '"\\"" char* "\\"" space',
    "integer": '"-"? ([0-9] | [1-9] [0-9]{0,15}) space',
    "number": '"-"? ([0-9] | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,5})? space',
    "boolean": '("true" | "false") space',
    "null": '"null" space',
    "value": "object | array | string | number | boolean | null",
    "object": '"{" space (string ":" space value ("," space string ":" space value)*)? "}" space',
    "array": '"[" space (value ("," space value)*)? "]" space',
}
_TYPES = ("string", "integer", "number", "boolean", "null", "object", "array")


def literal(text: str) -> str:
    """``text`` as a GBNF string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def _json_literal(value: Any) -> str:
    return f"{literal(json.dumps(value, ensure_ascii=False))} space"


class SchemaRules:
    """Builds rules for the schemas of one grammar; ``rules`` maps each rule name to its body.

    ``rule_for(schema, prefix)`` returns the name of a rule matching JSON values valid under
    ``schema`` (followed by optional layout), adding what it needs to ``rules``.
    """

    def __init__(self) -> None:
        self.rules: dict[str, str] = {}

    def rule_for(self, schema: Any, prefix: str) -> str:
        self._root = schema
        self._prefix = prefix
        self._refs: dict[str, str] = {}
        return self._named(schema, prefix)

    # -- rules ---------------------------------------------------------------------------------

    def _named(self, schema: Any, name: str) -> str:
        """A rule called ``name`` (made unique) for ``schema``; primitives are used directly."""
        body = self._body(schema, name)
        if re.fullmatch(r"[A-Za-z0-9-]+", body):  # a primitive or a definition's rule: no alias
            return self._primitive(body) if body in PRIMITIVES else body
        name = self._unique(name)
        self.rules[name] = body
        return name

    def _primitive(self, name: str) -> str:
        for needed in {"string": ("space", "char"), "value": tuple(PRIMITIVES)}.get(name, ("space",)):
            self.rules.setdefault(needed, PRIMITIVES[needed])
        if name in ("object", "array"):
            self._primitive("value")
        self.rules.setdefault(name, PRIMITIVES[name])
        return name

    def _unique(self, name: str) -> str:
        name = re.sub(r"[^A-Za-z0-9-]+", "-", name).strip("-") or "rule"
        if name not in self.rules and name not in PRIMITIVES:
            return name
        i = 2
        while f"{name}-{i}" in self.rules:
            i += 1
        return f"{name}-{i}"

    def _body(self, schema: Any, name: str) -> str:
        if schema is True or not isinstance(schema, dict):
            return self._primitive("value")
        if "$ref" in schema and isinstance(schema["$ref"], str):
            return self._ref(schema["$ref"])
        if "const" in schema:
            return _json_literal(schema["const"])
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return " | ".join(_json_literal(v) for v in schema["enum"])
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                base = {k: v for k, v in schema.items() if k != key}
                return " | ".join(
                    self._named({**base, **o} if isinstance(o, dict) else o, f"{name}-{i}")
                    for i, o in enumerate(options)
                )
        if isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
            base = {k: v for k, v in schema.items() if k != "allOf"}
            only = schema["allOf"][0]
            return self._body({**base, **only} if isinstance(only, dict) else only, name)
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k in _TYPES]
            if not kinds:
                return self._primitive("value")
            return " | ".join(self._named({**schema, "type": k}, f"{name}-{k}") for k in kinds)
        if kind not in _TYPES:
            if "properties" in schema:
                kind = "object"
            elif "items" in schema or "prefixItems" in schema:
                kind = "array"
            else:
                return self._primitive("value")
        if kind == "object":
            return self._object(schema, name)
        if kind == "array":
            return self._array(schema, name)
        if kind == "string":
            return self._string(schema)
        return self._primitive(kind)

    def _ref(self, ref: str) -> str:
        if ref in self._refs:
            return self._refs[ref]
        target: Any = self._root
        if ref != "#":
            if not ref.startswith("#/"):
                return self._primitive("value")  # remote references are never fetched
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, dict) or part not in target:
                    return self._primitive("value")
                target = target[part]
        name = self._unique(f"{self._prefix}-{ref.rsplit('/', 1)[-1] if ref != '#' else 'root'}")
        self._refs[ref] = name
        self.rules[name] = "value"  # a placeholder that also reserves the name while recursing
        self.rules[name] = self._body(target, name)
        return name

    def _object(self, schema: dict[str, Any], name: str) -> str:
        properties = schema.get("properties")
        if not isinstance(properties, dict) or not properties:
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict):
                value = self._named(extra, f"{name}-value")
                pair = f'{self._primitive("string")} ":" space {value}'
                return f'"{{" space ({pair} ("," space {pair})*)? "}}" space'
            return self._primitive("object")
        listed = schema.get("required")
        required: list[Any] = listed if isinstance(listed, list) else []
        pairs = []
        for key, sub in properties.items():
            value = self._named(sub, f"{name}-{key}")
            pairs.append((key in required, f'{_json_literal(key)} ":" space {value}'))
        musts = [pair for must, pair in pairs if must]
        optional = [pair for must, pair in pairs if not must]
        body = ' "," space '.join(musts)
        if musts:
            for pair in optional:
                body += f' ("," space {pair})?'
        elif optional:
            body = f"({_optional_chain(optional)})?"
        return f'"{{" space {body} "}}" space'

    def _array(self, schema: dict[str, Any], name: str) -> str:
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list) and prefix:
            items = [self._named(s, f"{name}-{i}") for i, s in enumerate(prefix)]
            return '"[" space ' + ' "," space '.join(items) + ' "]" space'
        item = self._named(schema.get("items", True), f"{name}-item")
        low, high = _bounds(schema, "minItems", "maxItems")
        if high == 0:
            return '"[" space "]" space'
        rest = _repeat(f'"," space {item}', max(low - 1, 0), None if high is None else high - 1)
        listed = f"{item} {rest}".strip()
        return f'"[" space {listed} "]" space' if low >= 1 else f'"[" space ({listed})? "]" space'

    def _string(self, schema: dict[str, Any]) -> str:
        low, high = _bounds(schema, "minLength", "maxLength")
        if low == 0 and high is None:
            return self._primitive("string")
        self._primitive("string")
        return f'"\\"" {_repeat("char", low, high)} "\\"" space'


def _optional_chain(pairs: list[str]) -> str:
    """Any non-empty ordered subset of ``pairs``, comma-separated (for all-optional objects)."""
    first, rest = pairs[0], pairs[1:]
    tail = "".join(f' ("," space {pair})?' for pair in rest)
    if not rest:
        return first
    return f"{first}{tail} | {_optional_chain(rest)}"


def _bounds(schema: dict[str, Any], low_key: str, high_key: str) -> tuple[int, int | None]:
    low, high = schema.get(low_key, 0), schema.get(high_key)
    low = low if isinstance(low, int) and not isinstance(low, bool) and 0 <= low <= MAX_BOUND else 0
    if not isinstance(high, int) or isinstance(high, bool) or high < low or high > MAX_BOUND:
        high = None
    return low, high


def _repeat(item: str, low: int, high: int | None) -> str:
    if high is not None and high == 0:
        return ""
    if high is None:
        return f"({item}){{{low},}}" if low else f"({item})*"
    return f"({item}){{{low},{high}}}"
