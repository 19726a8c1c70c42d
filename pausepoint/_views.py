"""Public views of a session's state: pending interrupts, responses, audit entries."""

from __future__ import annotations

from datetime import UTC, datetime

from ._interrupts import AuditEntry, PendingInterrupt
from ._records import CallAnswered, CallPaused, MessageAdded, TurnEnded
from ._response import AgentFinishReason, AgentResponse
from ._session import SessionState

__all__ = ["answered_pause", "audit_entry", "pending_interrupt", "response_for"]


def pending_interrupt(record: CallPaused) -> PendingInterrupt:
    return PendingInterrupt(
        name=record.name,
        ref=record.call_ref,
        input=record.input,
        metadata=record.metadata,
        paused_at=record.at,
        expires_at=record.expires_at,
        turn=record.turn,
        call_ref=record.call_ref,
        pause_id=record.ref,
    )


def response_for(state: SessionState, end: TurnEnded, version: int) -> AgentResponse:
    """The response a call returned, rebuilt from its ``TurnEnded`` record (also for replays);
    ``version`` is the record's place in the log."""
    message = state.messages[end.message_index] if end.message_index is not None else None
    return AgentResponse(
        session_id=state.session_id,
        finish_reason=AgentFinishReason(end.finish_reason),
        message=message,
        interrupts=[pending_interrupt(state.pauses[ref].record) for ref in end.open_refs],
        error=end.error,
        turn=end.turn,
        version=version,
    )


def audit_entry(record: CallAnswered | MessageAdded, paused: CallPaused | None = None) -> AuditEntry:
    """One audit entry: an answer (with ``paused``, the pause it answered) or a user message."""
    if isinstance(record, MessageAdded):
        return AuditEntry(
            ref="",
            name="",
            decision="message",
            at=record.at or datetime.min.replace(tzinfo=UTC),
            principal=record.principal,
            via=record.via or "unknown",
            message=record.message,
        )
    return AuditEntry(
        ref=record.call_ref,
        name=record.name,
        decision=record.decision,
        at=record.at,
        principal=record.principal,
        via=record.via,
        output=record.output,
        replace_input=record.replace_input,
        resumed_metadata=record.resumed_metadata,
        metadata=record.metadata,
        reason=record.reason,
        idempotency_key=record.idempotency_key,
        call_ref=record.call_ref,
        input=paused.input if paused is not None else None,
        pause_id=record.ref,
    )


def answered_pause(entry: AuditEntry) -> PendingInterrupt:
    """The pause an audit entry answered, as it was shown then (to render its view)."""
    return PendingInterrupt(
        entry.name, entry.ref, entry.input, entry.metadata, entry.at, call_ref=entry.ref, pause_id=entry.pause_id
    )
