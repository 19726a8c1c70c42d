"""Checking a resume's answers: as data a session can keep, then against the session as it is now.

``prepare_answers`` puts an answer's values in the JSON normal form the stores keep (or refuses
them with ``InvalidAnswer``, naming the JSON path and the limit). ``check_answers`` is pure: it
either returns the records that claim the pauses, or raises the ``ResumeRefused`` subclass
naming what is wrong — before anything runs or is written.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from ..content._jsondata import DEFAULT_LIMITS, JsonLimits, NotJsonData, json_data, json_text
from ..errors import (
    AlreadyResolved,
    DuplicateAnswer,
    InputEditNotAllowed,
    InterruptExpired,
    InterruptNameMismatch,
    InvalidAnswer,
    NotPaused,
    PauseChanged,
    StaleInterrupt,
    ToolDefinitionChanged,
    UnknownInterrupt,
)
from ..session._grants import Grant
from ..session._interrupts import ToolResponse, ToolRestart
from ..session._records import ApprovalPaused, CallAnswered, PauseEscalated, Record
from ..session._state import Pause, SessionState
from ..session._views import pending_interrupt
from ..tools._tool import Tool, jsonable
from ._gate import review
from ._policy import ApprovalPolicy

__all__ = [
    "AnswerContext",
    "call_name",
    "check_answers",
    "escalates",
    "escalations_due",
    "expiry_claims",
    "prepare_answers",
    "request_hash",
]

Answer = ToolResponse | ToolRestart


@dataclass(frozen=True, slots=True)
class AnswerContext:
    """Who answers, when, through what — recorded on every claim."""

    now: datetime
    principal: str | None
    via: str
    metadata: dict[str, Any] | None
    idempotency_key: str | None
    request_hash: str | None
    limits: JsonLimits = field(default=DEFAULT_LIMITS)


def prepare_answers(
    respond: Sequence[ToolResponse],
    restart: Sequence[ToolRestart],
    metadata: Any,
    limits: JsonLimits,
    **strings: str | None,
) -> tuple[list[Answer], dict[str, Any] | None]:
    """The answers and the resume's metadata with every value in JSON normal form.

    Raises ``TypeError`` for an answer that is not a ``ToolResponse`` / ``ToolRestart``, and
    ``InvalidAnswer`` (details: ``path``, ``rule``, ``limit``) for a ref or name that is not a
    string, a decision that does not exist, or a value a session cannot keep — including the
    ``strings`` given (principal, via, idempotency key). Nothing is recorded either way.
    """
    for given in respond:
        if not isinstance(given, ToolResponse):
            raise TypeError(f"respond= takes ToolResponse answers (interrupt.respond(...)), not {given!r}")
    for again in restart:
        if not isinstance(again, ToolRestart):
            raise TypeError(f"restart= takes ToolRestart answers (interrupt.restart(...)), not {again!r}")
    answers: list[Answer] = []
    ref: Any = None
    at: tuple[Any, ...] = ()  # where the value being checked is; made a path only for an error
    try:
        for key, value in strings.items():
            if value is not None:
                at = (key,)
                json_text(value, limits, name=key != "key")
        if metadata is not None:
            at = ("metadata",)
            metadata = _metadata(metadata, limits)
        for index, response in enumerate(respond):
            ref = response.ref
            _check_names(response, ("respond", index), limits)
            if response.decision not in ("respond", "deny"):
                raise InvalidAnswer(
                    f"$.respond[{index}].decision must be 'respond' or 'deny', not {response.decision!r}", ref=ref
                )
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
            _check_names(again, ("restart", index), limits)
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
        exc.root = _path(at)
        refs = {"ref": ref} if isinstance(ref, str) else {}
        raise InvalidAnswer(f"the resume cannot be recorded: {exc}", **refs, **exc.details()) from None
    return answers, metadata


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
            raise InvalidAnswer(f"the resume cannot be recorded: {exc}", **exc.details()) from None


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
    all or nothing. ``policy`` decides who may answer what (see ``_gate.review``)."""
    records: list[Record] = []
    seen: set[str] = set()
    for answer in answers:
        pause = _locate(state, answer)
        if pause.record.ref in seen:
            raise DuplicateAnswer(f"this resume answers {answer.ref!r} twice", ref=answer.ref)
        seen.add(pause.record.ref)
        claim = _check_one(state, pause, answer, tools, ctx, allow_changed_tools)
        if policy is not None and (
            isinstance(pause.record, ApprovalPaused) or answer.grant is not None or policy.governs(claim.name)
        ):
            records.extend(review(policy, state, pause, answer, claim, tools, ctx.limits))
        else:
            records.append(claim)
    return records


def call_name(state: SessionState, ref: Any) -> str:
    """The tool name of the call ``ref`` names (by the call's ref, or by the pause's own ref that
    logs written before refs were per call showed), whether or not it is paused now; ``""``
    when the session has no such call (an answer by that name is refused as unknown)."""
    if not isinstance(ref, str):
        return ""
    call = state.calls.get(ref)
    if call is not None:
        return call.request.name
    legacy = state.pauses.get(ref)
    return "" if legacy is None else legacy.record.name


def _locate(state: SessionState, answer: Answer) -> Pause:
    """The pause ``answer`` names: by the call's ref (its ``pause_id``, or the live pause), or by
    the pause's own ref that logs written before refs were per call showed; a refusal otherwise."""
    ref, name = answer.ref, answer.name
    legacy = state.pauses.get(ref) if not answer.pause_id else None
    if legacy is not None:
        return legacy
    call = state.calls.get(ref)
    if call is None:
        raise UnknownInterrupt(f"no paused call with ref {ref!r} in session {state.session_id!r}", ref=ref)
    if call.request.name != name:
        raise InterruptNameMismatch(
            f"ref {ref!r} is a call of {call.request.name!r}, not {name!r}", ref=ref, actual=call.request.name
        )
    if answer.pause_id:
        pause = state.pauses.get(answer.pause_id)
        if pause is None or pause.record.call_ref != ref:
            raise UnknownInterrupt(
                f"call {ref!r} has no pause {answer.pause_id!r} in session {state.session_id!r}",
                ref=ref,
                pause_id=answer.pause_id,
            )
        return pause
    if call.pause is None:
        if call.turn != state.turn:
            raise StaleInterrupt(
                f"call {ref!r} belongs to turn {call.turn}; the session is at turn {state.turn}", ref=ref
            )
        raise NotPaused(f"call {ref!r} of {name!r} is not paused (status: {call.status})", ref=ref)
    pause = state.pauses[call.pause]
    if call.changed and not _binds_itself(answer):
        raise _changed(pause)
    return pause


def _binds_itself(answer: Answer) -> bool:
    """Whether a bare ref's answer says what it decides without the pause it was meant for: a
    denial widens nothing, and a restart carrying an input runs that input (``_check_one``
    refuses it when it is neither the live input nor an edit the tool takes)."""
    if isinstance(answer, ToolResponse):
        return answer.decision == "deny"
    return answer.replace_input is not None


def _changed(pause: Pause) -> PauseChanged:
    record = pause.record
    return PauseChanged(
        f"call {record.call_ref!r} of {record.name!r} paused again and its live pause shows another input or "
        f"metadata than an earlier one: an answer by the ref alone may be meant for what the earlier pause "
        f"showed. Answer the live pause by its pause_id {record.ref!r} (PendingInterrupt.respond/restart carry it)",
        ref=record.call_ref,
        pause_id=record.ref,
    )


def _check_one(
    state: SessionState,
    pause: Pause,
    answer: Answer,
    tools: Mapping[str, Tool],
    ctx: AnswerContext,
    allow_changed_tools: bool,
) -> CallAnswered:
    paused = pause.record
    ref, name = paused.call_ref, answer.name
    if paused.name != name:
        raise InterruptNameMismatch(
            f"ref {ref!r} is a call of {paused.name!r}, not {name!r}", ref=ref, actual=paused.name
        )
    if pause.answer is not None:
        done = pause.answer
        by = f" by {done.principal}" if done.principal else ""
        again = "; the call paused again since: answer its new pause" if state.calls[ref].pause != paused.ref else ""
        raise AlreadyResolved(
            f"the pause of {name!r} {ref!r} was already resolved ({done.decision}{by} at {done.at.isoformat()}){again}",
            ref=ref,
            decision=done.decision,
            pause_id=paused.ref,
        )
    if paused.turn != state.turn:
        raise StaleInterrupt(
            f"the pause of call {ref!r} belongs to turn {paused.turn}; the session is at turn {state.turn}", ref=ref
        )
    if pause.expires_at is not None and pause.expires_at <= ctx.now:
        raise InterruptExpired(f"the pause of {name!r} {ref!r} expired at {pause.expires_at.isoformat()}", ref=ref)
    tool = tools.get(name)
    if tool is None:
        raise ToolDefinitionChanged(f"tool {name!r} paused in this session is no longer defined on the agent", ref=ref)
    if tool.fingerprint != paused.fingerprint and not allow_changed_tools:
        raise ToolDefinitionChanged(
            f"tool {name!r} changed since it paused (its name or schemas differ); define the agent with "
            "allow_changed_tools=True to answer it anyway",
            ref=ref,
        )
    claim = CallAnswered(
        ref=paused.ref,
        call_ref=ref,
        name=name,
        decision="restart",
        at=ctx.now,
        principal=ctx.principal,
        via=ctx.via,
        metadata=_merge(ctx.metadata, answer.metadata if isinstance(answer, ToolResponse) else None),
        idempotency_key=ctx.idempotency_key,
        request_hash=ctx.request_hash,
    )
    try:
        handed = tool.answer_restart(paused.metadata, answer)
    except ValueError as exc:
        raise InvalidAnswer(f"the answer to {name!r} is not valid for its question: {exc}", ref=ref) from exc
    if handed is not None:  # the call asked a question mid-way: the answer goes back to it
        claim.resumed_metadata = _kept(handed, ctx.limits, ref, f"the answer to {name!r}")
        claim.reason = answer.reason if isinstance(answer, ToolResponse) else None
        return claim
    if isinstance(answer, ToolRestart):
        claim.resumed_metadata = dict(answer.resumed_metadata or {})
        if answer.replace_input is not None:
            try:
                replaced = tool.validate_input(answer.replace_input).model_dump(mode="json")
            except ValidationError as exc:
                if not tool.allow_input_edits:
                    raise InputEditNotAllowed(
                        f"tool {name!r} does not accept edited input (define it with allow_input_edits=True)", ref=ref
                    ) from None
                raise InvalidAnswer(f"replacement input for {name!r} is invalid: {exc}", ref=ref) from exc
            if replaced == paused.input or answer.replace_input == paused.input:
                return claim  # the same input again is no edit (Genkit's clients send it that way)
            if not tool.allow_input_edits:
                if not answer.pause_id and state.calls[ref].changed:
                    raise _changed(pause)  # the input an earlier pause showed, not an edit
                raise InputEditNotAllowed(
                    f"tool {name!r} does not accept edited input (define it with allow_input_edits=True)", ref=ref
                )
            claim.replace_input = _kept(replaced, ctx.limits, ref, f"replacement input for {name!r}")
        return claim
    claim.decision = answer.decision
    if answer.decision == "deny":
        claim.reason = answer.reason
        claim.output = {"denied": True, "reason": answer.reason or ""}
        return claim
    try:
        output = tool.validate_output(answer.output)
    except (ValidationError, TypeError, ValueError) as exc:  # a PydanticSerializationError is a ValueError
        raise InvalidAnswer(f"the answer to {name!r} is not valid for its output schema: {exc}", ref=ref) from exc
    # The schema may make new values (a float field reads "nan" as NaN): check what is kept.
    claim.output = output if tool.output_adapter is None else _kept(output, ctx.limits, ref, f"the answer to {name!r}")
    return claim


def _kept(value: Any, limits: JsonLimits, ref: str, what: str) -> Any:
    try:
        return json_data(value, limits)
    except NotJsonData as exc:
        raise InvalidAnswer(f"{what} cannot be recorded: {exc}", ref=ref, **exc.details()) from None


def _merge(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    if a is None or b is None:
        return a if b is None else b
    return {**a, **b}


def escalates(pause: Pause) -> bool:
    """Whether the pause, once expired, is handed to other approvers rather than resolved."""
    record = pause.record
    return isinstance(record, ApprovalPaused) and pause.level < len(record.approval.escalation)


def escalations_due(state: SessionState, now: datetime) -> list[PauseEscalated]:
    """Records handing every open pause whose time ran out, and which the approval policy
    escalates, to the next step's roles (with their time-to-live, from ``now``). Any operation
    that writes records them before it looks at the pauses, so nobody finds a pause stuck
    between its old deciders and its new ones."""
    handed: list[PauseEscalated] = []
    for pause in state.expired(now):
        record = pause.record
        if not escalates(pause):
            continue
        assert isinstance(record, ApprovalPaused)
        step = record.approval.escalation[pause.level]
        handed.append(
            PauseEscalated(
                ref=record.ref,
                call_ref=record.call_ref,
                name=record.name,
                at=now,
                to=list(step.to),
                expires_at=now + timedelta(seconds=step.ttl_seconds),
                level=pause.level + 1,
            )
        )
    return handed


def expiry_claims(
    state: SessionState,
    now: datetime,
    policy: Any,
    principal: str | None = None,
    limits: JsonLimits = DEFAULT_LIMITS,
) -> list[CallAnswered]:
    """Claims resolving every open pause whose time-to-live has passed and that does not
    escalate (``escalations_due`` hands those on) by the expiry policy: ``policy(interrupt)``
    returns the output the model receives for the expired call (when it returns something a
    session cannot keep, the model is told the pause expired, and why the policy's output is
    missing)."""
    return [
        CallAnswered(
            ref=pause.record.ref,
            call_ref=pause.record.call_ref,
            name=pause.record.name,
            decision="expire",
            at=now,
            principal=principal,
            via="expiry",
            output=_expiry_output(policy, pending_interrupt(pause.record, pause), limits),
            reason=f"no answer before {pause.expires_at.isoformat() if pause.expires_at else '?'}",
        )
        for pause in state.expired(now)
        if not escalates(pause)
    ]


def _expiry_output(policy: Any, interrupt: Any, limits: JsonLimits) -> Any:
    try:
        return json_data(policy(interrupt), limits)
    except NotJsonData as exc:
        return {"expired": True, "error": f"the expiry policy's output cannot be recorded: {exc}"}
