"""The approval gate: what the approval policy says about a call before it runs, and about an
answer before it is recorded. Pure decisions over the session state; the turn loop records them.

Before a call runs (``judge``)::

    approved already with this very input (by a person, a rule, a grant) ── run
    requires_approval (flag or predicate) / a rule names the tool
        first matching rule: approve ── CallDecided(rule), run
                             deny    ── CallDecided(rule) + the denial as its result
                             ask     ── pause for a person (no grant stands in)
        none, approval required: a grant covers it ── CallDecided(grant), run
                                 otherwise        ── pause for a person (ApprovalPaused, gated)
    a grant covers it (a tool that pauses itself) ── CallDecided(grant), run approved
    otherwise ── run

An approval by a rule or a grant is what a person's Approve is (``Verdict``): a tool that pauses
itself runs with ``tool_approved``, and an interrupt-only tool is answered with its yes.

A predicate or a rule that raises makes a person decide: a broken check never approves.

When someone answers a pause the policy governs (``review``): the decision must be one the pause
takes, by someone allowed to give it (roles, separation of duties); an approval of a call that
needs several is counted (``ApprovalGiven``) until the last one, which resolves it (the
``CallAnswered``, listing every approval); a grant asked for, or offered by an interrupt's yes,
is recorded with the answer (``GrantAdded``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ValidationError

from ..content._jsondata import JsonLimits, NotJsonData, json_data
from ..errors import ApprovalForbidden, InvalidGrant
from ..session._durations import SAID, duration
from ..session._grants import Grant
from ..session._interrupts import ToolResponse, ToolRestart
from ..session._records import (
    ApprovalGiven,
    ApprovalPaused,
    ApprovalRequest,
    Approver,
    CallAnswered,
    GrantAdded,
    Record,
    new_ref,
)
from ..session._state import Pause, SessionState
from ..session._views import approving as approves_call
from ..tools._tool import Tool, ToolRunContext, call_check
from ._approve import APPROVED_METADATA, approving_output, yes_or_no
from ._grants import check_bounds, within
from ._policy import ApprovalPolicy, DecisionKind

if TYPE_CHECKING:
    from ..tools._dispatch import CallJob

__all__ = ["Verdict", "counted", "judge", "mark_approved", "offer_for", "request_for_pause", "review"]

log = logging.getLogger("pausepoint")


@dataclass(slots=True)
class Verdict:
    """The gate's say on one call: ``run`` it, ``approve`` / ``deny`` it without a person (by
    ``rule`` or ``grant``), or ``ask`` a person (``request``; the pause shows ``input``).

    An approval means for the call what a person's Approve means for its pause (``_approve``):
    a call the runtime would not pause (a tool that pauses itself until approved) runs with
    ``resumed_metadata={"tool_approved": True}`` (``as_approved``: it runs, not pauses again;
    ``mark_approved``) — one it would pause is gated already, and its first run keeps None, as the
    SPEC says a first run's is; an interrupt-only tool is answered with its yes (``yes``) and never
    runs."""

    kind: Literal["run", "approve", "deny", "ask"]
    rule: str | None = None
    grant: str | None = None
    reason: str | None = None
    request: ApprovalRequest | None = None
    input: Any = None
    ttl: timedelta | None = None
    yes: Any = None
    as_approved: bool = False


_RUN = Verdict("run")


async def judge(
    policy: ApprovalPolicy,
    tool: Tool | None,
    state: SessionState,
    job: CallJob,
    principal: str | None,
    now: datetime,
    limits: JsonLimits,
) -> Verdict:
    """The gate's say on ``job`` (see the module docstring)."""
    if tool is None or job.refusal is not None:
        return _RUN  # nothing runs anyway: the call is answered with an error
    call = state.calls.get(job.request.ref)
    if call is not None and call.approved is not None and call.approved == job.input:
        return _RUN
    required = tool.requires_approval
    # A tool that pauses itself until approved (``raise Interrupt``) is approved by a grant as by
    # a person, before it first runs (a restart is a person's answer already): it runs with
    # tool_approved (``mark_approved``).
    granted = (
        bool(state.live_grants)
        and job.resumed_metadata is None
        and not tool.pauses_only
        and policy.may_grant(tool.name)
    )
    if required is False and not policy.asks_about(tool.name) and not granted:
        return _RUN
    try:
        validated = tool.validate_input(job.input)
    except ValidationError:
        return _RUN  # the tool never runs on it: the model is told its input is invalid
    ctx = ToolRunContext(session_id=state.session_id, ref=job.request.ref, principal=principal)
    problem = None
    if callable(required):
        try:
            required = await call_check(required, validated, ctx)
        except Exception as exc:
            log.warning("the requires_approval check of %r failed; a person decides", tool.name, exc_info=True)
            required, problem = (
                True,
                f"the approval check of {tool.name!r} failed ({type(exc).__name__}): a person decides",
            )
    rule, broken = await policy.rule_for(tool.name, validated, ctx, bool(required))
    problem = problem or broken
    if rule is not None and rule.then == "approve" and problem is None:
        return _approval(tool, rule.name, limits, as_approved=not required)
    if rule is not None and rule.then == "deny":
        return Verdict("deny", rule=rule.name, reason=rule.reason or rule.name)
    asked = rule is not None and rule.then == "ask"
    if not (required or asked or problem):
        grant = find_grant(policy, state, tool, validated, now) if granted and rule is None else None
        return _RUN if grant is None else Verdict("approve", grant=grant, as_approved=True)
    if not asked and problem is None:
        grant = find_grant(policy, state, tool, validated, now)
        if grant is not None:
            return Verdict("approve", grant=grant)
    request = policy.request(tool, state.requester, gated=True, rule=rule.name if asked and rule else None)
    assert request is not None
    why = problem or (rule.reason or f"the rule {rule.name!r} asks a person" if asked and rule else None)
    return Verdict(
        "ask",
        rule=rule.name if asked and rule else None,
        reason=why or f"{tool.name} needs approval before it runs",
        request=request,
        input=_shown(tool, validated, job.input, limits),
        ttl=policy.pause_ttl(tool.name),
    )


def _approval(tool: Tool, rule: str, limits: JsonLimits, *, as_approved: bool) -> Verdict:
    """A rule's approval of a call of ``tool``; for an interrupt-only tool, with the yes that
    answers it — or, when no yes can (its output has no yes/no field), no say: the tool asks."""
    if not tool.pauses_only:
        return Verdict("approve", rule=rule, as_approved=as_approved)
    try:
        return Verdict("approve", rule=rule, yes=json_data(approving_output(tool), limits))
    except (ValueError, NotJsonData):
        log.warning("the rule %r approves %r, which a yes cannot answer: a person answers it", rule, tool.name)
        return _RUN


def mark_approved(job: CallJob) -> None:
    """Make ``job`` run as an approval runs it: with ``tool_approved`` in its ``resumed_metadata``
    (the same job: its batch knows it by identity)."""
    job.resumed_metadata = {**(job.resumed_metadata or {}), **APPROVED_METADATA}


def _shown(tool: Tool, validated: BaseModel, raw: Any, limits: JsonLimits) -> Any:
    """The input a pause shows (and an approval runs): the validated one, as JSON (by alias, as
    the tool's schema names its fields: ``Tool.input_json``)."""
    try:
        return json_data(tool.input_json(validated), limits)
    except NotJsonData:
        return raw  # what the model sent passed the same rules on the way in


def find_grant(
    policy: ApprovalPolicy, state: SessionState, tool: Tool, validated: BaseModel, now: datetime
) -> str | None:
    """The id of the first live grant that approves this call, if any."""
    if not state.live_grants or policy.required(tool.name) > 1:
        return None
    separate = policy.separates(tool.name, True)
    roles = policy.roles_deciding(tool.name)
    for grant_id in state.live_grants:
        grant = state.grants[grant_id]
        added = grant.record
        if added.tool != tool.name or not grant.active(now):
            continue
        if separate and (added.principal is None or added.principal == state.requester):
            continue  # the grantor cannot approve a call they asked for, even by a grant
        if roles is not None and not _still_approves(policy, added, tool.name, roles):
            continue  # the grantor no longer holds a role that approves it
        if within(tool.input_model, added.bounds, validated):
            return grant_id
    return None


def _still_approves(policy: ApprovalPolicy, added: GrantAdded, tool: str, roles: set[str]) -> bool:
    """Whether the grantor holds one of ``roles`` that approves ``tool`` (a failed lookup of
    their roles does not: a person decides). Where the policy's members cannot say now (a
    token's roles, the grantor not the caller), the roles that approved it when they gave it."""
    try:
        held, whole = policy.known_roles(added.principal)
    except ApprovalForbidden:
        return False
    if not whole:
        held |= frozenset(added.roles or ())
    return policy.allows(tool, held & roles, "approve")


def _approving_roles(policy: ApprovalPolicy, principal: str | None, tool: str) -> list[str] | None:
    """Those of ``principal``'s roles that approve ``tool``, as a grant they give records them
    (None: no role decides ``tool``)."""
    deciding = policy.roles_deciding(tool)
    if deciding is None:
        return None
    return sorted(r for r in policy.roles_of(principal) & deciding if policy.allows(tool, {r}, "approve"))


def request_for_pause(
    policy: ApprovalPolicy, tool: Tool, state: SessionState, paused_input: Any, metadata: dict[str, Any] | None
) -> ApprovalRequest | None:
    """What answering a pause a tool made itself (an interrupt, ``raise Interrupt``, a question
    it asked mid-way) takes."""
    offer = offer_for(policy, tool, paused_input)
    return policy.request(tool, state.requester, gated=False, offer=offer, question=tool.asks(metadata))


def offer_for(policy: ApprovalPolicy, tool: Tool, paused_input: Any) -> dict[str, Any] | None:
    """The grant a yes to an interrupt gives (``define_interrupt(approves=...)``), as JSON."""
    if tool.approves is None:
        return None
    try:
        grant = tool.approves(tool.validate_input(paused_input))
    except Exception:
        log.warning("the approves= function of %r failed: no grant is offered", tool.name, exc_info=True)
        return None
    if grant is None:
        return None
    if not isinstance(grant, Grant) or grant.tool is None:
        log.warning("the approves= function of %r returned %r, not a Grant naming its tool", tool.name, grant)
        return None
    if policy.required(grant.tool) > 1:
        return None  # a call that needs several approvals is never approved by one yes
    return grant.scope()


# -- answers ------------------------------------------------------------------------------------


def decision_kind(
    tool: Tool | None, answer: ToolResponse | ToolRestart, claim: CallAnswered, pause_metadata: dict[str, Any] | None
) -> DecisionKind:
    """What kind of decision an answer is: an approval, an edit, a denial, or a made-up result
    (an answer to a question the call asked mid-way, handed back to it, is an answer or a denial)."""
    if tool is not None and tool.asks(pause_metadata):
        return "deny" if isinstance(answer, ToolResponse) and answer.decision == "deny" else "respond"
    if claim.decision == "restart":
        return "edit" if claim.replace_input is not None else "approve"
    if claim.decision == "deny":
        return "deny"
    if tool is not None and tool.pauses_only:
        said = yes_or_no(tool, claim.output)
        if said is not None:
            return "approve" if said else "deny"
    return "respond"


def review(
    policy: ApprovalPolicy,
    state: SessionState,
    pause: Pause,
    answer: ToolResponse | ToolRestart,
    claim: CallAnswered,
    tools: dict[str, Tool] | Any,
    limits: JsonLimits,
) -> list[Record]:
    """The records an answer the policy governs makes: the claim (a quorum's approvals listed
    on it), or an ``ApprovalGiven`` until the quorum is reached; and the grants it gives.
    Raises the ``ResumeRefused`` that says why the answer cannot be given."""
    tool: Tool | None = tools.get(claim.name)  # None: a denial of a pause whose tool is gone (``_fit``)
    paused = pause.record
    if isinstance(paused, ApprovalPaused):
        request, roles = paused.approval, pause.roles
    else:  # paused before the policy named this tool: its current rules apply
        fresh = (
            policy.request(tool, None, gated=False, question=tool.asks(paused.metadata))
            if tool is not None
            else _deciders(policy, claim.name)
        )
        if fresh is None and answer.grant is None:
            return [claim]
        request = fresh or ApprovalRequest()
        roles = request.roles
    kind = decision_kind(tool, answer, claim, paused.metadata)
    approved_by = pause.approved_by()
    policy.check(claim.principal, request, roles, kind, claim.name, approved_by)
    records: list[Record] = []
    approving = kind in ("approve", "edit")
    if answer.grant is not None:
        if not approving:
            asked = tool is not None and tool.asks(paused.metadata)
            why = (
                f"an answer to the question {claim.name!r} asked approves nothing"
                if asked
                else "it approves later calls too"
            )
            raise InvalidGrant(f"a grant goes with an approval: {why}", ref=claim.call_ref)
        if claim.decision == "restart" and not approves_call(pause, claim):  # it runs the call, not approved
            raise InvalidGrant(
                "a grant goes with an approval: a restart of a tool that paused itself approves it with "
                'resumed_metadata={"tool_approved": true}, and this one has none',
                ref=claim.call_ref,
            )
        records.append(_grant(policy, answer.grant, claim.name, tools, claim, request, limits))
    if approving and request.offer is not None:
        offered = Grant.from_scope(request.offer)
        if offered.tool is not None and offered.tool in tools:
            held = _approving_roles(policy, claim.principal, offered.tool)
            records.append(_added(offered, offered.tool, offered.bounds, offered.ttl, claim, held))
    if request.gated and request.required > 1:
        if approving and len(approved_by) + 1 < request.required:
            assert claim.principal is not None  # checked: a quorum's approvals are named
            given = ApprovalGiven(
                ref=claim.ref,
                call_ref=claim.call_ref,
                name=claim.name,
                at=claim.at,
                principal=claim.principal,
                via=claim.via,
                metadata=claim.metadata,
                idempotency_key=claim.idempotency_key,
                request_hash=claim.request_hash,
            )
            return [given, *records]
        # how far the quorum got: with this approval, the last one it needed; a denial says it too
        this = [Approver(claim.principal or "", claim.at, claim.via)] if approving else []
        claim.approvals = [*(counted(pause) or ()), *this]
    return [claim, *records]


def _deciders(policy: ApprovalPolicy, tool: str) -> ApprovalRequest | None:
    """What denying a pause of ``tool`` takes now that the agent no longer defines the tool: the
    roles that decide its calls, if any name it."""
    roles = policy.roles_deciding(tool)
    return None if roles is None else ApprovalRequest(roles=sorted(roles))


def counted(pause: Pause) -> list[Approver] | None:
    """The approvals a pause for approval had counted (its audit entry says how far it got: "1
    of 2"); None for any other pause."""
    if not isinstance(pause.record, ApprovalPaused):
        return None
    return [Approver(given.principal, given.at, given.via) for _, given in pause.approvals]


def _grant(
    policy: ApprovalPolicy,
    grant: Grant,
    paused_tool: str,
    tools: Any,
    claim: CallAnswered,
    request: ApprovalRequest,
    limits: JsonLimits,
) -> GrantAdded:
    """A grant a person asked for, checked against the policy and the tool (``InvalidGrant``)."""
    if not isinstance(grant, Grant):
        raise InvalidGrant(f"a grant is a Grant, not {grant!r}", ref=claim.call_ref)
    target = paused_tool if grant.tool is None else grant.tool  # "" names no tool
    tool = tools.get(target)
    if tool is None:
        raise InvalidGrant(f"a grant names {target!r}, which is no tool of this agent", ref=claim.call_ref)
    if not policy.may_grant(target):
        raise InvalidGrant(f"the approval policy lets nobody grant calls of {target!r}", ref=claim.call_ref)
    if tool.pauses_only:
        raise InvalidGrant(
            f"{target!r} only asks a question: a grant approves calls that do work, not answers", ref=claim.call_ref
        )
    if request.required > 1:  # whichever tool it names: one approval of a quorum gives no grant
        raise InvalidGrant(
            f"this call of {paused_tool!r} needs several approvals ({request.required}): an approval of it gives "
            "no grant, for any tool (a grant never stands in for a quorum)",
            ref=claim.call_ref,
        )
    if policy.required(target) > 1:
        raise InvalidGrant(
            f"calls of {target!r} need several approvals: no grant stands in for them", ref=claim.call_ref
        )
    roles = policy.roles_deciding(target)
    if roles is not None and not policy.allows(target, policy.roles_of(claim.principal) & roles, "approve"):
        raise ApprovalForbidden(
            f"{claim.principal or 'an unnamed caller'!r} holds no role that approves {target!r}: they cannot grant it",
            reason="role",
            roles=sorted(roles),
        )
    try:
        bounds = check_bounds(tool.input_model, json_data(grant.bounds, limits), target)
    except NotJsonData as exc:
        raise InvalidGrant(f"a grant's bounds cannot be recorded: {exc}", ref=claim.call_ref) from None
    uses = grant.uses
    if uses is not None and (not isinstance(uses, int) or isinstance(uses, bool) or not 1 <= uses <= 10**9):
        shown = "a larger number" if isinstance(uses, int) and uses > 10**9 else repr(uses)  # 4,301 digits: no repr
        raise InvalidGrant(f"a grant's uses is a count from 1 to 10**9 (or None), not {shown}", ref=claim.call_ref)
    limit = policy.grant_limit(target)
    ttl = grant.ttl
    if ttl is not None and duration(ttl) is None:
        raise InvalidGrant(f"a grant's ttl is {SAID}, not {ttl!r}", ref=claim.call_ref)
    if ttl is not None and limit is not None and ttl > limit:
        raise InvalidGrant(f"grants of {target!r} last at most {limit}", ref=claim.call_ref, limit=str(limit))
    return _added(grant, target, bounds, ttl or limit, claim, _approving_roles(policy, claim.principal, target))


def _added(
    grant: Grant, tool: str, bounds: Any, ttl: timedelta | None, claim: CallAnswered, roles: list[str] | None
) -> GrantAdded:
    return GrantAdded(
        id=new_ref(),
        tool=tool,
        at=claim.at,
        principal=claim.principal,
        via=claim.via,
        bounds=bounds,
        uses=grant.uses,
        expires_at=None if ttl is None else claim.at + ttl,
        ref=claim.ref,
        call_ref=claim.call_ref,
        roles=roles,
    )
