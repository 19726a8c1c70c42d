"""Role holders, counted: what approving a tool's pauses takes of the members who hold an
approval policy's roles (``Need``), members of a tenant taken together with the policy's own,
and why a need no members reach cannot work, in words. ``ApprovalPolicy.check_members`` counts
with them when an agent is defined and when approvers are added (``pausepoint serve``)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import NamedTuple

__all__ = ["Need", "together", "unreachable"]


class Need(NamedTuple):
    """What approving a tool's pauses takes: ``required`` approvals by holders of ``roles``, at
    escalation step ``step`` (0: before any escalation)."""

    tool: str
    step: int
    roles: tuple[str, ...]
    required: int


def together(a: Mapping[str, Collection[str]], b: Mapping[str, Collection[str]]) -> dict[str, frozenset[str]]:
    """Both mappings of members to their roles: a member of both holds the roles of each."""
    return {p: frozenset(a.get(p, ())) | frozenset(b.get(p, ())) for p in {*a, *b}}


def unreachable(
    agent: str, need: Need, counts: Mapping[str | None, int], held: Collection[str], defined: Collection[str]
) -> str:
    """Why ``need`` cannot be met, in words: how many of the members (``counts``: per tenant, or
    one count) may approve, and a role of an escalation step that no policy ``defined`` and
    nobody ``held`` (a typo)."""
    if len(counts) == 1:
        have = f"only {max(counts.values())} member(s)"
    else:
        each = ", ".join(f"{tenant or 'no tenant'}: {n}" for tenant, n in counts.items())
        have = f"at most {max(counts.values())} member(s) of any one tenant ({each})"
    if need.step == 0:
        why = f"{need.tool!r} needs {need.required} approvals, but {have} hold a role that may approve it"
        return f"agent {agent!r}: {why}"
    unknown = ", ".join(r for r in need.roles if r not in defined and r not in held)
    known = ", ".join(sorted(defined)) or "none"
    typo = f" ({unknown}: a role no approval policy defines and no member holds; roles: {known})" if unknown else ""
    return (
        f"agent {agent!r}: escalation step {need.step} of {need.tool!r} hands it to {', '.join(need.roles)}, "
        f"but {have} hold a role there that may approve it, and it needs {need.required}{typo}"
    )
