"""Public views of a session's state: pending interrupts, responses, audit entries."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, assert_never

from pydantic_core import to_jsonable_python

from ._grants import GrantInfo
from ._interrupts import ApprovalStatus, AuditEntry, PendingInterrupt
from ._records import (
    ApprovalGiven,
    ApprovalPaused,
    CallAnswered,
    CallDecided,
    CallPaused,
    GrantAdded,
    GrantRevoked,
    MessageAdded,
    PauseEscalated,
    TurnEnded,
)
from ._response import AgentFinishReason, AgentResponse
from ._state import AuditRecord, GrantState, Pause, SessionState

__all__ = [
    "answered_pause",
    "approvals_counted",
    "approving",
    "audit_entry",
    "grant_info",
    "pending_interrupt",
    "response_for",
]


def pending_interrupt(record: CallPaused, pause: Pause | None = None, until: int | None = None) -> PendingInterrupt:
    """The pause ``record`` as callers see it; with ``pause``, as it stands now (approvals
    counted up to version ``until``, escalations)."""
    approval = None
    if isinstance(record, ApprovalPaused):
        request = record.approval
        level = pause.level if pause is not None else 0
        approval = ApprovalStatus(
            required=request.required,
            approved_by=_approved_by(pause, until),
            roles=pause.roles if pause is not None else request.roles,
            requested_by=request.requester,
            separate=request.separate,
            gated=request.gated,
            decisions=list(request.decisions),
            grantable=request.grantable,
            offer=request.offer,
            rule=request.rule,
            escalated=level,
            handed_to=sorted(request.escalation[level].to) if level < len(request.escalation) else None,
        )
    return PendingInterrupt(
        name=record.name,
        ref=record.call_ref,
        input=record.input,
        metadata=_shown(record.metadata),  # what people read: no state only the call carries back
        paused_at=record.at,
        expires_at=pause.expires_at if pause is not None else record.expires_at,
        turn=record.turn,
        call_ref=record.call_ref,
        pause_id=record.ref,
        approval=approval,
    )


def _approved_by(pause: Pause | None, until: int | None) -> list[str]:
    # A quorum's last approval is recorded with the answer it completes (its ``approvals`` list
    # every one counted), not beside the others: an answered pause shows them all.
    if pause is None:
        return []
    answer = pause.answer
    if until is None and answer is not None and answer.approvals:
        return [approver.principal for approver in answer.approvals]
    return pause.approved_by(until)


def response_for(state: SessionState, end: TurnEnded, version: int) -> AgentResponse:
    """The response a call returned, rebuilt from its ``TurnEnded`` record (also for replays);
    ``version`` is the record's place in the log."""
    message = state.messages[end.message_index] if end.message_index is not None else None
    return AgentResponse(
        session_id=state.session_id,
        finish_reason=AgentFinishReason(end.finish_reason),
        message=message,
        interrupts=[pending_interrupt(state.pauses[ref].record, state.pauses[ref], version) for ref in end.open_refs],
        error=end.error,
        turn=end.turn,
        version=version,
    )


def approvals_counted(answer: CallAnswered, paused: Pause | None) -> int:
    """How many approvals the call paused for approval had with ``answer``: those it lists, or
    (one approval was enough) the answer itself if it approved the call (a restart of a tool
    that paused itself, without ``tool_approved``, approves nothing)."""
    return len(answer.approvals) if answer.approvals is not None else int(approving(paused, answer))


def audit_entry(record: AuditRecord, state: SessionState | None = None) -> AuditEntry:
    """One audit entry: an answer, an approval, a policy's decision, a grant, an escalation, or a
    user message — every kind the trail lists, matched exhaustively. With ``state``, an entry
    about a pause carries the pause's input and an approval its count, and a decision by a
    grant names the person who granted it."""
    match record:
        case MessageAdded():
            return AuditEntry(
                ref="",
                name="",
                decision="message",
                at=record.at or datetime.min.replace(tzinfo=UTC),
                principal=record.principal,
                via=record.via or "unknown",
                message=record.message,
                idempotency_key=record.idempotency_key,
            )
        case CallDecided():
            return _decided(record, state)
        case GrantAdded():
            return AuditEntry(
                ref=record.call_ref,
                name=record.tool,
                decision="grant",
                at=record.at,
                principal=record.principal,
                via=record.via,
                call_ref=record.call_ref,
                pause_id=record.ref,
                grant=record.id,
                scope={
                    "bounds": record.bounds,
                    "uses": record.uses,
                    "expires_at": to_jsonable_python(record.expires_at),  # ...Z, as REST writes every time
                },
            )
        case GrantRevoked():
            added = state.grants[record.id].record if state is not None and record.id in state.grants else None
            return AuditEntry(
                ref="",
                name=added.tool if added is not None else "",
                decision="revoke",
                at=record.at,
                principal=record.principal,
                via=record.via,
                reason=record.reason or None,
                grant=record.id,
            )
        case PauseEscalated() | ApprovalGiven() | CallAnswered():
            return _about_a_pause(record, state)
        case _:
            assert_never(record)


def _decided(record: CallDecided, state: SessionState | None) -> AuditEntry:
    call = state.calls.get(record.call_ref) if state is not None else None
    granted = state.grants.get(record.grant) if state is not None and record.grant is not None else None
    return AuditEntry(
        ref=record.call_ref,
        name=record.name,
        decision=record.decision,
        at=record.at,
        principal=granted.record.principal if granted is not None else None,  # a grant's person
        via="policy",
        reason=record.reason,
        call_ref=record.call_ref,
        input=call.request.input if call is not None else None,
        rule=record.rule,
        grant=record.grant,
    )


def _about_a_pause(record: PauseEscalated | ApprovalGiven | CallAnswered, state: SessionState | None) -> AuditEntry:
    """The entry of what happened to a pause: escalated, one approval counted, or answered."""
    paused = state.pauses[record.ref] if state is not None and record.ref in state.pauses else None
    pause_input = paused.record.input if paused is not None else None
    required = paused.record.approval.required if paused and isinstance(paused.record, ApprovalPaused) else 0

    def entry(**fields: Any) -> AuditEntry:
        return AuditEntry(
            ref=record.call_ref,
            name=record.name,
            at=record.at,
            call_ref=record.call_ref,
            input=pause_input,
            pause_id=record.ref,
            required=required,
            paused_at=paused.record.at if paused is not None else None,
            expires_at=paused.expires_at if paused is not None else None,
            **fields,
        )

    if isinstance(record, PauseEscalated):  # with the approvals it had by then, as its event says
        by_then = sum(a.at <= record.at for _, a in paused.approvals) if paused is not None and required else 0
        return entry(decision="escalate", principal=None, via="expiry", escalated_to=list(record.to), approvals=by_then)
    if isinstance(record, ApprovalGiven):
        counted = 0
        if paused is not None:
            counted = next((i for i, (_, a) in enumerate(paused.approvals, 1) if a is record), len(paused.approvals))
        return entry(
            decision="approve",
            principal=record.principal,
            via=record.via,
            metadata=record.metadata,
            idempotency_key=record.idempotency_key,
            approvals=counted,
        )
    approvals = approvals_counted(record, paused) if required else 0
    return entry(
        decision="approve" if approving(paused, record) else record.decision,
        principal=record.principal,
        via=record.via,
        output=record.output,
        replace_input=record.replace_input,
        resumed_metadata=_shown(record.resumed_metadata),
        metadata=record.metadata,
        reason=record.reason,
        idempotency_key=record.idempotency_key,
        approvals=approvals,
    )


#: keys of a pause's metadata (and an answer's ``resumed_metadata``) that only the call reads
#: back, never shown to people: the sealed state of an MCP server's question the answer goes
#: back with (``pausepoint.mcp``)
_CARRIED_ONLY = frozenset({"mcp_round"})


def _shown(resumed: dict[str, Any] | None) -> dict[str, Any] | None:
    """A pause's metadata, or an answer's ``resumed_metadata``, as people read it: without what
    only the call reads back."""
    if not resumed or _CARRIED_ONLY.isdisjoint(resumed):
        return resumed
    return {key: value for key, value in resumed.items() if key not in _CARRIED_ONLY}


def approving(paused: Pause | None, record: CallAnswered) -> bool:
    """Whether an answer approved its call (the audit names it ``approve``): a restart of a call
    the runtime paused for approval, which runs only once approved, or of a tool that paused
    itself, with ``{"tool_approved": True}``."""
    if record.decision != "restart":
        return False
    if paused is not None and isinstance(paused.record, ApprovalPaused) and paused.record.approval.gated:
        return True
    return (record.resumed_metadata or {}).get("tool_approved") is True


def answered_pause(entry: AuditEntry) -> PendingInterrupt:
    """The pause an audit entry answered, as it was shown then (to render its view)."""
    return PendingInterrupt(
        entry.name,
        entry.ref,
        entry.input,
        entry.metadata,
        entry.at,
        expires_at=entry.expires_at,
        call_ref=entry.ref,
        pause_id=entry.pause_id,
    )


def grant_info(grant: GrantState, now: datetime) -> GrantInfo:
    """A grant as callers read it (``Chat.grants``), with its status at ``now``."""
    added, used, revoked = grant.record, grant.used, grant.revoked
    return GrantInfo(
        id=added.id,
        tool=added.tool,
        principal=added.principal,
        via=added.via,
        at=added.at,
        bounds=added.bounds,
        uses=added.uses,
        used=used,
        expires_at=added.expires_at,
        status=grant.status(now),
        ref=added.call_ref,
        revoked_at=revoked.at if revoked else None,
        revoked_by=revoked.principal if revoked else None,
        reason=revoked.reason if revoked else "",
    )
