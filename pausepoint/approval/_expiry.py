"""Pauses whose time ran out: handed to the next approvers the policy names (an escalation),
or resolved by the agent's expiry policy (default: a denial the model sees). Any operation that
writes records what is due before it looks at the pauses, so nobody finds a pause stuck.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from ..content._jsondata import DEFAULT_LIMITS, JsonLimits, NotJsonData, json_data, printable, time_text
from ..session._interrupts import ToolResponse, ToolRestart
from ..session._records import ApprovalPaused, CallAnswered, Decision, PauseEscalated
from ..session._state import Pause, SessionState
from ..session._views import pending_interrupt
from ._gate import counted

__all__ = ["cancel_claims", "escalates", "escalations_due", "expiry_claims"]

log = logging.getLogger("pausepoint")


def escalates(pause: Pause) -> bool:
    """Whether the pause, once expired, is handed to other approvers rather than resolved."""
    record = pause.record
    return isinstance(record, ApprovalPaused) and pause.level < len(record.approval.escalation)


def escalations_due(state: SessionState, now: datetime) -> list[PauseEscalated]:
    """Records handing every open pause whose time ran out, and which the approval policy
    escalates, to the next step's roles. Any operation that writes records them before it looks
    at the pauses, so nobody finds a pause stuck between its old deciders and its new ones.

    Each step's time-to-live runs from when the step before ran out, not from when this is
    recorded: however late the sweep (or none: the next call on the session) comes, a pause
    lives no longer than its steps add up to. A step whose time ran out too is recorded as well
    (then the next, or the expiry policy, takes over)."""
    handed: list[PauseEscalated] = []
    for pause in state.expired(now):
        record = pause.record
        if not escalates(pause):
            continue
        assert isinstance(record, ApprovalPaused) and pause.expires_at is not None
        steps, level, ran_out = record.approval.escalation, pause.level, pause.expires_at
        while level < len(steps):
            step = steps[level]
            level += 1
            ran_out += timedelta(seconds=step.ttl_seconds)
            handed.append(
                PauseEscalated(
                    ref=record.ref,
                    call_ref=record.call_ref,
                    name=record.name,
                    at=now,
                    to=list(step.to),
                    expires_at=ran_out,
                    level=level,
                )
            )
            if ran_out > now:
                break
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
        _resolved(
            pause,
            "expire",
            now,
            principal,
            "expiry",
            _expiry_output(policy, pending_interrupt(pause.record, pause), limits),
            f"no answer before {time_text(pause.expires_at) if pause.expires_at else '?'}",
        )
        for pause in state.expired(now)
        if not escalates(pause)
    ]


def cancel_claims(
    state: SessionState,
    now: datetime,
    reason: str,
    principal: str | None,
    via: str,
    policy: Any,
    limits: JsonLimits = DEFAULT_LIMITS,
) -> list[CallAnswered]:
    """Claims resolving every open pause for ``Chat.cancel_pending``: one whose time ran out by
    the expiry policy (as any answer to it would be refused), each live one as cancelled — the
    model sees ``{"cancelled": True, "reason": reason}``."""
    expired = expiry_claims(state, now, policy, limits=limits)
    settled = {claim.ref for claim in expired}
    cancelled = [
        _resolved(pause, "cancel", now, principal, via, {"cancelled": True, "reason": reason}, reason)
        for pause in state.open.values()
        if pause.record.ref not in settled
    ]
    return [*expired, *cancelled]


def _resolved(
    pause: Pause, decision: Decision, now: datetime, principal: str | None, via: str, output: Any, reason: str
) -> CallAnswered:
    """The claim resolving ``pause`` other than by an answer to it — its expiry, or a cancel —
    with ``output`` for the model, and the approvals it had counted by then."""
    record = pause.record
    return CallAnswered(
        ref=record.ref,
        call_ref=record.call_ref,
        name=record.name,
        decision=decision,
        at=now,
        principal=principal,
        via=via,
        output=output,
        reason=reason,
        approvals=counted(pause),
    )


def _expiry_output(policy: Any, interrupt: Any, limits: JsonLimits) -> Any:
    """What the model is told of an expired pause: the expiry policy's output — or, when the
    policy raises or returns what a session cannot keep, that the pause expired and why the
    policy's output is missing (a broken policy never leaves a session stuck with a pause
    nobody may answer)."""
    try:
        output = policy(interrupt)
    except Exception as exc:
        log.warning("the expiry policy failed on %s's pause %s", interrupt.name, interrupt.ref, exc_info=True)
        return {"expired": True, "error": printable(f"the expiry policy failed: {type(exc).__name__}: {exc}")}
    if isinstance(output, ToolResponse | ToolRestart):  # its fields would be taken for the output
        log.warning("the expiry policy returned an answer for %s's pause %s", interrupt.name, interrupt.ref)
        return {
            "expired": True,
            "error": "the expiry policy returned an answer (respond, deny or restart): it returns the output the "
            "model is told for the expired call, e.g. {'approved': False}",
        }
    try:
        return json_data(output, limits)
    except NotJsonData as exc:
        return {"expired": True, "error": f"the expiry policy's output cannot be recorded: {exc}"}
