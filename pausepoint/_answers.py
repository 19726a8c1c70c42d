"""Checking a resume's answers against the session as it is now.

``check_answers`` is pure: it either returns the records that claim the pauses, or raises the
``ResumeRefused`` subclass naming what is wrong — before anything runs or is written.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from ._interrupts import ToolResponse, ToolRestart
from ._records import CallAnswered
from ._session import Pause, SessionState
from ._tools import Tool, jsonable
from ._views import pending_interrupt
from .errors import (
    AlreadyResolved,
    DuplicateAnswer,
    InputEditNotAllowed,
    InterruptExpired,
    InterruptNameMismatch,
    InvalidAnswer,
    NotPaused,
    StaleInterrupt,
    ToolDefinitionChanged,
    UnknownInterrupt,
)

__all__ = ["AnswerContext", "check_answers", "expiry_claims", "request_hash"]

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


def request_hash(answers: Sequence[Answer], metadata: dict[str, Any] | None) -> str:
    """A digest of what a resume asks for, to tell a retry from a reuse of its idempotency key."""
    canonical = json.dumps(
        [[type(a).__name__, *(jsonable(getattr(a, f)) for f in a.__dataclass_fields__)] for a in answers]
        + [jsonable(metadata)],
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
) -> list[CallAnswered]:
    """The claim records for ``answers``, or a ``ResumeRefused`` error; all or nothing."""
    try:
        jsonable([ctx.metadata, *(getattr(a, "metadata", None) for a in answers)])
        jsonable([getattr(a, "resumed_metadata", None) for a in answers])
    except (TypeError, ValueError) as exc:
        raise InvalidAnswer(f"resume metadata must be JSON data: {exc}") from exc
    claims: list[CallAnswered] = []
    seen: set[str] = set()
    for answer in answers:
        pause = _locate(state, answer)
        if pause.record.ref in seen:
            raise DuplicateAnswer(f"this resume answers {answer.ref!r} twice", ref=answer.ref)
        seen.add(pause.record.ref)
        claims.append(_check_one(state, pause, answer, tools, ctx, allow_changed_tools))
    return claims


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
    return state.pauses[call.pause]


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
    if paused.expires_at is not None and paused.expires_at <= ctx.now:
        raise InterruptExpired(f"the pause of {name!r} {ref!r} expired at {paused.expires_at.isoformat()}", ref=ref)
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
            if replaced == paused.input:
                return claim  # the same input again is no edit (Genkit's clients send it that way)
            if not tool.allow_input_edits:
                raise InputEditNotAllowed(
                    f"tool {name!r} does not accept edited input (define it with allow_input_edits=True)", ref=ref
                )
            claim.replace_input = replaced
        return claim
    claim.decision = answer.decision
    if answer.decision == "deny":
        claim.reason = answer.reason
        claim.output = {"denied": True, "reason": answer.reason or ""}
        return claim
    try:
        claim.output = tool.validate_output(answer.output)
    except (ValidationError, TypeError, ValueError) as exc:  # a PydanticSerializationError is a ValueError
        raise InvalidAnswer(f"the answer to {name!r} is not valid for its output schema: {exc}", ref=ref) from exc
    return claim


def _merge(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    if a is None or b is None:
        return a if b is None else b
    return {**a, **b}


def expiry_claims(state: SessionState, now: datetime, policy: Any, principal: str | None = None) -> list[CallAnswered]:
    """Claims resolving every open pause whose time-to-live has passed, by the expiry policy.

    ``policy(interrupt)`` returns the output the model receives for the expired call.
    """
    claims = []
    for pause in state.expired(now):
        record = pause.record
        claims.append(
            CallAnswered(
                ref=record.ref,
                call_ref=record.call_ref,
                name=record.name,
                decision="expire",
                at=now,
                principal=principal,
                via="expiry",
                output=jsonable(policy(pending_interrupt(record))),
                reason=f"no answer before {record.expires_at.isoformat() if record.expires_at else '?'}",
            )
        )
    return claims
