"""What every adapter reads from a request the same way, whichever provider serves the agent.

An agent runs on any provider by changing its model name (README "Models"), so the config keys
agents share mean one thing on every provider, checked here once before anything is sent
(``SharedConfig``) rather than by each adapter in its own way (found by a probe: Anthropic split
a ``stop_sequences`` string into characters and sent 1024 for ``max_tokens=0``, OpenAI sent
them as given, Gemini refused some). A session moved from one provider to another goes out
with call ids unique across the request (``CallIds``), as the APIs require.

Tool names too: an agent's tools are named as every provider takes a name (``TOOL_NAME``,
checked when a tool is defined), and a call the model named otherwise — a name it made up,
OpenAI's ``multi_tool_use.parallel`` — goes back in the history under ``portable_tool_name``,
or the API would refuse every later request of the session (found by a probe).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..content._messages import Message, ToolRequestPart, ToolResponsePart
from ..errors import ModelBadRequest

__all__ = [
    "OUTPUT_LIMIT_KEYS",
    "SHARED_KEYS",
    "TOOL_NAME",
    "TOOL_NAME_RULE",
    "CallIds",
    "SharedConfig",
    "output_limit",
    "output_limit_given",
    "portable_tool_name",
    "stop_sequences",
]

#: the two names of the output limit
OUTPUT_LIMIT_KEYS = ("max_tokens", "max_output_tokens")
#: the config keys every provider translates (each adapter sends the rest as given)
SHARED_KEYS = frozenset({"temperature", "top_p", "max_tokens", "max_output_tokens", "stop_sequences"})


#: A tool name every provider takes: OpenAI's and Anthropic's characters (letters, digits, "_",
#: "-") within Gemini's first character and length (a letter or "_"; at most 64).
TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
TOOL_NAME_RULE = "a letter or '_' first, then letters, digits, '_' or '-', at most 64 characters"
_NOT_IN_A_NAME = re.compile(r"[^A-Za-z0-9_-]")


def portable_tool_name(name: str) -> str:
    """``name`` as every provider takes a tool's name: kept when it is one (``TOOL_NAME``); else
    each other character as ``_``, a ``_`` first where it starts with neither a letter nor ``_``,
    and past 64 characters the first 55 and a hash of the whole (``multi_tool_use.parallel`` →
    ``multi_tool_use_parallel``). The same name always gives the same one."""
    if TOOL_NAME.fullmatch(name):
        return name
    cleaned = _NOT_IN_A_NAME.sub("_", name)
    if not (cleaned[:1].isalpha() or cleaned[:1] == "_"):  # (only ASCII is left)
        cleaned = "_" + cleaned
    if len(cleaned) > 64:
        cleaned = cleaned[:55] + "_" + hashlib.sha256(name.encode()).hexdigest()[:8]
    return cleaned


@dataclass(frozen=True, slots=True)
class SharedConfig:
    """The shared keys of a request's config, checked (None: not given).

    ``temperature`` and ``top_p`` are numbers (the range is the API's to judge: they differ);
    ``max_tokens`` — given as ``max_tokens`` or ``max_output_tokens``, not both — is a positive
    whole number; ``stop_sequences`` is a list of non-empty strings (a string alone is refused,
    not read as one sequence nor split into characters; the local model refuses it too).
    """

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop_sequences: list[str] | None = None

    @classmethod
    def read(cls, config: Mapping[str, Any]) -> SharedConfig:
        """The shared keys of ``config``; ``ModelBadRequest`` naming the key (``details["key"]``)
        for a value no provider should be sent, before anything is."""
        return cls(
            temperature=_number(config, "temperature"),
            top_p=_number(config, "top_p"),
            max_tokens=output_limit(config),
            stop_sequences=stop_sequences(config),
        )

    def named(self, **names: str) -> dict[str, Any]:
        """The keys given, under the provider's names for them (``names``: a shared key → the
        provider's name; the others keep theirs). An empty ``stop_sequences`` is none given."""
        values: dict[str, Any] = {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens}
        values["stop_sequences"] = self.stop_sequences or None
        return {names.get(key, key): value for key, value in values.items() if value is not None}


def _number(config: Mapping[str, Any], key: str) -> float | None:
    value = config.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise ModelBadRequest(f"config {key!r} must be a number, not {value!r}", key=key)
    return value


def output_limit(config: Mapping[str, Any]) -> int | None:
    """``max_tokens`` or ``max_output_tokens`` (two names for one limit: giving both is refused,
    as neither could win without a silent choice), a positive whole number, not coerced: ``2.7``,
    ``"50"`` or ``True`` is a ``ModelBadRequest``, as is ``0``, which no API takes as a limit."""
    given = output_limit_given(config)
    if len(given) > 1:
        raise ModelBadRequest("config 'max_tokens' and 'max_output_tokens' are one limit: give one of them", keys=given)
    if not given:
        return None
    key = given[0]
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ModelBadRequest(f"config {key!r} must be a whole number of at least 1, not {value!r}", key=key)
    return value


def output_limit_given(config: Mapping[str, Any]) -> list[str]:
    """The names the output limit is given under in ``config`` (a None is not given)."""
    return [key for key in OUTPUT_LIMIT_KEYS if config.get(key) is not None]


def stop_sequences(config: Mapping[str, Any]) -> list[str] | None:
    """``stop_sequences``: a list (or tuple) of non-empty strings; a string alone is refused,
    since providers read it differently (one sequence, or its characters)."""
    value = config.get("stop_sequences")
    if value is None:
        return None
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) and item for item in value):
        raise ModelBadRequest(
            f"config 'stop_sequences' must be a list of non-empty strings, not {value!r}", key="stop_sequences"
        )
    return list(value)


class CallIds:
    """The id each call of a request is sent under, and its result with it: unique across the
    whole request, as APIs require (Anthropic refuses a ``tool_use`` id used twice anywhere in a
    request; OpenAI and strict compatible servers a ``tool_call_id`` used twice).

    A call keeps its provider's id unless an earlier call of the history has it (a server that
    numbers its calls per reply, ``functions.lookup:0`` every turn, in a session moved to another
    provider); it then goes under its runtime ref, unique in the session, as the runtime already
    does for a repeat inside one reply. ``wire`` turns an id into one the API takes (Anthropic's
    pattern); ids are unique as sent. The same history always gives the same ids.
    """

    def __init__(self, messages: Sequence[Message], wire: Callable[[str], str] = str) -> None:
        self._wire = wire
        self._by_ref: dict[str, str] = {}
        taken: set[str] = set()
        for message in messages:
            for part in message.tool_requests:
                sent = self._unused(part, taken)
                taken.add(sent)
                if part.ref:
                    self._by_ref[part.ref] = sent

    def sent_id(self, part: ToolRequestPart | ToolResponsePart) -> str:
        """The id ``part`` (a call, or the result of one, matched by its ref) goes under."""
        return self._by_ref.get(part.ref) or self._wire(part.call_id or part.ref)

    def _unused(self, call: ToolRequestPart, taken: set[str]) -> str:
        sent = self._wire(call.call_id or call.ref)
        if sent not in taken or not call.ref:
            return sent
        base = sent = self._wire(call.ref)
        copies = 1
        while sent in taken:  # only if a provider's own id was this ref: a suffix tells them apart
            copies += 1
            sent = f"{base}_{copies}"
        return sent
