"""Messages entering a session from outside the runtime: a caller's user message, a model's reply.

Both are checked against the JSON rules of ``_jsondata`` before anything is recorded. A user
message that breaks them is refused (``InvalidMessage``). A model reply whose text or structure
breaks them is a ``ModelOutputError`` (the turn stops as on any model failure, nothing of the
reply written); a tool call whose arguments break them is kept with its arguments as text — the
convention for malformed arguments — and answered with an invalid-input result the model sees,
without running the tool.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ..errors import InvalidMessage, ModelOutputError
from ._jsondata import JsonLimits, NotJsonData, json_data, json_text, printable
from ._messages import MediaPart, Message, Part, TextPart, ToolRequestPart, ToolResponsePart

__all__ = ["adopted", "model_message", "paired", "user_message"]

_FINISH_REASONS = frozenset({"stop", "length", "blocked", "other"})
_RAW_ARGUMENTS_BYTES = 16 * 1024  # how much of unusable arguments the model is shown again


def user_message(message: str | Message | Sequence[Part], limits: JsonLimits) -> Message:
    """The user message ``send`` records; ``InvalidMessage`` (nothing recorded) when it is not
    text and media parts a session can keep."""
    if isinstance(message, str):
        parts: list[Any] = [TextPart(message)]
    elif isinstance(message, Message):
        if message.role != "user":
            raise InvalidMessage(f"a message sent is a user message, not a {message.role!r} one", role=message.role)
        parts = list(message.parts)
    elif isinstance(message, Sequence) and not isinstance(message, bytes | bytearray):
        parts = list(message)
    else:
        raise InvalidMessage(f"a message sent is a string, a Message or a list of parts, not {type(message).__name__}")
    if not parts:  # a model is asked about something: a message of no parts says nothing
        raise InvalidMessage("a user message needs at least one part (a string is one text part)", path="$.parts")
    for index, part in enumerate(parts):
        where = f"$.parts[{index}]"
        try:
            if isinstance(part, TextPart):
                json_text(part.text, limits, path=where + ".text")
                if part.provider_metadata is not None:
                    json_data(part.provider_metadata, limits, path=where + ".provider_metadata")
            elif isinstance(part, MediaPart):
                json_text(part.url, limits, path=where + ".url")
                if part.content_type is not None:
                    json_text(part.content_type, limits, path=where + ".content_type")
            else:
                raise InvalidMessage(
                    f"a user message holds text and media parts, not {type(part).__name__} (at {where})", path=where
                )
        except NotJsonData as exc:
            raise InvalidMessage(f"the message cannot be recorded: {exc}", **exc.details()) from None
    return Message("user", parts)


def adopted(message: Message, mint: Callable[[], str]) -> Message:
    """The model's message with a runtime-minted ref (``mint()``) on every tool request.

    The provider's call id is kept for its round trip — unless another call of the message
    has it too (some servers repeat one): two results under one id cannot be told apart (and
    Anthropic refuses the request), so such a call goes back under its ref. ``ModelOutputError``
    for a tool call with no name: no request could carry it back."""
    parts: list[Part] = []
    seen: set[str] = set()
    for part in message.parts:
        if isinstance(part, ToolRequestPart):
            if not part.name:
                raise ModelOutputError("the model asked for a tool call with no name")
            call_id = part.call_id or part.ref or None
            if call_id is not None:
                call_id = None if call_id in seen else call_id
                seen.add(part.call_id or part.ref)
            # made anew rather than ``dataclasses.replace``d: that costs several times more
            part = ToolRequestPart(part.name, part.input, mint(), call_id, part.provider_metadata)
        parts.append(part)
    return Message("model", parts)


def paired(text: str) -> str:
    """``text`` with each UTF-16 surrogate pair (a high surrogate then a low one, as a stream cut
    by UTF-16 code units leaves them) joined into the character it stands for; lone surrogates
    stay as they are (and are refused as ever)."""
    if text.isascii():
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _paired_value(value: Any) -> Any:
    """``value`` with ``paired`` applied to every string in it, keys included."""
    if isinstance(value, str):
        return paired(value)
    if isinstance(value, list):
        return [_paired_value(item) for item in value]
    if isinstance(value, dict):
        return {_paired_value(key): _paired_value(item) for key, item in value.items()}
    return value


def model_message(
    message: Message, finish_reason: str, limits: JsonLimits
) -> tuple[Message, dict[str, dict[str, Any]]]:
    """The model's message as it can be recorded, and the error result of each tool call (by
    ref) whose arguments cannot be; ``ModelOutputError`` when the reply cannot be used at all."""
    if finish_reason not in _FINISH_REASONS:
        raise ModelOutputError(f"the model reported an unknown finish reason {finish_reason!r}")
    refused: dict[str, dict[str, Any]] = {}
    parts: list[Part] | None = None  # a copy, made only when a part changes
    at = ""  # the field being checked; made a path only for an error
    try:
        for index, part in enumerate(message.parts):
            kept = part
            if isinstance(part, TextPart):
                at = "text"
                text = paired(part.text)
                if text != part.text:
                    kept = replace(part, text=text)
                json_text(text, limits)
                if part.provider_metadata is not None:
                    at = "provider_metadata"
                    json_data(part.provider_metadata, limits)
            elif isinstance(part, ToolRequestPart):
                at = "name"
                json_text(part.name, limits)
                if part.call_id is not None:
                    at = "call_id"
                    json_text(part.call_id, limits)
                if part.provider_metadata is not None:
                    at = "provider_metadata"
                    json_data(part.provider_metadata, limits)
                try:
                    try:
                        arguments = json_data(part.input, limits)
                    except NotJsonData as exc:
                        if exc.rule != "unpaired_surrogate":
                            raise
                        arguments = json_data(_paired_value(part.input), limits)  # a pair cut in two
                    if arguments is not part.input:
                        kept = replace(part, input=arguments)
                except NotJsonData as exc:
                    refused[part.ref] = _invalid_arguments(part.name, exc)
                    kept = replace(part, input=_as_text(part.input))
            elif isinstance(part, MediaPart):
                at = "url"
                json_text(part.url, limits)
                if part.content_type is not None:
                    at = "content_type"
                    json_text(part.content_type, limits)
            elif isinstance(part, ToolResponsePart):
                at = "name"
                json_text(part.name, limits)
                at = "output"
                output = json_data(part.output, limits)
                if output is not part.output:
                    kept = replace(part, output=output)
            else:
                raise ModelOutputError(f"the model's reply holds a {type(part).__name__}, not a message part")
            if kept is not part and parts is None:
                parts = list(message.parts[:index])
            if parts is not None:
                parts.append(kept)
    except NotJsonData as exc:
        exc.root = f"$.parts[{index}].{at}"
        raise ModelOutputError(f"the model's reply cannot be recorded: {exc}", **exc.details()) from None
    return (message if parts is None else Message(message.role, parts)), refused


def _invalid_arguments(name: str, problem: NotJsonData) -> dict[str, Any]:
    return {
        "error": f"invalid input for tool {name!r}: the arguments are not JSON data this session can keep",
        "details": [{**problem.details(), "message": problem.problem}],
    }


def _as_text(value: Any) -> str:
    """Unusable arguments as text (ASCII, so a lone surrogate is shown escaped), for the history."""
    try:
        text = json.dumps(value, default=repr)
    except (ValueError, TypeError, RecursionError):  # an integer too long to print, a cycle, ...
        text = f"<arguments of type {type(value).__name__} that cannot be shown>"
    return printable(text, _RAW_ARGUMENTS_BYTES)
