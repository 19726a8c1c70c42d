"""``pausepoint config check FILE``: what ``pausepoint serve --config FILE`` would run, secrets
masked, or every problem at its key and line (exit status 2).

The check reads the file and the environment variables it names, imports the app (as serve
does) and sets its agents up, so it finds what serving would — a role no policy defines, a
webhook for an agent that does not exist, a missing extra — but it opens nothing: no store
connection, no request to the identity provider, no port.
"""

from __future__ import annotations

import argparse
import os
from datetime import timedelta
from typing import Any

from ..runtime._app import Pausepoint
from ._errors import named_at
from ._serve import asgi_only, check_agents
from ._serve_app import check_extras, prepare
from ._settings import ServeSettings, resolve
from ._targets import load_target, not_an_app
from ._tracing import endpoint_of

__all__ = ["add_parser", "describe", "run"]

MASK = "********"


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "config",
        help="check a config file for 'pausepoint serve --config'",
        description="Work with pausepoint serve's config file (TOML; every key is in docs/config.md).",
    )
    commands = parser.add_subparsers(dest="action", metavar="<action>", required=True)
    check = commands.add_parser(
        "check",
        help="print what 'serve --config FILE' would run (secrets masked), or the file's problems",
        description="Print what 'pausepoint serve --config FILE' would run, with every secret masked; exit "
        "with status 2 and each problem at its key and line when it would not run. Imports the app; opens "
        "no connection.",
    )
    check.add_argument("file", metavar="FILE", help="the config file")
    check.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    flags = argparse.Namespace(
        config=args.file, target=None, host=None, port=None, store=None, token=[], approver=[], operator=[],
        no_console=False, metrics=False, mcp=False, log_level=None, log_format=None,
    )  # fmt: skip
    settings = resolve(flags, os.environ)
    with settings.problems.last(), named_at(settings.app_at):  # the file's problems are named with the app's
        target = load_target(settings.target)
    if isinstance(target, Pausepoint):
        with settings.problems.last():
            check_agents(target)  # as serve does: an app with no agents, a model without its key
        with settings.problems.each():
            check_extras(settings)
        prepare(target, settings, check_only=True)  # raises every problem found
        lines = describe(settings, target)
    elif callable(target):
        asgi_only(settings, flags)
        lines = [
            f"app        {settings.target} (an ASGI app, served as it is)",
            f"listen     {settings.host}:{settings.port}",
            f"log        {settings.log_level}, {settings.log_format}",
        ]
    else:
        with named_at(settings.app_at):
            raise not_an_app(settings.target, target)
    print(f"{args.file}: ok — 'pausepoint serve --config {args.file}' would run:")
    for line in lines:
        print("  " + line)
    return 0


def describe(settings: ServeSettings, ai: Pausepoint) -> list[str]:
    """What would run, one line a setting; a secret is shown as where it comes from, masked."""
    lines = [
        f"app        {settings.target} (agents: {', '.join(ai.agents) or 'none'})",
        f"listen     {settings.host}:{settings.port}",
        f"store      {settings.store.describe() if settings.store else 'as the app defines it'}",
    ]
    for tenant in settings.tenants:
        people = [name.partition("/")[2] for name, who in settings.principals.items() if who.tenant == tenant]
        lines.append(f"tenant     {tenant}: {', '.join(people) or 'no principal declared'}; sees its own sessions only")
    for name, who in settings.principals.items():
        held = ["approver" + (f" of {', '.join(who.roles)}" if who.roles else "")] if who.approver else []
        held += ["operator (every tenant)" if settings.tenants else "operator"] if name in settings.operators else []
        sign_in = f"token {who.token_from} {MASK}" if who.token is not None else "signs in through the provider"
        lines.append(f"principal  {name}: {sign_in}" + (f"; {', '.join(held)}" if held else ""))
    if settings.oidc is not None:
        oidc = settings.oidc
        claims = f"principal {oidc.principal_claim}, roles {oidc.roles_claim}, tenant {oidc.tenant_claim}"
        lines.append(
            f"sign-in    OpenID Connect: issuer {oidc.issuer}, audience {oidc.audience}, "
            f"{'/'.join(oidc.algorithms)}, leeway {oidc.leeway_seconds:g} s; claims: {claims}"
        )
        if oidc.approver_roles:
            lines.append(f"           approvers: whoever holds {', '.join(oidc.approver_roles)}")
        if oidc.console_client_id is not None:
            lines.append(
                f"           console: signs in as client {oidc.console_client_id} (authorization code + PKCE; "
                f"scopes {' '.join(oidc.console_scopes)}; back to {oidc.console_redirect_uri or 'its own address'}"
                + (f"; 'Sign in with {oidc.console_provider_name}'" if oidc.console_provider_name else "")
                + ("" if settings.console else "; but [server] console = false")
                + ")"
            )
    if settings.links is not None:
        ttl = settings.links.ttl.total_seconds()
        lines.append(f"links      signed ({MASK}), to {settings.links.console_url}/#link=..., for {ttl:g} s")
    if settings.slack is not None:
        lines.append(f"slack      buttons at /v1/slack/actions, signing secret {MASK}")
    for declared in settings.webhooks:
        webhook = declared.webhook
        secret = f", signed ({MASK})" if webhook.secret else ""
        lines.append(
            f"webhook    {webhook.name} -> {declared.shown_url} ({webhook.format}; {', '.join(sorted(webhook.events))}"
            f"{'; agents ' + ', '.join(sorted(webhook.agents)) if webhook.agents else ''}"
            f"{'; tenants ' + ', '.join(sorted(webhook.tenants)) if webhook.tenants is not None else ''}{secret})"
        )
    delivery = settings.delivery
    lines.append(
        f"delivery   lease {delivery.lease_seconds:g} s, {delivery.batch} a claim, "
        f"every {delivery.interval_seconds:g} s"
        if delivery.enabled
        else "delivery   off (another process sends the webhooks)"
    )
    if settings.tracing is not None:
        tracing = settings.tracing
        lines.append(
            f"tracing    OTLP {tracing.protocol} -> {endpoint_of(tracing) or 'the exporter default'} "
            f"(service {tracing.service_name}, sampled {tracing.sample_ratio:g}"
            f"{', headers ' + ', '.join(f'{k}={MASK}' for k in tracing.headers_env) if tracing.headers_env else ''})"
        )
    limits = settings.limits
    lines += [
        f"metrics    {'/metrics' if settings.metrics else 'off'}",
        f"log        {settings.log_level}, {settings.log_format}, "
        f"request log {'on' if settings.request_log else 'off'}",
        f"limits     body {limits.max_body_bytes} B, message {limits.max_message_bytes} B, "
        f"history {limits.max_history} records, page {limits.max_page}",
        f"expiry     {f'every {settings.expiry_interval:g} s' if settings.expiry_interval else 'off'}",
        f"events     {_kept(settings.keep_events)}",
        f"console    {'on' if settings.console else 'off'}; mcp {'on' if settings.mcp else 'off'}",
    ]
    return lines


def _kept(keep: timedelta | None) -> str:
    if keep is None:
        return "kept (no [retention])"
    seconds = keep.total_seconds()
    age = f"{seconds / 86400:g} days" if seconds >= 86400 else f"{seconds:g} s"
    return f"pruned once delivered and {age} old"
