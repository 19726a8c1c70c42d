"""The local model's output format: the grammar that constrains it and the parser that reads it.

A local model answers in exactly one of two shapes (after at most a few leading blanks):

- plain text, whose first character is not ``<``, so it can never be mistaken for a call;
- tool calls, each ``<tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>`` with
  ``arguments`` constrained to that tool's input schema; one per message, or up to
  ``MAX_PARALLEL_CALLS`` (one per line) when parallel calls are allowed.

Why this shape rather than one JSON object for everything (``{"answer": "..."}``): a plain answer
stays the free text a chat model was trained to write and to end with its end-of-turn token, so
it streams as it is decoded, and a tiny model never has to close a long JSON string; the choice
between the two shapes is made by the first character, and everything after ``<`` is forced to
be a valid call. ``<tool_call>`` is the Hermes/Qwen convention that chat models have seen.
Because an answer may continue with anything, the caller can drop the grammar once the first
character has chosen text (a grammar over the whole vocabulary costs time at every token).

The grammar is GBNF for llama.cpp. Argument rules come from llama.cpp's own JSON-schema converter
(``llama_cpp.llama_grammar.SchemaConverter``). Each tool's ``$defs`` are renamed apart first: the
converter names a rule after the last segment of its ``$ref``, so two tools' ``#/$defs/Item``
would otherwise share one rule. String characters are limited to what JSON allows unescaped (no
control characters), which also stops a runaway multi-line string. The grammar enforces
structure, types, ``enum``/``const``, required properties, string formats and lengths and array
lengths. Numeric bounds and regex patterns are left to the runtime's input validation (the
converter mistranslates common regex syntax), and a schema the converter cannot read at all
allows any JSON object for that tool: the tool stays usable, and the runtime reports a wrong
input to the model as that call's result.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from .._models import ToolDefinition

__all__ = [
    "CALL_CLOSE",
    "CALL_OPEN",
    "MAX_PARALLEL_CALLS",
    "OutputEvent",
    "OutputParser",
    "ParsedCall",
    "build_grammar",
    "parse_arguments",
    "render_call",
]

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"

#: the most calls one model message may make when parallel calls are allowed
MAX_PARALLEL_CALLS = 8

# JSON string characters: anything but quote, backslash and control characters, or an escape.
_JSON_CHAR = r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])'
_LEAD = "lead ::= [ \\t\\n]{0,4}"


def build_grammar(tools: Sequence[ToolDefinition], *, allow_text: bool, parallel: bool) -> str:
    """A GBNF grammar whose sentences are tool calls of ``tools`` or, if ``allow_text``, an answer.

    With no ``tools`` it allows only an answer (which then cannot start like a call); a
    ``ValueError`` if no answer is allowed either. Every input schema yields rules, loosened
    where the converter cannot follow it (see ``_argument_rules``).
    """
    answer = ["answer ::= [^<\\x00-\\x20] answer-char*", "answer-char ::= [^\\x00]"]
    if not tools:
        if not allow_text:
            raise ValueError("a grammar that allows no answer needs at least one tool")
        return "\n".join(["root ::= lead answer", _LEAD, *answer]) + "\n"
    rules: dict[str, str] = {}
    alternatives = []
    for index, tool in enumerate(tools):
        prefix = f"tool{index}"
        arguments = _argument_rules(tool.input_schema, prefix, rules)
        rules[f"{prefix}-call"] = (
            f'"{{" space "\\"name\\"" space ":" space {_literal(json.dumps(tool.name))} space "," space '
            f'"\\"arguments\\"" space ":" space {arguments} "}}"'
        )
        alternatives.append(f"{prefix}-call")
    if "char" in rules:
        rules["char"] = _JSON_CHAR
    lines = [
        f"root ::= lead ({'answer | calls' if allow_text else 'calls'})",
        _LEAD,
        "calls ::= call" + (f' ("\\n" call){{0,{MAX_PARALLEL_CALLS - 1}}}' if parallel else ""),
        f'call ::= "{CALL_OPEN}" ({" | ".join(alternatives)}) "{CALL_CLOSE}"',
    ]
    if allow_text:
        lines += answer
    lines += [f"{name} ::= {rule}" for name, rule in sorted(rules.items())]
    return "\n".join(lines) + "\n"


def _argument_rules(schema: dict[str, Any], prefix: str, rules: dict[str, str]) -> str:
    """Add the rules for arguments matching ``schema`` to ``rules``; return the top rule's name.

    Regex ``pattern`` keywords are left to the runtime's validation: the converter mistranslates
    common syntax (``\\d``, unanchored patterns) into grammars llama.cpp rejects. A schema the
    converter still cannot read becomes "any JSON object" rather than an error.
    """
    from llama_cpp.llama_grammar import SchemaConverter

    for loosen in (_without_patterns, lambda _: {"type": "object"}):
        # a fresh converter each time, so a failed attempt leaves no half-built rules behind
        converter: Any = cast(Any, SchemaConverter)(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
        try:
            resolved = converter.resolve_refs(_isolate_defs(loosen(schema), prefix), prefix)
            top = converter.visit(resolved, f"{prefix}-arguments")
        except Exception:  # noqa: S112 - the converter reports what it cannot read with asserts and KeyErrors
            continue
        for name, rule in converter._rules.items():
            if rules.setdefault(name, rule) != rule:
                raise ValueError(f"grammar rule {name!r} would be defined twice")
        return str(top)
    raise AssertionError("unreachable: any JSON object is always expressible")


def _literal(text: str) -> str:
    """``text`` as a GBNF string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def _without_patterns(schema: Any) -> Any:
    """A copy of ``schema`` without string ``pattern`` keywords (property names are kept)."""
    if isinstance(schema, list):
        return [_without_patterns(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        key: {name: _without_patterns(sub) for name, sub in value.items()}
        if key == "properties" and isinstance(value, dict)
        else _without_patterns(value)
        for key, value in schema.items()
        if not (key == "pattern" and isinstance(value, str))
    }


def _isolate_defs(schema: dict[str, Any], prefix: str) -> dict[str, Any]:
    """A copy of ``schema`` whose local definitions are renamed ``<prefix>-<name>``."""
    schema = copy.deepcopy(schema)
    renamed: dict[str, str] = {}
    for key in ("$defs", "definitions"):
        defs = schema.get(key)
        if isinstance(defs, dict):
            schema[key] = {f"{prefix}-{name}": value for name, value in defs.items()}
            renamed.update({f"#/{key}/{name}": f"#/{key}/{prefix}-{name}" for name in defs})

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref in renamed:
                node["$ref"] = renamed[ref]
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(schema)
    return schema


def render_call(name: str, arguments: Any) -> str:
    """A tool call as the model writes it, and reads it back in its history.

    A string ``arguments`` is the raw text of malformed arguments and is written as it was.
    """
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False, default=str)
    return f'{CALL_OPEN}{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": {raw}}}{CALL_CLOSE}'


def parse_arguments(raw: str) -> Any:
    """The arguments as JSON, or the raw text when they do not parse (the runtime reports that)."""
    try:
        return json.loads(raw, strict=False)
    except (ValueError, RecursionError):  # also an integer too long to read, or nesting too deep
        return raw


# -- reading the output ------------------------------------------------------------------------

_CALL_HEAD = re.compile(r'\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*')


@dataclass(slots=True)
class ParsedCall:
    """One tool call as read so far; ``arguments`` is the raw JSON text of its arguments."""

    name: str
    arguments: str = ""
    complete: bool = False


@dataclass(slots=True)
class OutputEvent:
    """What a piece of output made certain: answer text, or a call's start or arguments piece."""

    text: str = ""
    call_index: int | None = None
    call_name: str | None = None
    arguments_delta: str = ""


@dataclass
class OutputParser:
    """Reads the model's output incrementally, as it is decoded, in the format above.

    ``feed(text)`` yields events as soon as they are certain: answer text at once (blanks before
    the first character are dropped; that character decides between answer and calls), a call's
    name when its head is complete, then its arguments piece by piece (never the brace that
    closes the call object). ``expect`` says what the grammar allowed: only an answer, only
    calls, or either.
    """

    expect: Literal["text", "calls", "either"] = "either"
    text: str = ""
    calls: list[ParsedCall] = field(default_factory=list)
    mode: Literal["start", "text", "calls"] = "start"
    _state: Literal["tag", "head", "arguments"] = "tag"
    _buffer: str = ""
    _depth: int = 0
    _in_string: bool = False
    _escaped: bool = False

    def feed(self, chunk: str) -> Iterator[OutputEvent]:
        """Consume ``chunk`` of output; yield what it makes certain."""
        if not chunk:
            return
        if self.mode == "start":
            chunk = chunk.lstrip()
            if not chunk:
                return
            if self.expect == "either":
                self.mode = "calls" if chunk.startswith("<") else "text"
            else:
                self.mode = self.expect
        if self.mode == "text":
            self.text += chunk
            yield OutputEvent(text=chunk)
            return
        self._buffer += chunk
        yield from self._advance()

    def _advance(self) -> Iterator[OutputEvent]:
        while self._buffer:
            if self._state == "tag":
                start = self._buffer.find(CALL_OPEN)
                if start < 0:  # layout between calls; keep what may be the start of a tag
                    self._buffer = self._buffer[-(len(CALL_OPEN) - 1) :]
                    return
                self._buffer = self._buffer[start + len(CALL_OPEN) :]
                self._state = "head"
            elif self._state == "head":
                match = _CALL_HEAD.match(self._buffer)
                if match is None:
                    return
                name = json.loads(f'"{match[1]}"', strict=False)
                self.calls.append(ParsedCall(name))
                self._buffer = self._buffer[match.end() :]
                self._state, self._depth, self._in_string, self._escaped = "arguments", 0, False, False
                yield OutputEvent(call_index=len(self.calls) - 1, call_name=name)
            else:
                consumed, done = self._scan(self._buffer)
                piece, self._buffer = self._buffer[:consumed], self._buffer[consumed:]
                call = self.calls[-1]
                call.arguments += piece
                if piece:
                    yield OutputEvent(call_index=len(self.calls) - 1, arguments_delta=piece)
                if not done:
                    return
                call.complete = True
                self._state = "tag"

    def _scan(self, text: str) -> tuple[int, bool]:
        """How much of ``text`` belongs to the arguments object, and whether that ends it."""
        for i, char in enumerate(text):
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif char == "\\":
                    self._escaped = True
                elif char == '"':
                    self._in_string = False
            elif char == '"':
                self._in_string = True
            elif char in "{[":
                self._depth += 1
            elif char in "}]":
                if self._depth == 0:  # the call object's brace: the arguments ended before it
                    return i, True
                self._depth -= 1
                if self._depth == 0:
                    return i + 1, True
        return len(text), False
