"""Role holders: an approval policy's ``members`` (a mapping, or a plain function of the
principal), read, composed and listed for a pause's view (``listed_members``); and counted:
what approving a tool's pauses takes of the members who hold the policy's roles (``Need``),
members of a tenant taken together with the policy's own, and why a need no members reach
cannot work, in words. ``ApprovalPolicy.check_members`` counts with them when an agent is
defined and when approvers are added (``pausepoint serve``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping
from enum import Enum
from typing import Any, NamedTuple, Protocol, TypeAlias, runtime_checkable

from ..errors import DefinitionError
from ..tools._tool import is_async_callable

__all__ = [
    "NOT_SAID",
    "ListedPerTenant",
    "Members",
    "Need",
    "NoTenantSaid",
    "SessionTenant",
    "both_members",
    "held_roles",
    "listed_members",
    "lookup_roles",
    "plain_members",
    "together",
    "unreachable",
]

#: who holds which roles: a mapping, or a plain function of the principal (None: it cannot say
#: for that principal here, as ``token_roles`` cannot for anyone but the caller)
Members: TypeAlias = "Mapping[str, Collection[str]] | Callable[[str], Collection[str] | None]"


class NoTenantSaid(Enum):
    """A pause's view asked for with no session's tenant said (``Agent.view`` without
    ``tenant=``): members kept per tenant then list nobody, as whose to list is not known."""

    NOT_SAID = "not said"


NOT_SAID = NoTenantSaid.NOT_SAID
#: the tenant of the session whose pause a view lists the members of (None: of no tenant)
SessionTenant: TypeAlias = "str | NoTenantSaid | None"


@runtime_checkable
class ListedPerTenant(Protocol):
    """Members kept per tenant (``tenant_members``): a plain function of the principal, read
    when an answer is checked, that can also list who holds which roles in one tenant's
    sessions (by the bare names those sessions record), for a pause's view."""

    def __call__(self, principal: str) -> Collection[str] | None: ...

    def listing(self, tenant: str | None) -> Mapping[str, Collection[str]]: ...


def plain_members(members: Members | None) -> Members | None:
    """``members``, unless it is an async function (``DefinitionError``): who holds a role is
    read as an answer is checked, where nothing awaits it — an async one would refuse every
    approval, as a lookup that failed."""
    if is_async_callable(members):
        raise DefinitionError(
            f"members must be a mapping or a plain function of the principal (not async: the roles are read as "
            f"an answer is checked), not {members!r}; look the roles up beforehand and pass a dict, or read "
            "them from a cache in a plain function"
        )
    return members


def held_roles(found: Any) -> Collection[str]:
    """What a members function returned for a principal, as their roles. An awaitable (a plain
    function handing on to an async one) is refused in words, a coroutine closed unawaited."""
    if inspect.isawaitable(found):
        if inspect.iscoroutine(found):
            found.close()
        raise TypeError("the members function returned an awaitable, not roles: it must be a plain function")
    return found or ()


def lookup_roles(members: Members, principal: str) -> tuple[frozenset[str], bool]:
    """The roles ``members`` give ``principal``, and whether they are all of them: a function
    that returns None cannot say for that principal here (composed members say what each knows)."""
    if isinstance(members, _Both):
        return members.lookup(principal)
    if not callable(members):
        return frozenset(members.get(principal, ())), True
    found = members(principal)
    if found is None:
        return frozenset(), False
    return frozenset(held_roles(found)), True


def listed_members(members: Members, tenant: SessionTenant) -> Mapping[str, Collection[str]] | None:
    """Who holds which roles in the sessions of ``tenant``, by the names those sessions record,
    for a pause's view to name who may decide it. None where some part of ``members`` cannot
    list them: a function of the principal (``token_roles`` knows only the caller), or members
    kept per tenant when no tenant is said. A mapping lists the same members in every tenant."""
    if isinstance(members, _Both):
        first, second = listed_members(members.a, tenant), listed_members(members.b, tenant)
        return None if first is None or second is None else together(first, second)
    if not callable(members):
        return members
    if isinstance(members, ListedPerTenant) and not isinstance(tenant, NoTenantSaid):
        return members.listing(tenant)
    return None


def both_members(a: Members | None, b: Members | None) -> Members | None:
    """The members of two policies: a principal holds the roles each gives them."""
    if a is None or b is None:
        return a if b is None else b
    if not callable(a) and not callable(b):
        return together(a, b)
    return _Both(a, b)


class _Both:
    """Two policies' members, one of them a function: a principal holds the roles either gives."""

    def __init__(self, a: Members, b: Members) -> None:
        self.a, self.b = a, b

    def __call__(self, principal: str) -> frozenset[str]:
        return self.lookup(principal)[0]

    def lookup(self, principal: str) -> tuple[frozenset[str], bool]:
        (first, whole), (second, all_of) = lookup_roles(self.a, principal), lookup_roles(self.b, principal)
        return first | second, whole and all_of


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
