"""What ``pausepoint.client`` sends: a request's body as the server reads it, its
``Idempotency-Key``, a user message — each refused before sending, with the typed error a local
``Chat`` raises, where no surface could take it as it is (rather than sent to fail in httpx or
come back changed).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from . import errors as core_errors
from ._rest import SendBody
from .content._jsondata import NotJsonData, json_data, key_text
from .content._messages import MediaPart, Message, Part, TextPart

__all__ = ["encoded", "key_header", "user_message"]


def encoded(body: BaseModel) -> bytes:
    """``body`` as the JSON a request carries, in UTF-8 (a field left out is not the same as
    null). What a session cannot keep and JSON text cannot carry as it is — NaN, an infinity, a
    surrogate code point (lone, or two making what would read back as another character) — is
    refused here with the typed error a local ``Chat`` raises (``InvalidMessage``,
    ``InvalidAnswer``), not sent to come back changed."""
    data = body.model_dump(mode="python", exclude_unset=True)
    try:
        text = json.dumps(data, default=to_jsonable_python, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
        return text.encode("utf-8")  # a surrogate code point cannot be: UnicodeEncodeError, a ValueError
    except ValueError:
        raise _unkeepable(body, data) from None


def _unkeepable(body: BaseModel, data: dict[str, Any]) -> core_errors.PausepointError:
    """The typed error a local ``Chat`` raises for the value in ``body`` (``data``, its dump)
    JSON cannot carry, found by the check a session makes (``json_data``): ``InvalidMessage`` naming its
    path in the message, else ``InvalidAnswer`` naming its path in the resume (and its answer's
    ``ref``)."""
    if isinstance(body, SendBody):
        message = data["message"]
        try:
            json_data([{"text": message}] if isinstance(message, str) else message)  # a text: one text part
        except NotJsonData as exc:
            exc.root = "$.parts"  # a message's parts, as a local Chat names them
            return core_errors.InvalidMessage(f"the message cannot be recorded: {exc}", **exc.details())
    for kind in ("respond", "restart"):
        for index, answer in enumerate(data.get(kind) or ()):
            try:
                json_data(answer)
            except NotJsonData as exc:
                exc.root = f"$.{kind}[{index}]"
                ref = {"ref": answer["ref"]} if isinstance(answer.get("ref"), str) else {}
                return core_errors.InvalidAnswer(f"the resume cannot be recorded: {exc}", **ref, **exc.details())
    try:
        json_data(data)
    except NotJsonData as exc:
        return core_errors.InvalidAnswer(f"the resume cannot be recorded: {exc}", **exc.details())
    return core_errors.InvalidRequest("the request holds a value JSON cannot carry")


def key_header(key: str | None, refused: type[core_errors.UsageError]) -> dict[str, str]:
    """The ``Idempotency-Key`` header for ``key`` (None: a fresh one). A key no surface takes
    (``key_text``: 1 to 200 characters, visible ASCII and spaces between them) is refused with
    the ``path`` and ``rule`` a local ``Chat`` names, as ``refused`` (``InvalidMessage`` for a
    send, ``InvalidAnswer`` for a resume): not sent, to fail in httpx or come back changed."""
    try:
        return {"Idempotency-Key": secrets.token_urlsafe(16) if key is None else key_text(key)}
    except NotJsonData as exc:
        raise refused(f"the idempotency key cannot be recorded: {exc}", **exc.details()) from None


def user_message(message: str | Message | Sequence[Part]) -> str | list[TextPart | MediaPart]:
    """A user message as ``SendBody`` takes it; other parts raise ``InvalidMessage`` (as a local chat does)."""
    if isinstance(message, str):
        return message
    if not isinstance(message, Message | list | tuple):
        raise core_errors.InvalidMessage(f"a user message is text, a Message or a list of parts, not {message!r}")
    parts = message.parts if isinstance(message, Message) else list(message)
    for part in parts:
        if not isinstance(part, TextPart | MediaPart):
            raise core_errors.InvalidMessage(f"a user message holds text and media parts, not {part!r}")
    return list(parts)  # type: ignore[arg-type]  # checked above
