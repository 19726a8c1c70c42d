"""Checking a resume's answers: as data a session can keep, then against the session as it is now.

``prepare_answers`` puts an answer's values in the JSON normal form the stores keep (or refuses
them with ``InvalidAnswer``, naming the JSON path and the limit). ``check_answers`` is pure: it
either returns the records that claim the pauses (each answer fitted to its pause by ``_fit``,
the approval policy's say by ``_gate``), or raises the ``ResumeRefused`` subclass naming what is
wrong — before anything runs or is written.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..content._jsondata import JsonLimits, NotJsonData, json_data, json_text, key_text
from ..errors import (
    DuplicateAnswer,
    InvalidAnswer,
)
from ..session._grants import Grant
from ..session._interrupts import ToolResponse, ToolRestart, answers_given
from ..session._records import ApprovalPaused, Record
from ..session._state import SessionState
from ..tools._tool import Tool, jsonable
from ._context import Answer, AnswerContext
from ._fit import fit
from ._gate import review
from ._policy import ApprovalPolicy

__all__ = ["check_answers", "check_approval", "message_hash", "prepare_answers", "request_hash"]


def prepare_answers(
    respond: Sequence[ToolResponse] | None,
    restart: Sequence[ToolRestart] | None,
    metadata: Any,
    limits: JsonLimits,
    *,
    alone: bool = False,
    **strings: str | None,
) -> tuple[list[Answer], dict[str, Any] | None]:
    """The answers and the resume's metadata with every value in JSON normal form.

    ``alone``: one answer given by itself (an approval; REST's ``/respond``, ``/deny``, ``/restart``):
    a path names its field as that body does (``$.reason``, not ``$.respond[0].reason``).

    Raises ``TypeError`` for answers that are not a list of ``ToolResponse`` / ``ToolRestart``
    (None is none), and ``InvalidAnswer`` (details: ``path``, ``rule``, ``limit``) for a ref or
    name that is not a string, a decision that does not exist, or a value a session cannot keep —
    including the ``strings`` given (principal, via, idempotency key). Nothing is recorded either way.
    """
    respond = answers_given(respond, ToolResponse, "respond", "interrupt.respond(...)")
    restart = answers_given(restart, ToolRestart, "restart", "interrupt.restart(...)")
    answers: list[Answer] = []
    ref: Any = None
    at: tuple[Any, ...] = ()  # where the value being checked is; made a path only for an error
    try:
        for key, value in strings.items():
            if value is not None:
                at = (key,)
                if key == "idempotency_key":
                    key_text(value, limits)
                else:
                    json_text(value, limits, name=True)
        if metadata is not None:
            at = ("metadata",)
            metadata = _metadata(metadata, limits)
        for index, response in enumerate(respond):
            ref = response.ref
            _check_names(response, () if alone else ("respond", index), limits)
            _check_decision(response, "$" if alone else f"$.respond[{index}]")
            if response.reason is not None:
                at = ("respond", index, "reason")
                json_text(response.reason, limits)
            at = ("respond", index, "output")
            output = json_data(response.output, limits)
            extra = response.metadata
            if extra is not None:
                at = ("respond", index, "metadata")
                extra = _metadata(extra, limits)
            grant = response.grant
            if grant is not None:
                at = ("respond", index, "grant")
                grant = _grant(grant, limits)
            if output is not response.output or extra is not response.metadata or grant is not response.grant:
                response = replace(response, output=output, metadata=extra, grant=grant)
            answers.append(response)
        for index, again in enumerate(restart):
            ref = again.ref
            _check_names(again, () if alone else ("restart", index), limits)
            at = ("restart", index, "replace_input")
            new_input = json_data(again.replace_input, limits)
            resumed = again.resumed_metadata
            if resumed is not None:
                at = ("restart", index, "resumed_metadata")
                resumed = _metadata(resumed, limits)
            grant = again.grant
            if grant is not None:
                at = ("restart", index, "grant")
                grant = _grant(grant, limits)
            if (
                new_input is not again.replace_input
                or resumed is not again.resumed_metadata
                or grant is not again.grant
            ):
                again = replace(again, replace_input=new_input, resumed_metadata=resumed, grant=grant)
            answers.append(again)
    except NotJsonData as exc:
        exc.root = _path(at[2:] if alone and at[:1] in (("respond",), ("restart",)) else at)
        said = f"the {'answer' if alone else 'resume'} cannot be recorded: {exc}"
        raise InvalidAnswer(said, **({"ref": ref} if isinstance(ref, str) else {}), **exc.details()) from None
    return answers, metadata


def check_approval(ref: str, pause_id: Any, grant: Any, limits: JsonLimits) -> None:
    """The ``ref``, ``pause_id`` and ``grant`` of an approval by ref, checked as ``prepare_answers``
    checks the answer it becomes, but before the call's tool is known — so before anything is
    read or sent, on every surface alike: ``InvalidAnswer`` naming them as the approval's own
    (``$.ref``, ``$.pause_id``, ``$.grant``, as the REST API's approve body does), not as an
    item of a respond or restart list the caller never wrote."""
    _check_names(ToolResponse(ref, "", None, pause_id=pause_id), (), limits)
    if grant is not None:
        try:
            _grant(grant, limits)
        except NotJsonData as exc:
            exc.root = "$.grant"
            raise InvalidAnswer(f"the resume cannot be recorded: {exc}", ref=ref, **exc.details()) from None


def _check_decision(response: ToolResponse, at: str) -> None:
    """``InvalidAnswer`` for a decision that does not exist, or a field its decision does not
    take (refused, never dropped: what was sent is what is recorded); ``at``: the answer's path."""
    ref = response.ref
    if response.decision not in ("respond", "deny"):
        raise InvalidAnswer(f"{at}.decision must be 'respond' or 'deny', not {response.decision!r}", ref=ref)
    if response.decision == "deny" and response.output is not None:
        raise InvalidAnswer(
            f"{at}.output: a denial carries no output of its own (the model is told "
            '{"denied": true, "reason": ...}): give its reason as reason',
            ref=ref,
        )
    if response.decision == "respond" and response.reason is not None:
        raise InvalidAnswer(
            f"{at}.reason: an answer with an output takes no reason (a denial does): put a note in its metadata",
            ref=ref,
        )


def _path(at: tuple[Any, ...]) -> str:
    """``("respond", 0, "output")`` as ``$.respond[0].output``."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in at)


def _check_names(answer: Answer, at: tuple[Any, ...], limits: JsonLimits) -> None:
    for name in ("ref", "name", "pause_id"):
        value = getattr(answer, name)
        if name == "pause_id" and value is None:
            continue
        try:
            if type(value) is not str:
                raise NotJsonData(f"must be a string, not {type(value).__name__}", "json_type")
            json_text(value, limits)
        except NotJsonData as exc:
            exc.root = _path((*at, name))
            what = "resume" if at else "answer"  # (an answer given alone: its own field)
            raise InvalidAnswer(f"the {what} cannot be recorded: {exc}", **exc.details()) from None


def _grant(given: Any, limits: JsonLimits) -> Grant:
    if not isinstance(given, Grant):
        raise NotJsonData(f"must be a Grant, not {type(given).__name__}", "json_type")
    grant: Grant = given
    if grant.tool is not None:
        json_text(grant.tool, limits)
    if grant.bounds is not None:
        bounds = json_data(grant.bounds, limits)
        if bounds is not grant.bounds:
            grant = replace(grant, bounds=bounds)
    return grant


def _metadata(value: Any, limits: JsonLimits) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise NotJsonData(f"must be a dict, not {type(value).__name__}", "json_type")
    checked = json_data(value, limits)
    return checked if type(checked) is dict else dict(checked)


def request_hash(answers: Sequence[Answer], metadata: dict[str, Any] | None, principal: str | None) -> str:
    """A digest of what a resume asks for and who asks, to tell a retry from a reuse of its
    idempotency key: a key replays only the same request by the same principal."""
    canonical = json.dumps(
        [[type(a).__name__, *(jsonable(getattr(a, f)) for f in a.__dataclass_fields__)] for a in answers]
        + [jsonable(metadata), principal],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def message_hash(user: Any, principal: str | None) -> str:
    """What ``request_hash`` is for a message: a digest of the message and who sends it, the
    same for a retry of it."""
    canonical = json.dumps(["message", jsonable(user), principal], sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def check_answers(
    state: SessionState,
    answers: Sequence[Answer],
    tools: Mapping[str, Tool],
    ctx: AnswerContext,
    *,
    allow_changed_tools: bool = False,
    policy: ApprovalPolicy | None = None,
) -> list[Record]:
    """The records ``answers`` (from ``prepare_answers``) make — the claims of the pauses they
    resolve, approvals counted towards a quorum, grants given — or a ``ResumeRefused`` error;
    all or nothing. Whether each fits its pause is ``_fit``'s; ``policy`` decides who may
    answer what (see ``_gate.review``)."""
    records: list[Record] = []
    seen: set[str] = set()
    for answer in answers:
        pause, claim = fit(state, answer, tools, ctx, allow_changed_tools)
        if pause.record.ref in seen:
            raise DuplicateAnswer(f"this resume answers {answer.ref!r} twice", ref=answer.ref)
        seen.add(pause.record.ref)
        if policy is not None and (
            isinstance(pause.record, ApprovalPaused) or answer.grant is not None or policy.governs(claim.name)
        ):
            records.extend(review(policy, state, pause, answer, claim, tools, ctx.limits))
        else:
            records.append(claim)
    return records
