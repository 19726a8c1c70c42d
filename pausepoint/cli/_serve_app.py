"""Building what ``serve`` serves from its settings: the app's agents set up (store, approvers
and their roles, webhooks, tracing), then ``create_app`` with the authentication, the access
policy, the limits, the expiry sweep and the webhook sender the settings name.

``prepare`` changes the app in place (before any session is used), and ``config check`` runs
it too, so a check finds what serving would: a role no policy defines, a webhook for an agent
that does not exist. It raises every problem found (the settings' and the app's) together,
before it opens anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..approval._policy import ApprovalPolicy
from ..runtime._app import Pausepoint
from ..server._auth import tenant_members
from ._errors import CliError, Problems, named_at
from ._settings import FileWebhook, ServeSettings
from ._store_url import check_store, open_store
from ._targets import replace_stores
from ._tracing import tracer_provider
from ._web import need_mcp

__all__ = ["add_approvers", "build_app", "check_extras", "check_roles", "check_webhooks", "prepare"]


def prepare(ai: Pausepoint, settings: ServeSettings, *, check_only: bool = False) -> Any:
    """Set ``ai``'s agents up as ``settings`` say; returns the tracer provider made for
    ``[tracing]`` (None without one), which the caller shuts down when serving ends. With
    ``check_only`` nothing is opened: no store, no exporter (their packages are checked).

    Raises ``CliError`` naming every problem, those ``settings.problems`` holds and the app's,
    before it adds a webhook or opens anything."""
    problems = settings.problems
    declared = settings.principals
    # [auth] left out for a problem: its tokens' roles may be meant (a quorum is not counted without them)
    sso = settings.oidc is not None or (settings.loaded is not None and not settings.loaded.intact("auth"))
    add_approvers(
        ai, settings.approvers, lambda name: declared[name].where, problems,
        token_roles=sso, per_tenant=bool(settings.tenants),
    )  # fmt: skip
    if settings.oidc is not None and settings.loaded is not None:  # (a token's roles must be the policies' too)
        check_roles(ai, [(settings.loaded.where(("auth", "oidc", "approver_roles")), settings.oidc.approver_roles)],
                    problems)  # fmt: skip
    check_webhooks(ai, settings.webhooks, problems)
    if settings.store is not None:
        with problems.each(), named_at(settings.store_at):
            check_store(settings.store)
    problems.raise_found()
    for webhook in settings.webhooks:
        ai.add_webhook(webhook.webhook)
    if settings.store is not None and not check_only:
        replace_stores(list(ai.agents.values()), open_store(settings.store))
    if settings.tracing is None:
        return None
    provider = tracer_provider(settings.tracing, check_only=check_only)
    if provider is not None:
        from ..telemetry import Telemetry

        ai.telemetry = Telemetry(
            tracer_provider=provider, capture_content=settings.tracing.capture_content, metrics=ai.telemetry.metrics
        )
        for agent in ai.agents.values():
            agent.telemetry = ai.telemetry
    return provider


def check_extras(settings: ServeSettings) -> None:
    """Raises ``CliError`` naming the extra to install for a part ``settings`` turn on."""
    _server()
    wanted = [
        (settings.metrics, "prometheus_client", "--metrics / [metrics] needs prometheus-client", "metrics"),
        (settings.oidc is not None, "jwt", "[auth.oidc] needs PyJWT", "sso"),
        (settings.slack is not None, "slack_sdk", "[notifiers.slack] needs slack_sdk", "slack"),
    ]
    for on, module, what, extra in wanted:
        if on:
            try:
                __import__(module)
            except ImportError:
                raise CliError(f"{what}: pip install 'pausepoint[{extra}]'") from None
    if settings.mcp:
        need_mcp()


def build_app(ai: Pausepoint, settings: ServeSettings) -> Any:
    """``create_app`` for ``ai`` with what ``settings`` name."""
    check_extras(settings)
    server = _server()
    auth: Any = server.BearerTokens(_identities(server, settings))
    approver_roles: list[str] = []
    if settings.oidc is not None:
        sso = server.OidcBearer(settings.oidc.server_settings())
        auth = server.FirstOf(auth, sso) if settings.tokens else sso
        approver_roles = settings.oidc.approver_roles
    delivery = settings.delivery
    sender = (
        server.WebhookSender(ai, lease=delivery.lease_seconds, batch=delivery.batch, interval=delivery.interval_seconds)
        if delivery.enabled
        else False
    )
    metrics: Any = settings.metrics
    if settings.metrics and settings.tenants:  # pauses counted by tenant: the tenants the file names
        from ..metrics import PrometheusMetrics

        metrics = PrometheusMetrics(tenants=settings.tenants)
    return server.create_app(
        ai,
        auth=auth,
        policy=server.OwnerPolicy(set(settings.approvers), approver_roles=approver_roles, operators=settings.operators),
        limits=settings.limits,
        expiry_interval=settings.expiry_interval,
        keep_events=settings.keep_events,
        console=settings.console,
        operators=settings.operators,
        metrics=metrics,
        request_log=settings.request_log,
        webhooks=sender,
        mcp=settings.mcp,
        links=settings.links,
        slack=settings.slack,
    )


def _identities(server: Any, settings: ServeSettings) -> dict[str, Any]:
    """token -> the principal it signs in (a tenant's as an ``Identity`` with its tenant)."""
    found: dict[str, Any] = {}
    for token, key in settings.tokens.items():
        tenant = settings.principals[key].tenant
        found[token] = key if tenant is None else server.Identity(key[len(tenant) + 1 :], tenant=tenant)
    return found


def add_approvers(
    ai: Pausepoint,
    approvers: dict[str, list[str]],
    where: Callable[[str], str],
    problems: Problems,
    *,
    token_roles: bool = False,
    per_tenant: bool = False,
) -> None:
    """Make each approver a member of their roles in every agent's approval policy. A role no
    agent's policy defines is a problem (a typo would give nobody the right to approve), and so
    is a pause the members could never approve (a quorum, an escalation step: the policy's
    ``check_members``); each is kept in ``problems`` (the policies are then left as they were).
    ``where(name)`` says where an approver was declared (``--approver NAME``, or a file's key).
    ``token_roles``: who holds a role is also what the caller's token says (single sign-on).
    ``per_tenant``: the names are ``"tenant/name"`` (or a bare name: of no tenant), and a role
    is held only in the sessions of the member's tenant (``tenant_members``): a pause is refused
    only where the members of no one tenant could approve it."""
    agents = list(ai.agents.values())
    if token_roles:
        # First: a quorum is then not checked against the named members alone, as tokens may bring more.
        for agent in agents:
            agent.approval_policy = agent.approval_policy + ApprovalPolicy(members=_server().token_roles)
    typos = check_roles(ai, [(where(name), roles) for name, roles in approvers.items()], problems)
    members = {name: roles for name, roles in approvers.items() if roles}
    if typos or not members:  # (with a typo, a quorum's count of members would mislead)
        return
    added = {
        agent: agent.approval_policy + ApprovalPolicy(members=tenant_members(members))
        if per_tenant else agent.approval_policy.with_members(members)
        for agent in agents
    }  # fmt: skip
    unmet = [
        (need, why)
        for agent in agents
        for need, why in (
            agent.approval_policy.unmet_needs(agent.tools, agent.name, _by_tenant(members))
            if per_tenant else added[agent].unmet_needs(agent.tools, agent.name)
        )
    ]  # fmt: skip
    for need, why in unmet:  # each at the members whose roles it counted (all of them: none holds one)
        holders = [name for name, roles in members.items() if set(roles) & set(need.roles)] or list(members)
        problems.add(CliError(f"{'; '.join(sorted(where(name) for name in holders))}: {why}"))
    if not unmet:  # (none half changed)
        for agent, policy in added.items():
            agent.approval_policy = policy


def check_roles(ai: Pausepoint, declared: list[tuple[str, list[str]]], problems: Problems) -> bool:
    """Whether some of the ``(where, roles)`` declared name a role no agent's approval policy
    defines (a typo would give nobody the right to approve); each such is kept in ``problems``."""
    defined = {role for agent in ai.agents.values() for role in agent.approval_policy.roles}
    known = ", ".join(sorted(defined)) or "none"
    typos = False
    for at, roles in declared:
        unknown = sorted(set(roles) - defined)
        if unknown:
            typos = True
            problems.add(CliError(f"{at}: no agent's approval policy defines the role(s) {', '.join(unknown)} "
                                  f"(roles: {known})"))  # fmt: skip
    return typos


def _by_tenant(members: dict[str, list[str]]) -> dict[str | None, dict[str, list[str]]]:
    """``"tenant/name"`` members (a bare name: of no tenant) apart, by tenant (None: no tenant)."""
    found: dict[str | None, dict[str, list[str]]] = {}
    for name, roles in members.items():
        tenant, slash, bare = name.partition("/")
        found.setdefault(tenant if slash else None, {})[bare if slash else name] = roles
    return found


def check_webhooks(ai: Pausepoint, webhooks: list[FileWebhook], problems: Problems) -> None:
    """Check that ``ai`` can take ``webhooks`` (from the config file): a webhook of an agent the
    app does not define, or one named like a webhook the app has already, is a problem, kept in
    ``problems``. (``ai.add_webhook`` then makes each agent whose sessions a webhook wants write
    its deliveries to the outbox, as if the app had been made with it.)"""
    taken = {w.name for w in ai.all_webhooks()}
    for declared in webhooks:
        webhook, where = declared.webhook, declared.where
        if webhook.name in taken:
            problems.add(CliError(f"{where}: the app defines a webhook named {webhook.name!r} already"))
        unknown = sorted(set(webhook.agents or ()) - set(ai.agents))
        if unknown:
            problems.add(CliError(f"{where}: no agent named {', '.join(map(repr, unknown))} "
                                  f"(agents: {', '.join(ai.agents)})"))  # fmt: skip


def _server() -> Any:
    try:
        from .. import server
    except ImportError as exc:
        raise CliError(f"serving needs the server extra: pip install 'pausepoint[server]' ({exc})") from exc
    return server
