"""What ``pausepoint.client`` sends: a request's body as the server reads it, and its
``Idempotency-Key`` — a body refused before sending, with the typed error a local ``Chat``
raises, where JSON cannot carry it as it is (rather than sent to come back changed). The
arguments themselves are checked before, as a local chat checks them (``runtime._arguments``).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from . import errors as core_errors
from ._rest import SendBody
from .content._jsondata import NotJsonData, json_data

__all__ = ["encoded", "key_header"]


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


def key_header(key: str | None) -> dict[str, str]:
    """The ``Idempotency-Key`` header for ``key`` (None: a fresh one), a key checked already as a
    local ``Chat`` checks it (``key_text``: what an HTTP header carries as it is)."""
    return {"Idempotency-Key": secrets.token_urlsafe(16) if key is None else key}
