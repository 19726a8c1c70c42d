"""The arguments of a chat's verbs, checked before anything is read, sent or started.

Each check is written once, here (or in the module whose operation it guards, as
``prepare_answers``), and every surface that takes the arguments runs it: ``Chat`` (so
``SyncChat``) with its agent's ``JsonLimits``, and ``pausepoint.client``'s ``RemoteChat`` /
``RemoteAgent`` with ``WIDEST``, the widest limits a session may have (the server then holds a
value to its own). A misuse is so refused with the same class, words and details locally and
over HTTP — and at the same moment: a streamed verb checks its arguments when it is called,
not when its stream is read.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ..approval._answers import check_approval
from ..content._intake import user_message
from ..content._jsondata import MAX_DEPTH, MAX_INT_DIGITS, JsonLimits, NotJsonData, json_text, key_text
from ..content._messages import Message, Part
from ..errors import InvalidAnswer, InvalidMessage, InvalidRequest

__all__ = [
    "MAX_OFFSET",
    "WIDEST",
    "checked_approval",
    "checked_cancel",
    "checked_message",
    "checked_page",
    "checked_revocation",
]

#: the widest limits a session may have: what a client checks a value with, the server knowing its own
WIDEST = JsonLimits(max_depth=MAX_DEPTH, max_int_digits=MAX_INT_DIGITS, max_string_bytes=sys.maxsize)
#: the biggest count a store takes (a signed 64-bit integer: SQLite's and PostgreSQL's ``bigint``)
_BIGGEST = 2**63 - 1
#: the furthest offset the server's listings take: no store holds that many sessions, so a page
#: past it is empty (``RemoteAgent.list_sessions`` answers it so, as ``Agent.list_sessions`` does)
MAX_OFFSET = 10**9


def checked_message(
    message: str | Message | Sequence[Part], limits: JsonLimits, key: str | None = None, **names: str | None
) -> Message:
    """The user message ``send`` records; ``InvalidMessage`` (nothing recorded or sent) for a
    message that is not text and media parts a session can keep, a name (``principal``, ``via``,
    ``tenant``: those given) or an idempotency ``key`` it cannot record."""
    user = user_message(message, limits)
    try:
        for name, value in names.items():
            if value is not None:
                json_text(value, limits, path=f"$.{name}", name=True)
    except NotJsonData as exc:
        raise InvalidMessage(f"the message's sender cannot be recorded: {exc}", **exc.details()) from None
    try:
        if key is not None:
            key_text(key, limits, path="$.idempotency_key")
    except NotJsonData as exc:
        raise InvalidMessage(f"the message's idempotency key cannot be recorded: {exc}", **exc.details()) from None
    return user


def checked_approval(ref: object, pause_id: object, grant: object, limits: JsonLimits) -> str:
    """``approve``'s ``ref``, checked with its ``pause_id`` and ``grant`` before the call's tool
    is known: ``InvalidAnswer`` for anything but a string (a pause given for its ref, say), said
    in one sentence naming ``ref`` — the caller wrote no respond list to name — and for a
    ``pause_id`` or ``grant`` no answer can carry (``check_approval``)."""
    if not isinstance(ref, str):
        raise InvalidAnswer(f"ref must be a string (the paused call's: pause.ref), not {type(ref).__name__}")
    check_approval(ref, pause_id, grant, limits)
    return ref


def checked_cancel(reason: object, principal: object, limits: JsonLimits) -> None:
    """``cancel_pending``'s ``reason`` (and ``principal``, when given); ``InvalidAnswer`` for
    one a session cannot record."""
    try:
        json_text(reason, limits, path="$.reason")
        if principal is not None:
            json_text(principal, limits, path="$.principal", name=True)
    except NotJsonData as exc:
        raise InvalidAnswer(f"the cancellation cannot be recorded: {exc}", **exc.details()) from None


def checked_revocation(reason: object, limits: JsonLimits, **names: object) -> None:
    """``revoke_grant``'s ``reason`` and names (``via``, ``principal``: those given);
    ``InvalidRequest`` for one a session cannot record."""
    try:
        json_text(reason, limits, path="$.reason")
        for name, value in names.items():
            if value is not None:
                json_text(value, limits, path=f"$.{name}", name=True)
    except NotJsonData as exc:
        raise InvalidRequest(f"the revocation cannot be recorded: {exc}", **exc.details()) from None


def checked_page(limit: object, offset: object, has_pending: object) -> None:
    """``list_sessions``' page and filter, refused before any store is asked (``InvalidRequest``,
    in the words of the server's 400 for its query): a store would read a negative count as
    its own (one slices from the end, another reads no limit) and a fraction not at all."""
    for name, value, low in (("limit", limit, 0), ("offset", offset, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= _BIGGEST:
            raise InvalidRequest(f"{name} must be an integer from {low} to {_BIGGEST}, not {value!r}")
    if has_pending is not None and not isinstance(has_pending, bool):
        raise InvalidRequest(f"has_pending must be true or false (or None: either), not {has_pending!r}")
