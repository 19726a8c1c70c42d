"""Where a pause stands, in a person's words: one telling for the link page, Slack and email.

``standing`` reads the session once and says what an approval link's pause is now (``open``,
``used``, ``expired``, ``superseded``; see ``_links``), with the pause as the REST API shows it
and the audit entry that settled it. ``decided`` is the line every channel writes for a
decision ("Approved by alice via Slack"), from the same audit entry the console and
``GET .../audit`` show, so every channel tells the same story.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

from ..errors import InvalidLink
from ..runtime._agent import Agent
from ..session._interrupts import AuditEntry, PendingInterrupt
from ..session._state import Pause, SessionState
from ..session._views import audit_entry, pending_interrupt
from ..tools._display import PauseView
from ._links import Link, LinkState

__all__ = ["Standing", "decided", "decided_words", "moment", "standing", "standing_in"]

_DONE = {
    "approve": "Approved",
    "deny": "Denied",
    "respond": "Answered",
    "restart": "Run again",
    "cancel": "Cancelled",
    "expire": "Expired unanswered",
}
_CHANNELS = {"slack": "Slack", "link": "an approval link", "http": "the API", "python": "Python", "genkit": "Genkit"}


@dataclass(frozen=True, slots=True)
class Standing:
    """A link's pause now: its ``state``, the ``pause`` (as the REST API shows it, approvals
    counted so far), its ``view``, the audit ``entry`` that settled it (None while open, or
    when a later pause of its call superseded it unanswered) and the ``message`` a person reads."""

    state: LinkState
    pause: PendingInterrupt
    view: PauseView
    entry: AuditEntry | None
    message: str


async def standing(agent: Agent, link: Link) -> Standing:
    """Where ``link``'s pause stands now (one read of the session): see ``standing_in``."""
    return standing_in(agent, link, await agent.chat(link.session_id).calls.read_state())


def standing_in(agent: Agent, link: Link, state: SessionState) -> Standing:
    """Where ``link``'s pause stands in ``state``, its session. Raises ``InvalidLink`` when the
    session holds no such pause (a link is signed, so only a removed session does)."""
    call = state.calls.get(link.ref)
    pause = state.pauses.get(link.pause_id)
    if call is None or pause is None or pause.record.call_ref != link.ref:
        raise InvalidLink("this link names no pause of the session")
    shown = pending_interrupt(pause.record, pause)
    entry = audit_entry(pause.answer, state) if pause.answer is not None else None
    view = agent.view(shown, tenant=state.tenant)
    now = agent.clock()
    said = f"“{view.title}”"
    if call.pause != link.pause_id:
        told = f"{decided(entry)}, and" if entry is not None else "Since this link was sent,"
        # an answer through an approval link of this pause was given here (each names the pause)
        here = "" if entry is not None and entry.via == "link" else "; nothing was decided here"
        message = (
            f"{said} is no longer the question: {told} the agent asked again. The new request is in your inbox{here}."
        )
        return Standing("superseded", shown, _settled(view), entry, message)
    if entry is not None:
        if entry.decision == "expire":
            message = f"{said} expired unanswered at {moment(entry.at)}{_quorum(pause, entry)}."
            return Standing("expired", shown, _settled(view), entry, message)
        message = f"{said} was decided already: {decided(entry)}{_quorum(pause, entry)}."
        return Standing("used", shown, _settled(view), entry, message)
    if link.expired(now):
        message = f"This link to {said} expired at {moment(link.expires_at)}; open the request from your inbox."
        return Standing("expired", shown, view, None, message)
    if shown.expires_at is not None and shown.expires_at <= now:
        counted = _approvals_in(len(shown.approval.approved_by), shown.approval.required) if shown.approval else ""
        message = f"{said} expired at {moment(shown.expires_at)}{counted}. {view.on_expiry or ''}".strip()
        return Standing("expired", shown, _settled(view), None, message)
    waiting = view.approval.waiting_for if view.approval is not None and view.approval.waiting_for else ""
    return Standing("open", shown, view, None, f"{said} waits for a decision. {waiting}".strip())


def _settled(view: PauseView) -> PauseView:
    """The view of a pause nobody can decide any more: nobody is waited for, nobody may approve
    or deny or answer it (found by a probe: a used link said "Waiting for 0 more approvals from carol")."""
    if view.approval is None:
        return view
    return replace(view, approval=replace(view.approval, waiting_for="", may_approve=[], may_deny=[], may_respond=[]))


def _quorum(pause: Pause, entry: AuditEntry) -> str:
    """How far a quorum got, for the line of the entry that settled its pause: who approved an
    approval that completed one (the last approver alone is not who decided it); how many had
    approved a call cancelled or expired under one (as the console says it); "" otherwise."""
    if entry.decision in ("cancel", "expire"):
        return _approvals_in(entry.approvals, entry.required)
    approvers = pause.answer.approvals if pause.answer is not None and entry.decision == "approve" else None
    if not approvers or len(approvers) < 2:
        return ""
    return f" ({len(approvers)} approvals: {', '.join(a.principal for a in approvers)})"


def _approvals_in(approvals: int, required: int) -> str:
    """ " (1 of 2 approvals in)" for a call under a quorum; "" for one that needs one approval."""
    return f" ({approvals} of {required} approvals in)" if required > 1 else ""


def decided(entry: AuditEntry) -> str:
    """A decision as one line: "Approved by alice via Slack at 2026-01-01 12:00 UTC"."""
    return decided_words(entry.decision, entry.principal, entry.via, entry.at, entry.rule)


def decided_words(decision: str, principal: str | None, via: str, at: datetime, rule: str | None = None) -> str:
    """``decided``, from an audit entry's fields (as its JSON has them)."""
    done = _DONE.get(decision, decision.capitalize())
    if decision == "expire":
        return f"{done} at {moment(at)}"
    who = principal or (f"the rule “{rule}”" if rule else "someone")
    return f"{done} by {who} via {_CHANNELS.get(via, via)} at {moment(at)}"


def moment(at: datetime) -> str:
    """A time as every channel writes it: ``2026-01-01 12:00 UTC``."""
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
