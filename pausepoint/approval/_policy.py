"""Approval policies: who must approve which tool calls, and what decides without a person.

A tool may require approval of its exact call (``@ai.tool(requires_approval=True)``, or a
predicate of its validated input and run context). Such a call is paused by the runtime
*before* the tool runs; approving it runs the tool with exactly the arguments shown. An
``ApprovalPolicy`` — given to an agent (``define_agent(approval=...)``) or to the app
(``Pausepoint(approval=...)``; an agent's policy comes first) — says the rest:

``rules``
    decide without a person, first match wins: ``Rule.approve("small transfers",
    ["transfer_money"], when=lambda t: t.amount <= 100)``, ``Rule.deny(...)``, or
    ``Rule.ask(...)`` (a person must decide, even a tool that does not require approval, and no
    grant stands in for them). A rule naming no tools applies to every call that requires
    approval. The decision is in the audit trail with the rule's name.
``roles`` and ``members``
    which roles decide which tools' pauses, with which decisions (``Role(tools=[...],
    decisions=["approve", "deny"])``), and who holds which role (a mapping, or a plain function
    of the principal: not async, as roles are read while an answer is checked). A pause of a
    tool some role names may be decided only by that role's members; a pause of a tool no role
    names by anyone who may answer the session.
``quorum``
    distinct approvals a tool's calls need (``{"deploy": 2}``); one denial denies.
``separation_of_duties``
    the principal who sent the message that led to a call may not approve it (``True``: every
    call paused for approval — by ``requires_approval`` or by the tool itself, not an
    interrupt's question; or a collection of tool names).
``grantable``
    tools whose approval may grant later calls in the session (``Grant``), with the longest a
    grant may last (``{"transfer_money": timedelta(hours=8)}``, or a collection: no limit).
``ttl`` and ``escalation``
    how long a call paused for approval waits (``{"deploy": timedelta(minutes=30)}``), and who
    it is handed to when nobody decided in time (``{"deploy": [Escalation(to=["sre-leads"],
    ttl=timedelta(hours=1))]}``) instead of the agent's expiry policy; after the last step, the
    expiry policy decides.

Every mapping may use ``"*"`` for every tool; a tool's own entry comes before it. Policies
compose: ``agent_policy + app_policy`` keeps both rule lists (the left one's first), and per
tool the left one's setting — its entry for the tool, else its ``"*"`` — and the right one's
only where the left one has neither: an agent's ``quorum={"*": 2}`` holds for every tool, one
the app's policy names too (``quorum``, ``ttl``, ``escalation`` and ``grantable`` alike).

What the policy requires of a pause is recorded with it (``ApprovalRequest``), so every process
answers it alike; who holds a role is read when someone answers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, TypeAlias

from ..errors import AlreadyApproved, ApprovalForbidden, DecisionNotAllowed, DefinitionError
from ..session._durations import SAID, duration
from ..session._records import ApprovalRequest, EscalationStep
from ..tools._tool import Check, Tool, ToolRunContext, call_check
from . import _roles
from ._roles import Members, Need, both_members, lookup_roles, plain_members, together, unreachable

__all__ = [
    "DECISIONS",
    "ApprovalPolicy",
    "DecisionKind",
    "Escalation",
    "Role",
    "Rule",
]

log = logging.getLogger("pausepoint")

#: The kinds of decision a person gives on a pause (an edit is an approval of edited input).
DecisionKind: TypeAlias = Literal["approve", "edit", "deny", "respond"]
DECISIONS: tuple[DecisionKind, ...] = ("approve", "edit", "deny", "respond")

ANY = "*"


def _names(value: Collection[str] | str | None, what: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not all(isinstance(v, str) and v for v in value):
        raise DefinitionError(f"{what} is a collection of names, not {value!r}")
    return tuple(value)


@dataclass(frozen=True, slots=True)
class Rule:
    """A decision the policy makes without a person, when ``when`` holds for a call.

    ``then`` is ``"approve"`` (the call runs), ``"deny"`` (the model is told, with ``reason``)
    or ``"ask"`` (a person decides; no grant stands in). ``tools`` names the tools it applies
    to (None: every call that requires approval). ``when`` is a predicate of the validated
    input, or of the input and the ``ToolRunContext`` (sync or async; None: always). A
    predicate that raises is a reason to ask a person, never to approve.
    """

    name: str
    then: Literal["approve", "deny", "ask"]
    tools: Collection[str] | None = None
    when: Check | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise DefinitionError(f"a rule needs a name (it is shown in the audit trail), not {self.name!r}")
        if self.then not in ("approve", "deny", "ask"):
            raise DefinitionError(f"rule {self.name!r}: then must be 'approve', 'deny' or 'ask', not {self.then!r}")
        object.__setattr__(self, "tools", _names(self.tools, f"rule {self.name!r}: tools"))
        if self.when is not None and not callable(self.when):
            raise DefinitionError(f"rule {self.name!r}: when must be a predicate of the call's input")

    @classmethod
    def approve(cls, name: str, tools: Collection[str] | None = None, *, when: Check | None = None) -> Rule:
        """Approve matching calls without asking anyone."""
        return cls(name, "approve", tools, when)

    @classmethod
    def deny(
        cls, name: str, tools: Collection[str] | None = None, *, when: Check | None = None, reason: str | None = None
    ) -> Rule:
        """Deny matching calls; the model sees ``{"denied": True, "reason": reason or name}``."""
        return cls(name, "deny", tools, when, reason)

    @classmethod
    def ask(
        cls, name: str, tools: Collection[str] | None = None, *, when: Check | None = None, reason: str | None = None
    ) -> Rule:
        """A person must decide matching calls (no grant stands in for them)."""
        return cls(name, "ask", tools, when, reason)

    def covers(self, tool: str, required: bool) -> bool:
        return tool in self.tools if self.tools is not None else required


@dataclass(frozen=True, slots=True)
class Role:
    """What a role's members may decide: pauses of ``tools`` (``"*"``: every tool), with
    ``decisions`` among ``approve``, ``edit``, ``deny``, ``respond``."""

    tools: Collection[str] = (ANY,)
    decisions: Collection[str] = DECISIONS

    def __post_init__(self) -> None:
        object.__setattr__(self, "tools", frozenset(_names(self.tools, "Role.tools") or ()))
        decisions = _names(self.decisions, "Role.decisions") or ()
        unknown = set(decisions) - set(DECISIONS)
        if unknown:
            raise DefinitionError(f"Role.decisions: unknown {sorted(unknown)}; use {', '.join(DECISIONS)}")
        object.__setattr__(self, "decisions", frozenset(decisions))

    def names(self, tool: str) -> bool:
        return ANY in self.tools or tool in self.tools


@dataclass(frozen=True, slots=True)
class Escalation:
    """A pause nobody decided in time goes to the members of ``to``, who have ``ttl`` more."""

    to: Collection[str]
    ttl: timedelta

    def __post_init__(self) -> None:
        object.__setattr__(self, "to", _names(self.to, "Escalation.to"))
        if not self.to:
            raise DefinitionError("Escalation.to names at least one role")
        if duration(self.ttl) is None:
            raise DefinitionError(f"Escalation.ttl must be {SAID}, not {self.ttl!r}")


def _per_tool(value: Any, what: str, check: Callable[[Any], bool], expected: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        value = {ANY: value}
    for tool, item in value.items():
        if not isinstance(tool, str) or not check(item):
            raise DefinitionError(f"{what}[{tool!r}] must be {expected}, not {item!r}")
    return dict(value)


class ApprovalPolicy:
    """Who must approve which calls, and what decides without a person (see the module docstring).

    Raises ``DefinitionError`` for settings that cannot work (a quorum below 1, an escalation
    without a time-to-live, roles that are not ``Role`` objects, ...); an agent defined with it,
    for a quorum or an escalation step's roles fewer known members can approve (``check_members``).
    """

    def __init__(
        self,
        *,
        rules: Sequence[Rule] = (),
        roles: Mapping[str, Role] | None = None,
        members: Mapping[str, Collection[str]] | Callable[[str], Collection[str]] | None = None,
        quorum: Mapping[str, int] | int | None = None,
        separation_of_duties: bool | Collection[str] = False,
        grantable: Collection[str] | Mapping[str, timedelta | None] = (),
        ttl: Mapping[str, timedelta] | timedelta | None = None,
        escalation: Mapping[str, Sequence[Escalation]] | Sequence[Escalation] | None = None,
    ) -> None:
        for rule in rules:
            if not isinstance(rule, Rule):
                raise DefinitionError(f"rules are Rule objects (Rule.approve, Rule.deny, Rule.ask), not {rule!r}")
        self.rules: tuple[Rule, ...] = tuple(rules)
        self.roles: dict[str, Role] = dict(roles or {})
        for name, role in self.roles.items():
            if not isinstance(role, Role):
                raise DefinitionError(f"roles[{name!r}] must be a Role, not {role!r}")
        self.members: Members | None = plain_members(members)
        if members is not None and not callable(members):
            self.members = {p: frozenset(_names(r, f"members[{p!r}]") or ()) for p, r in members.items()}
        self.quorum: dict[str, int] = _per_tool(
            quorum, "quorum", lambda n: isinstance(n, int) and not isinstance(n, bool) and n >= 1, "an int >= 1"
        )
        if isinstance(separation_of_duties, bool):
            self._separate_gated, self._separate_tools = separation_of_duties, frozenset[str]()
        else:
            self._separate_gated = False
            self._separate_tools = frozenset(_names(separation_of_duties, "separation_of_duties") or ())
        if not isinstance(grantable, Mapping):
            grantable = dict.fromkeys(_names(grantable, "grantable") or ())
        self.grantable: dict[str, timedelta | None] = _per_tool(
            grantable, "grantable", lambda t: t is None or duration(t) is not None, f"{SAID}, or None",
        )  # fmt: skip
        self.ttl: dict[str, timedelta] = _per_tool(ttl, "ttl", lambda t: duration(t) is not None, SAID)
        if escalation is not None and not isinstance(escalation, Mapping):
            escalation = {ANY: escalation}
        self.escalation: dict[str, tuple[Escalation, ...]] = {}
        for tool, steps in (escalation or {}).items():
            if isinstance(steps, Escalation) or not all(isinstance(s, Escalation) for s in steps):
                raise DefinitionError(f"escalation[{tool!r}] is a list of Escalation steps")
            if self._setting(self.ttl, tool) is None:
                raise DefinitionError(
                    f"escalation[{tool!r}]: a pause escalates when its time runs out; give it a ttl first"
                )
            self.escalation[tool] = tuple(steps)

    def __repr__(self) -> str:
        return f"<ApprovalPolicy {len(self.rules)} rule(s), roles {sorted(self.roles)}>"

    # -- composing ----------------------------------------------------------------------------------

    def __add__(self, other: ApprovalPolicy) -> ApprovalPolicy:
        """Both policies: this one's rules first, then ``other``'s; per tool, this one's setting
        (its entry for the tool, else its ``"*"``), and ``other``'s only where this one has
        neither (``_first_then``). Roles of both (this one's where both define a name), members
        of both, and separation of duties where either asks for it."""
        if not isinstance(other, ApprovalPolicy):
            return NotImplemented
        combined = ApprovalPolicy.__new__(ApprovalPolicy)
        combined.rules = self.rules + other.rules
        combined.roles = {**other.roles, **self.roles}
        combined.members = both_members(self.members, other.members)
        combined.quorum = _first_then(self.quorum, other.quorum)
        combined._separate_gated = self._separate_gated or other._separate_gated
        combined._separate_tools = self._separate_tools | other._separate_tools
        combined.grantable = _first_then(self.grantable, other.grantable)
        combined.ttl = _first_then(self.ttl, other.ttl)
        combined.escalation = _first_then(self.escalation, other.escalation)
        return combined

    def with_members(self, members: Mapping[str, Collection[str]]) -> ApprovalPolicy:
        """This policy with more role holders (``pausepoint serve --approver`` adds them)."""
        return self + ApprovalPolicy(members=members)

    def check_tools(self, tools: Mapping[str, Tool], known: Collection[str], agent: str) -> None:
        """``DefinitionError`` for settings naming a tool that does not exist (a typo would make a
        rule that denies or asks never apply), a quorum on a tool whose calls never pause for
        approval, or a pause its members could never approve (``check_members``)."""
        self._check_tool_names(known, agent)
        for name, required in self.quorum.items():
            if required > 1 and name in tools and not self._gates(tools[name]):
                raise DefinitionError(
                    f"agent {agent!r}: quorum[{name!r}]: a quorum counts approvals of calls paused for "
                    "approval; give the tool requires_approval=... or a Rule.ask"
                )
        self.check_members(tools, agent)

    def check_members(
        self,
        tools: Mapping[str, Tool],
        agent: str,
        tenants: Mapping[str | None, Mapping[str, Collection[str]]] | None = None,
    ) -> None:
        """``DefinitionError`` naming every pause of ``tools`` its members could never approve
        (``unmet_needs``)."""
        unmet = self.unmet_needs(tools, agent, tenants)
        if unmet:
            raise DefinitionError("; ".join(why for _, why in unmet))

    def unmet_needs(
        self,
        tools: Mapping[str, Tool],
        agent: str,
        tenants: Mapping[str | None, Mapping[str, Collection[str]]] | None = None,
    ) -> list[tuple[Need, str]]:
        """Each pause of ``tools`` its members could never approve, with why in words: a quorum
        more than the members holding a role that may approve it, or an escalation step handing
        it to roles fewer members hold than its approvals need (a role nobody holds: a typo, or
        nobody left to ask). ``tenants``: members kept apart, each tenant's (``None``: of no
        tenant) holding its roles in its own sessions, beside the policy's own members; unmet
        only where no tenant's members reach it. Nothing is unmet while the members are not
        known: none given, or a function of the principal (it may name anyone)."""
        if callable(self.members) or (self.members is None and not tenants):
            return []
        own = self.members or {}
        groups = {tenant: together(own, held) for tenant, held in tenants.items()} if tenants else {None: own}
        held = {role for group in groups.values() for roles in group.values() for role in roles}
        unmet = []
        for need in self._needs(tools):
            counts = {tenant: len(self._approvers(group, need)) for tenant, group in groups.items()}
            if max(counts.values()) < need.required:
                unmet.append((need, unreachable(agent, need, counts, held, self.roles)))
        return unmet

    def _check_tool_names(self, known: Collection[str], agent: str) -> None:
        """``DefinitionError`` for a setting naming a tool not in ``known``."""
        named: list[tuple[str, str]] = [(f"rule {r.name!r}", t) for r in self.rules for t in r.tools or ()]
        named += [(f"role {n!r}", t) for n, role in self.roles.items() for t in role.tools]
        for what, table in (("quorum", self.quorum), ("grantable", self.grantable), ("ttl", self.ttl),
                            ("escalation", self.escalation)):  # fmt: skip
            named += [(what, t) for t in table]
        named += [("separation_of_duties", t) for t in self._separate_tools]
        for what, named_tool in named:
            if named_tool != ANY and named_tool not in known:
                raise DefinitionError(
                    f"agent {agent!r}: the approval policy's {what} names {named_tool!r}, which is no tool"
                )

    def _gates(self, tool: Tool) -> bool:
        """Whether calls of ``tool`` may be paused for approval (what a quorum and an escalation are of)."""
        named = any(r.tools and tool.name in r.tools for r in self.rules)
        return not tool.pauses_only and bool(tool.requires_approval or named)

    def _needs(self, tools: Mapping[str, Tool]) -> Iterator[Need]:
        """What approving each tool's pauses takes of the members: the deciding roles' quorum, and
        each escalation step's roles as many approvals."""
        for tool in filter(self._gates, tools.values()):
            required, deciding = self.required(tool.name), self.roles_deciding(tool.name)
            if deciding is not None and required > 1:
                yield Need(tool.name, 0, tuple(sorted(deciding)), required)
            for number, step in enumerate(self.escalation_for(tool.name), 1):
                yield Need(tool.name, number, tuple(sorted(step.to)), required)

    def _approvers(self, members: Mapping[str, Collection[str]], need: Need) -> list[str]:
        """Who of ``members`` holds one of ``need``'s roles that may approve its tool (only a role
        that may approve counts toward a quorum: one that may only deny does not)."""
        return [p for p, held in members.items() if self._gives(need.tool, set(held) & set(need.roles), "approve")]

    def _gives(self, tool: str, held: set[str], decision: str) -> bool:
        """Whether holding ``held`` (of the roles deciding a pause of ``tool``) gives ``decision``."""
        return bool(held) and self.allows(tool, held, decision)

    # -- before a call runs -------------------------------------------------------------------------

    def has_say(self, tools: Mapping[str, Tool]) -> bool:
        """Whether this policy, or one of ``tools`` (one that requires approval or approves its
        own calls), has any say over calls at all: if not, the turn loop skips the policy."""
        return bool(
            self.rules
            or self.roles
            or self._separate_tools
            or self._separate_gated  # every pause for approval is reviewed: its requester may not approve it
            or self.grantable  # a grant approves later calls: the gate looks for one
            or any(t.requires_approval is not False or t.approves is not None for t in tools.values())
        )

    def governs(self, tool: str) -> bool:
        """Whether any setting names ``tool`` (or every tool): its pauses need the policy's review
        (a grant given with an answer too)."""
        if any(r.tools is not None and tool in r.tools for r in self.rules):
            return True
        if any(role.names(tool) for role in self.roles.values()):
            return True
        return self._separate_gated or tool in self._separate_tools or self.may_grant(tool)

    def asks_about(self, tool: str) -> bool:
        """Whether a rule names ``tool``: its calls are judged even when it requires no approval."""
        return any(r.tools is not None and tool in r.tools for r in self.rules)

    async def rule_for(
        self, tool: str, validated: Any, ctx: ToolRunContext, required: bool
    ) -> tuple[Rule | None, str | None]:
        """The first rule that decides the call (and None), or (None, why a person must decide
        because a rule could not be evaluated), or (None, None): no rule applies."""
        for rule in self.rules:
            if not rule.covers(tool, required):
                continue
            if rule.when is not None:
                try:
                    matched = await call_check(rule.when, validated, ctx)
                except Exception as exc:
                    log.warning("approval rule %r failed on a call of %r; a person decides", rule.name, tool,
                                exc_info=True)  # fmt: skip
                    return (
                        None,
                        f"the rule {rule.name!r} could not be evaluated ({type(exc).__name__}): a person decides",
                    )
                if not matched:
                    continue
            return rule, None
        return None, None

    def request(
        self,
        tool: Tool,
        requester: str | None,
        *,
        gated: bool,
        rule: str | None = None,
        offer: dict[str, Any] | None = None,
        question: bool = False,
    ) -> ApprovalRequest | None:
        """What deciding a pause of ``tool`` takes (None: nothing beyond the session's rights).
        ``question``: the pause is one the call asked mid-way (``Tool.asks``), answered or denied."""
        name = tool.name
        roles = self.roles_deciding(name)
        # A tool's own pause is for approval too (a yes runs the call); an interrupt's, or a
        # question the call asked mid-way, is a question.
        approval = gated or not (tool.pauses_only or question)
        separate = self.separates(name, approval)
        # a grant approves later calls a person would approve: gated ones, and a tool's own pauses
        grantable = self.may_grant(name) and approval
        if not gated and roles is None and not separate and offer is None and not grantable:
            return None
        if gated:
            decisions = ["approve", "edit", "deny"] if tool.allow_input_edits else ["approve", "deny"]
        elif question:
            decisions = ["deny", "respond"]
        else:
            decisions = list(DECISIONS)
        required = self._setting(self.quorum, name) or 1 if gated else 1
        if required > 1 and "edit" in decisions:
            decisions.remove("edit")  # approvals are of one input: an edit would void the others'
        steps = self.escalation_for(name) if gated else ()
        return ApprovalRequest(
            required=required,
            roles=None if roles is None else sorted(roles),
            requester=requester,
            separate=separate,
            gated=gated,
            decisions=decisions,
            grantable=required == 1 and grantable,
            offer=offer,
            rule=rule,
            escalation=[EscalationStep(sorted(s.to), s.ttl.total_seconds()) for s in steps],
        )

    def pause_ttl(self, tool: str) -> timedelta | None:
        found: timedelta | None = self._setting(self.ttl, tool)
        return found

    # -- when someone answers -----------------------------------------------------------------------

    def escalation_for(self, tool: str) -> tuple[Escalation, ...]:
        """The steps a pause of ``tool`` the policy gates is handed on by, in order (none: its
        expiry policy answers it when nobody decides it in time)."""
        steps: tuple[Escalation, ...] = self._setting(self.escalation, tool) or ()
        return steps

    def roles_deciding(self, tool: str) -> set[str] | None:
        """The roles whose members decide ``tool``'s pauses (None: no role names it)."""
        found = {name for name, role in self.roles.items() if role.names(tool)}
        return found or None

    def roles_of(self, principal: str | None) -> frozenset[str]:
        """The roles ``principal`` holds. Raises ``ApprovalForbidden`` (``reason="members"``)
        when a ``members`` function fails: a lookup that failed never lets anyone decide."""
        return self.known_roles(principal)[0]

    def known_roles(self, principal: str | None) -> tuple[frozenset[str], bool]:
        """``roles_of``, and whether those are all of them: a ``members`` function that returns
        None cannot say for ``principal`` here (``token_roles``, for anyone but the caller)."""
        if principal is None or self.members is None:
            return frozenset(), True
        try:
            return lookup_roles(self.members, principal)
        except Exception as exc:
            log.warning("the members function of the approval policy failed for %r", principal, exc_info=True)
            raise ApprovalForbidden(
                f"the approval policy could not look up the roles of {principal!r} ({type(exc).__name__}); "
                "nobody decides on a lookup that failed",
                reason="members",
                principal=principal,
            ) from exc

    def separates(self, tool: str, gated: bool) -> bool:
        return (gated and self._separate_gated) or tool in self._separate_tools

    def allows(self, tool: str, roles: Collection[str], decision: str) -> bool:
        """Whether holding ``roles`` (those that decide the pause) lets one give ``decision``.
        A role the policy does not define (an escalation target) gives every decision."""
        for name in roles:
            role = self.roles.get(name)
            if role is None or not role.names(tool) or decision in role.decisions:
                return True
        return False

    def check(
        self,
        principal: str | None,
        request: ApprovalRequest,
        roles: list[str] | None,
        decision: DecisionKind,
        tool: str,
        approved_by: Collection[str] = (),
    ) -> None:
        """Raise unless ``principal`` may give ``decision`` on a pause that requires ``request``
        (``roles``: who decides it now, escalations included; ``approved_by``: approvals counted).
        Whether they may answer it at all comes first (``ApprovalForbidden``), then whether the
        pause takes that decision (``DecisionNotAllowed``), then what their roles let them do."""
        held = None if roles is None else self.roles_of(principal) & set(roles)
        if roles is not None and not held:
            raise ApprovalForbidden(
                f"{principal or 'an unnamed caller'!r} holds none of the roles that decide {tool!r} "
                f"({', '.join(roles)})",
                reason="role",
                roles=list(roles),
            )
        if decision not in request.decisions:
            raise DecisionNotAllowed(
                f"a pause of {tool!r} takes {', '.join(request.decisions)}, not {decision}",
                decision=decision,
                allowed=list(request.decisions),
            )
        approving = decision in ("approve", "edit")
        if decision != "deny" and request.separate:  # a made-up result ends it as an approval would
            if principal is None:
                raise ApprovalForbidden(
                    f"separation of duties: approving {tool!r} needs a named principal", reason="anonymous"
                )
            if principal == request.requester:
                raise ApprovalForbidden(
                    f"separation of duties: {principal!r} asked for this call of {tool!r} and may not approve it "
                    "(nor answer it in the tool's place): only deny it",
                    reason="separation_of_duties",
                    principal=principal,
                )
        if approving and request.required > 1:
            if principal is None:
                raise ApprovalForbidden(
                    f"{tool!r} needs {request.required} distinct approvers: approvals must be named",
                    reason="anonymous",
                )
            if principal in approved_by:
                raise AlreadyApproved(
                    f"{principal!r} approved this call of {tool!r} already; it needs {request.required} "
                    "distinct approvers",
                    principal=principal,
                )
        if held is None:
            return
        if not self.allows(tool, held, decision):
            raise ApprovalForbidden(
                f"the role(s) {', '.join(sorted(held))} may not {decision} {tool!r}",
                reason="decision",
                roles=list(held),
            )

    def eligible(
        self, roles: list[str] | None, tool: str, decision: DecisionKind, tenant: _roles.SessionTenant = _roles.NOT_SAID
    ) -> list[str] | None:
        """Who may give ``decision`` on a pause decided by ``roles`` in a session of ``tenant``
        (None: anyone who may answer the session, or members the policy cannot list there:
        ``listed_members``; members kept per tenant list the session's tenant's)."""
        listed = None if roles is None or self.members is None else _roles.listed_members(self.members, tenant)
        if listed is None:
            return None
        wanted = set(roles or ())
        return sorted(p for p, held in listed.items() if self._gives(tool, set(held) & wanted, decision))

    # -- grants ---------------------------------------------------------------------------------------

    def may_grant(self, tool: str) -> bool:
        return tool in self.grantable or ANY in self.grantable

    def grant_limit(self, tool: str) -> timedelta | None:
        found: timedelta | None = self._setting(self.grantable, tool)
        return found

    def required(self, tool: str) -> int:
        """How many approvals a call of ``tool`` paused for approval needs."""
        found: int = self._setting(self.quorum, tool) or 1
        return found

    # -- helpers --------------------------------------------------------------------------------------

    @staticmethod
    def _setting(table: Mapping[str, Any], tool: str) -> Any:
        return table[tool] if tool in table else table.get(ANY)


def _first_then(first: Mapping[str, Any], then: Mapping[str, Any]) -> dict[str, Any]:
    """One per-tool table of two policies', looked up as ``_setting`` does: for each tool,
    ``first``'s entry, else ``first``'s ``"*"``, else ``then``'s entry, else ``then``'s ``"*"``.
    A ``"*"`` in ``first`` is its setting for every tool, so ``then`` has no say left (merged
    key by key, ``then``'s entry for a tool would come before ``first``'s ``"*"``)."""
    return dict(first) if ANY in first else {**then, **first}
