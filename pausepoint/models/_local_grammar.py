"""The local model's output format: the grammar that constrains it and the parser that reads it.

A local model answers in exactly one of two shapes (after at most a few leading blanks):

- plain text, whose first character is none of ``<``, ``{``, ``[`` and a backtick, so it can
  never be mistaken for a call or hide one in a code block;
- tool calls, each ``{"name": "<tool>", "arguments": {...}}`` with ``arguments`` constrained to
  that tool's input schema, either inside ``<tool_call>...</tool_call>`` (the Hermes/Qwen
  convention chat templates teach, a line break allowed inside the tags), written as bare JSON
  (as models trained on other formats do), or in doubled braces ``{{"name": ...}}``, the way
  Qwen2.5's chat template shows the format (its example is a Jinja string, so the braces stay
  doubled) and the model therefore likes to start a call; one per message, or up to
  ``MAX_PARALLEL_CALLS`` (one per line) when parallel calls are allowed.

Why this shape rather than one JSON object for everything (``{"answer": "..."}``): a plain answer
stays the free text a chat model was trained to write and to end with its end-of-turn token, so
it streams as it is decoded, and a small model never has to close a long JSON string; the choice
between the two shapes is made by the first character, and everything after ``<`` or ``{`` is
forced to be a valid call. A model that starts a call in a way the grammar does not offer is
steered to one of the two call forms, never into prose about a call.

The grammar is GBNF, built here from the tools' JSON schemas (``_local_schema``: structure,
types, ``enum``/``const``, required properties, string and array lengths; regex patterns,
formats and numeric bounds are left to the runtime's input validation, which reports a wrong
input to the model as that call's result).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ._local_schema import SchemaRules, literal
from ._model import ToolDefinition

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

_LEAD = "lead ::= [ \\t\\n]{0,4}"
# an answer's first character: not blank, not a control character, not how a call or code starts
_ANSWER = ["answer ::= [^<{[`\\x00-\\x20\\x7F] answer-char*", "answer-char ::= [^\\x00]"]


def build_grammar(tools: Sequence[ToolDefinition], *, allow_text: bool, parallel: bool) -> str:
    """A GBNF grammar whose sentences are tool calls of ``tools`` or, if ``allow_text``, an answer.

    With no ``tools`` it allows only an answer (which then cannot start like a call); a
    ``ValueError`` if no answer is allowed either. Every input schema yields rules (see
    ``_local_schema`` for what they enforce).
    """
    if not tools:
        if not allow_text:
            raise ValueError("a grammar that allows no answer needs at least one tool")
        return "\n".join(["root ::= lead answer", _LEAD, *_ANSWER]) + "\n"
    schemas = SchemaRules()
    alternatives = []
    for index, tool in enumerate(tools):
        prefix = f"tool{index}"
        arguments = schemas.rule_for(tool.input_schema, f"{prefix}-arguments")
        schemas.rules[f"{prefix}-call"] = (
            f'"{{" space "\\"name\\"" space ":" space {literal(json.dumps(tool.name, ensure_ascii=False))} space '
            f'"," space "\\"arguments\\"" space ":" space {arguments} "}}"'
        )
        alternatives.append(f"{prefix}-call")
    schemas.rules.setdefault("space", '| " " | "\\n" [ \\t]{0,20}')
    lines = [
        f"root ::= lead ({'answer | calls' if allow_text else 'calls'})",
        _LEAD,
        "calls ::= call" + (f' ("\\n" call){{0,{MAX_PARALLEL_CALLS - 1}}}' if parallel else ""),
        # tagged, bare, or in doubled braces as Qwen2.5's template shows it ({{"name": ...}})
        f'call ::= "{CALL_OPEN}" "\\n"? call-body "\\n"? "{CALL_CLOSE}" | call-body | "{{" call-body "}}"',
        f"call-body ::= {' | '.join(alternatives)}",
    ]
    if allow_text:
        lines += _ANSWER
    lines += [f"{name} ::= {rule}" for name, rule in sorted(schemas.rules.items())]
    return "\n".join(lines) + "\n"


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

_CALL_HEAD = re.compile(r'\s*(?:\{\s*)?\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*')


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
    the first character are dropped; that character decides: ``<`` or ``{`` start calls), a call's
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
                self.mode = "calls" if chunk[0] in "<{" else "text"
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
                # a call starts at its tag or, written bare, at its brace; what lies between
                # calls (the closing brace and tag of the one before, layout) is skipped
                tagged, bare = self._buffer.find(CALL_OPEN), self._buffer.find("{")
                if bare >= 0 and (tagged < 0 or bare < tagged):
                    self._buffer = self._buffer[bare:]
                elif tagged >= 0:
                    self._buffer = self._buffer[tagged + len(CALL_OPEN) :]
                else:  # keep what may be the start of a tag
                    self._buffer = self._buffer[-(len(CALL_OPEN) - 1) :]
                    return
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
