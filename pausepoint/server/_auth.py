"""Who is calling, and what they may do.

Authentication is a callable from the request to a principal (a string naming the caller), or
to an ``Identity`` (the principal with the roles and tenant its credentials carry), or None
when the request carries no credentials it accepts; it may be async, and it may raise
``Unauthenticated`` to say why a credential was refused. ``BearerTokens`` (fixed tokens) and
``OidcBearer`` (JWTs from an OpenID Connect provider, ``_oidc``) are built in; ``FirstOf``
tries several in turn. The identity a request authenticated as is kept for that request
(``current_identity``), so a policy can read the roles its token carries (``token_roles``).

Authorisation is an ``AccessPolicy`` with three separate rights over a session: to see it
(everyone else gets a 404, as if it did not exist), to answer its pauses, and to converse in
it — send messages, cancel its pauses. The default, ``OwnerPolicy``, gives all three to the
session's owner (the principal that created it) and only the first two to approvers: an
approver decides on what the owner's conversation asked, and never speaks in it.

**Tenants.** An identity may belong to a tenant (a fixed token's, ``BearerTokens({token:
Identity("alice", tenant="acme")})``; a JWT's tenant claim). A session belongs to its creator's
tenant, and ``OwnerPolicy`` confines everyone to their tenant's sessions: another tenant's is a
404, as any session one may not see. A principal's name is unique within its tenant, so a
principal is the pair (tenant, name): sessions and audit entries keep the name as the
credential gives it ("alice") beside the session's tenant — everyone who acts in a session is
of its tenant, so a name there is unambiguous — and a policy's configuration names a tenant's
principal as ``"tenant/name"`` (``"acme/alice"``; ``"alice"`` is the alice of no tenant):
``OwnerPolicy(approvers=...)``, ``operators``, ``tenant_members``. Operators span tenants: they
see, in every tenant, the sessions their other rights show them in their own (an approver
among them reads every tenant's inbox), and answer and converse only in their own. A setup
without tenants is unchanged: every identity and every session has none.
"""

from __future__ import annotations

import hmac
import inspect
from collections.abc import Awaitable, Callable, Collection, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from starlette.requests import Request

from ..errors import Unauthenticated
from ..stores import SessionSummary

__all__ = [
    "AccessPolicy",
    "Authenticator",
    "BearerTokens",
    "FirstOf",
    "Identity",
    "OwnerPolicy",
    "TenantMembers",
    "authenticate",
    "current_identity",
    "current_tenant",
    "is_principal_name",
    "is_tenant_name",
    "named_identity",
    "qualified",
    "serve_as",
    "tenant_members",
    "token_roles",
]

_MAX_NAME = 128  # a principal's, a tenant's


def is_principal_name(name: object) -> bool:
    """Whether ``name`` can name a principal: 1 to 128 printable characters, not starting or
    ending in a space — as a config file's, a flag's, or a sign-in token's claim."""
    return isinstance(name, str) and 0 < len(name) <= _MAX_NAME and name.isprintable() and name == name.strip()


def is_tenant_name(name: object) -> bool:
    """Whether ``name`` can name a tenant: 1 to 128 printable characters, no ``/`` (it joins a
    tenant to a principal's name: ``"acme/alice"``), not starting or ending in a space."""
    return (
        isinstance(name, str)
        and 0 < len(name) <= _MAX_NAME
        and name.isprintable()
        and "/" not in name
        and name == name.strip()
    )


def qualified(principal: str, tenant: str | None) -> str:
    """How a policy's configuration names ``principal`` of ``tenant``: ``"acme/alice"``, or
    ``"alice"`` for the alice of no tenant. A principal of no tenant whose name holds a ``/`` (a
    sign-in's ``sub`` of ``"acme/desk"`` with no tenant claim) is no name a configuration can
    give: it reads ``"/acme/desk"``, never acme's desk."""
    if tenant is None:
        return f"/{principal}" if "/" in principal else principal
    return f"{tenant}/{principal}"


def named_identity(name: str) -> Identity:
    """The principal a policy's configuration names ``name`` (the inverse of ``qualified``):
    ``"acme/alice"`` is alice of acme — a tenant's name holds no ``/``, so the first one ends
    it — and ``"alice"`` the alice of no tenant."""
    tenant, slash, principal = name.partition("/")
    return Identity(principal, tenant=tenant) if slash and is_tenant_name(tenant) and principal else Identity(name)


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a request authenticated as: the ``principal`` (the name sessions, audit entries and
    policies use, unique within its tenant), the ``roles`` its credentials carry (a token's
    roles claim), its ``tenant`` (None: none; the sessions it creates are that tenant's, and
    ``OwnerPolicy`` confines it to them) and the credential's ``claims`` as verified."""

    principal: str
    roles: frozenset[str] = frozenset()
    tenant: str | None = None
    claims: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def qualified(self) -> str:
        """The principal as a policy's configuration names it: ``"acme/alice"`` (``qualified``)."""
        return qualified(self.principal, self.tenant)


Authenticator = Callable[[Request], "str | Identity | Awaitable[str | Identity | None] | None"]

# The identity of the request being served. Each request runs in a task of its own, with a
# copy of the context it was started from, so one request never sees another's.
_IDENTITY: ContextVar[Identity | None] = ContextVar("pausepoint_identity", default=None)


def current_identity() -> Identity | None:
    """The identity the request being served authenticated as (None outside a request, or
    before it authenticated)."""
    return _IDENTITY.get()


def serve_as(identity: Identity) -> None:
    """Serve the rest of the request being served, and the tasks it starts, as ``identity``:
    for a caller known otherwise than through the app's authenticator (a Slack callback is
    signed by Slack, and names the Slack user whose principal then acts: ``SlackApp.users``)."""
    _IDENTITY.set(identity)


def current_tenant() -> str | None:
    """The tenant of the request being served (None: its identity has none, or outside a
    request). Everyone who answers or converses in a session is of its tenant (``OwnerPolicy``),
    so while a request works on a session this is that session's tenant too."""
    identity = _IDENTITY.get()
    return None if identity is None else identity.tenant


def tenant_members(members: Mapping[str, Collection[str]]) -> TenantMembers:
    """Role membership per tenant, for ``ApprovalPolicy(members=...)``: ``members`` names each
    principal as ``"tenant/name"`` (``"acme/alice": ["treasury"]``; a bare ``"desk"`` is the desk
    of no tenant), and a principal holds the roles listed for them in the tenant of the request
    being served (``current_tenant``) — so acme's alice approves what treasury decides, and
    globex's alice does not. Outside a request, the principals of no tenant. A pause's view
    lists its session's tenant's members (``TenantMembers.listing``) as who may decide it."""
    return TenantMembers(members)


class TenantMembers:
    """Role membership per tenant (``tenant_members``): called with a principal, as an approval
    policy checks an answer, the roles they hold in the request's tenant; and listed per tenant,
    so a pause's view names who may decide it in its session's tenant (``Agent.view``)."""

    def __init__(self, members: Mapping[str, Collection[str]]) -> None:
        self._table = {name: frozenset(roles) for name, roles in members.items()}

    def __call__(self, principal: str) -> frozenset[str]:
        return self._table.get(qualified(principal, current_tenant()), frozenset())

    def listing(self, tenant: str | None) -> dict[str, frozenset[str]]:
        """Who holds which roles in ``tenant``'s sessions, by the bare names those sessions
        record (acme's ``"acme/desk"`` is ``"desk"``): exactly those ``__call__`` gives roles to
        while a request of ``tenant`` is served (``"/acme/desk"`` is the ``acme/desk`` of no
        tenant, never acme's desk)."""
        found = {}
        for name, roles in self._table.items():
            bare = _bare_name(name, tenant)
            if bare and qualified(bare, tenant) == name:
                found[bare] = roles
        return found


def _bare_name(name: str, tenant: str | None) -> str | None:
    """The principal of ``tenant`` a configuration's ``name`` would be (None: of another
    tenant); ``TenantMembers.listing`` keeps it only where ``qualified`` gives ``name`` back."""
    if tenant is None:
        return name.removeprefix("/")
    prefix = f"{tenant}/"
    return name[len(prefix) :] if name.startswith(prefix) else None


def token_roles(principal: str) -> frozenset[str] | None:
    """The roles the current request's credentials give ``principal``: None when the request
    is not ``principal``'s (no one can say here: a grant they gave is judged by the roles they
    held when they gave it), empty when its credentials carry none, and for a sign-in of no
    tenant whose name reads like a tenant's (``acme/desk``), which is no one the configuration
    names. Give it to an approval policy, and a token's roles decide who approves:
    ``ApprovalPolicy(members=token_roles)``."""
    identity = _IDENTITY.get()
    if identity is None:
        return frozenset()
    if identity.principal != principal:
        return None
    if identity.tenant is None and "/" in principal:  # no one the configuration names: no role either
        return frozenset()
    return identity.roles


class BearerTokens:
    """``Authorization: Bearer <token>`` against a fixed map of tokens to principals, or to
    identities (``Identity("alice", tenant="acme")``: a tenant's principal).

    Tokens are compared in constant time. Rotate by building a new app (or pass your own
    ``Authenticator`` for tokens kept elsewhere).
    """

    def __init__(self, tokens: Mapping[str, str | Identity]) -> None:
        self._tokens = [(token.encode(), principal) for token, principal in tokens.items()]

    def __call__(self, request: Request) -> str | Identity | None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        given = token.strip().encode()
        found = None
        for known, principal in self._tokens:
            if hmac.compare_digest(known, given):
                found = principal
        return found


class FirstOf:
    """Several authenticators, tried in order: the first that accepts the request names its
    caller. One that refuses a credential outright (raises ``Unauthenticated``: a JWT that
    expired) ends the search with its reason."""

    def __init__(self, *authenticators: Authenticator) -> None:
        self.authenticators = authenticators

    async def __call__(self, request: Request) -> str | Identity | None:
        for authenticator in self.authenticators:
            found = authenticator(request)
            if inspect.isawaitable(found):
                found = await found
            if found:
                return found
        return None


async def authenticate(authenticator: Authenticator, request: Request) -> str:
    """The request's principal; its identity is kept for the request (``current_identity``).
    Raises ``Unauthenticated`` when the authenticator accepts none, or when the request carries
    more than one ``Authorization`` header (which one counts would be the proxies' guess)."""
    if len(request.headers.getlist("authorization")) > 1:
        raise Unauthenticated("more than one Authorization header: send one")
    found = authenticator(request)
    if inspect.isawaitable(found):
        found = await found
    identity = found if isinstance(found, Identity) else Identity(found) if found else None
    if identity is None or not identity.principal:
        raise Unauthenticated("missing or invalid credentials (send 'Authorization: Bearer <token>')")
    _IDENTITY.set(identity)
    return identity.principal


class AccessPolicy(Protocol):
    """Decides what a principal may do with a session. Answering or conversing is asked only
    of a principal who may view the session (one who may not gets a 404 first).

    A policy may also say which tenant's sessions to list for a principal, with
    ``inbox_tenant(principal) -> str | None`` (None: any; the listing is then filtered by
    ``can_view``); one without it lists as ``inbox_owner`` alone says."""

    def can_view(self, principal: str, session: SessionSummary) -> bool:
        """Whether ``principal`` may see the session at all (if not, it is 404 to them)."""
        ...

    def can_answer(self, principal: str, session: SessionSummary) -> bool:
        """Whether ``principal`` may answer the session's pauses (respond, deny, restart, approve)."""
        ...

    def can_converse(self, principal: str, session: SessionSummary) -> bool:
        """Whether ``principal`` may speak in the session: send messages, cancel its pauses."""
        ...

    def inbox_owner(self, principal: str) -> str | None:
        """An owner to filter listings by in the store (None: list all, then filter by ``can_view``)."""
        ...


def inbox_filters(policy: AccessPolicy, principal: str) -> tuple[str | None, str | None]:
    """The owner and the tenant to filter ``principal``'s listing of sessions by in the store
    (None: any), as ``policy`` says (a policy without ``inbox_tenant``: any tenant)."""
    tenant_of = getattr(policy, "inbox_tenant", None)
    return policy.inbox_owner(principal), tenant_of(principal) if tenant_of is not None else None


class OwnerPolicy:
    """Only a session's owner sees it, answers it and converses in it. ``approvers`` may also
    see every session and answer its pauses (an approvals desk), but not send into it: a
    message in a session is always its owner's. ``approver_roles`` makes approvers of those
    whose credentials carry one of these roles (a token's roles claim, ``token_roles``).

    Everyone is confined to their tenant's sessions (the request's identity's tenant; a
    session's is its creator's): an approver of acme sees acme's sessions, and a session of
    another tenant is a 404 to them. ``approvers`` and ``operators`` name a tenant's principals
    ``"tenant/name"``. ``operators`` span tenants: they see, in every tenant, what their other
    rights show them (an approver among them reads every tenant's inbox), and answer and
    converse only in their own tenant. Without tenants, everything is as the owner and the
    approvers alone say."""

    def __init__(
        self,
        approvers: frozenset[str] | set[str] = frozenset(),
        *,
        approver_roles: Collection[str] = (),
        operators: Collection[str] = (),
    ) -> None:
        self.approvers = frozenset(approvers)
        self.approver_roles = frozenset(approver_roles)
        self.operators = frozenset(operators)

    def is_approver(self, principal: str) -> bool:
        """Whether ``principal`` is named an approver, or the request's credentials make them one."""
        named = qualified(principal, current_tenant()) in self.approvers
        return named or bool(self.approver_roles and (token_roles(principal) or frozenset()) & self.approver_roles)

    def spans_tenants(self, principal: str) -> bool:
        """Whether ``principal`` is an operator, who sees the sessions of every tenant."""
        return bool(self.operators) and qualified(principal, current_tenant()) in self.operators

    def can_view(self, principal: str, session: SessionSummary) -> bool:
        if session.tenant != current_tenant() and not self.spans_tenants(principal):
            return False
        return session.owner == principal or self.is_approver(principal)

    def can_answer(self, principal: str, session: SessionSummary) -> bool:
        return session.tenant == current_tenant() and self.can_view(principal, session)

    def can_converse(self, principal: str, session: SessionSummary) -> bool:
        return session.tenant == current_tenant() and session.owner == principal

    def inbox_owner(self, principal: str) -> str | None:
        return None if self.is_approver(principal) else principal

    def inbox_tenant(self, principal: str) -> str | None:
        """The tenant whose sessions ``principal`` lists (None: any — an operator's, or one of
        no tenant, whose listing ``can_view`` then filters)."""
        return None if self.spans_tenants(principal) else current_tenant()
