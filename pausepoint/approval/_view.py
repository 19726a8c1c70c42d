"""How an approval reads to the people deciding it (``ApprovalView``): where it stands ("1 of 2
approvals"), who may still approve, deny or answer it, who may not and why, what a yes also grants.
Every surface shows it: the REST API, the console, the terminal chat, the Genkit wire.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..session._interrupts import ApprovalStatus, PendingInterrupt
from ..tools._display import ApprovalView, field_words
from ..tools._tool import Tool
from ._policy import ApprovalPolicy
from ._roles import NOT_SAID, SessionTenant

__all__ = ["approval_view", "handed_on_note"]


def approval_view(
    interrupt: PendingInterrupt, policy: ApprovalPolicy, tools: Mapping[str, Tool], tenant: SessionTenant = NOT_SAID
) -> ApprovalView:
    """The ``ApprovalView`` of ``interrupt`` (a ``PendingInterrupt`` with an ``approval``) under
    ``policy`` (an ``ApprovalPolicy``); ``tools`` name the agent's tools (for an offer's words).
    ``tenant``: its session's, whose members (kept per tenant) the view names as who may decide."""
    status = interrupt.approval
    assert status is not None  # a pause the approval policy governs
    name = interrupt.name
    counted = list(status.approved_by)
    excluded = [*counted]
    if status.separate and status.requested_by is not None and status.requested_by not in excluded:
        excluded.append(status.requested_by)
    may_approve = _without(policy.eligible(status.roles, name, "approve", tenant), excluded)
    may_deny = policy.eligible(status.roles, name, "deny", tenant)
    # a made-up result ends the pause as an approval would: not from the requester under
    # separation of duties (``ApprovalPolicy.check``), though counted approvers may still give one
    requester = [status.requested_by] if status.separate and status.requested_by is not None else []
    may_respond = _without(policy.eligible(status.roles, name, "respond", tenant), requester)
    progress = status.progress
    waiting_on = status.roles
    if waiting_on:  # an approval (an answer, ungated) is waited for from the roles that may give one
        giving = ("approve",) if status.gated else ("approve", "respond")
        waiting_on = [r for r in waiting_on if any(policy.allows(name, {r}, d) for d in giving)]
    waiting = _waiting(status, waiting_on, may_approve, excluded)
    grant_note = f"An approval may also approve later calls of {name} in this session." if status.grantable else None
    escalated = None
    if status.escalated and status.roles:
        escalated = f"Handed to {_or(status.roles)}: nobody decided it in time."
    return ApprovalView(
        required=status.required,
        approvals=len(counted),
        progress=progress,
        approved_by=counted,
        roles=status.roles,
        approving_roles=waiting_on,
        may_approve=may_approve,
        may_deny=may_deny,
        may_respond=may_respond,
        excluded=excluded,
        requested_by=status.requested_by,
        waiting_for=waiting,
        decisions=list(status.decisions),
        gated=status.gated,
        grantable=status.grantable,
        grant_note=grant_note,
        offer=_offer_text(status.offer, tools) if status.offer else None,
        rule=status.rule,
        escalated=escalated,
    )


def handed_on_note(interrupt: PendingInterrupt) -> str | None:
    """What happens to ``interrupt`` if nobody decides it in time, when the policy it paused
    under hands it on to other approvers then (None: the expiry policy answers it). The pause's
    own record says so, not the policy deployed now (a pause keeps its escalation)."""
    status = interrupt.approval
    if status is None or not status.gated or not status.handed_to:
        return None
    return f"It is handed to {_or(status.handed_to)} if nobody decides it in time."


def _without(names: list[str] | None, excluded: list[str]) -> list[str] | None:
    return None if names is None else [n for n in names if n not in excluded]


def _or(names: Sequence[str]) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _waiting(
    status: ApprovalStatus, roles: list[str] | None, may_approve: list[str] | None, excluded: list[str]
) -> str:
    left = max(status.required - len(status.approved_by), 0)
    more = "1 more approval" if left == 1 else f"{left} more approvals"
    if status.required == 1:
        more = "an approval" if status.gated else "an answer"
    who = ""
    if roles:
        who = f" from {_or(roles)}"
        if may_approve:
            who += f" ({_or(may_approve)})"
        elif may_approve == []:
            who += " (nobody left who may approve it)"
    not_them = ""
    if status.separate and status.requested_by:
        not_them = f"; not from {status.requested_by}, who asked for it"
    return f"Waiting for {more}{who}{not_them}."


def _offer_text(offer: dict[str, Any], tools: Mapping[str, Tool]) -> str:
    tool_name = offer.get("tool") or "?"
    tool = tools.get(tool_name)
    model = tool.input_model if tool is not None else None
    parts = []
    for field_name, conditions in (offer.get("bounds") or {}).items():
        for op, value in conditions.items():
            label, shown = field_words(model, field_name, value)
            words = {
                "equals": f"{label} {shown}",
                "max": f"{label} at most {shown}",
                "min": f"{label} at least {shown}",
            }
            if op == "one_of" and isinstance(value, list):
                words["one_of"] = f"{label} one of {', '.join(field_words(model, field_name, v)[1] for v in value)}"
            parts.append(words.get(op, f"{label} {op} {shown}"))
    uses = offer.get("uses")
    count = (
        f"one {tool_name} call" if uses == 1 else f"{tool_name} calls" if uses is None else f"{uses} {tool_name} calls"
    )
    text = f"A yes also approves {count}"
    if parts:
        text += " with " + (parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1])
    ttl = offer.get("ttl_seconds")
    if ttl:
        text += f", within the next {_duration(ttl)}"
    return text + "."


def _duration(seconds: float) -> str:
    if seconds % 3600 == 0:
        hours = int(seconds // 3600)
        return "1 hour" if hours == 1 else f"{hours} hours"
    if seconds % 60 == 0:
        minutes = int(seconds // 60)
        return "1 minute" if minutes == 1 else f"{minutes} minutes"
    return f"{seconds:g} seconds"
