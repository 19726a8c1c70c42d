"""Two tenants on one server, each with an "alice": the app of the tenant tests.

The approval tests' bank (``tests.approval_apps``: ``transfer_money`` requires approval, and
treasury decides it) served with fixed tokens of two tenants and of none:

    acme-alice     alice of acme      holds treasury in acme
    acme-desk      desk of acme       an approver of acme, holds treasury in acme
    globex-alice   alice of globex    holds nothing
    globex-bob     bob of globex      an approver of globex, holds treasury in globex
    ops            ops (no tenant)    an operator, and an approver: reads every tenant's inbox
    carol          carol (no tenant)
    impostor       "acme/desk" (no tenant): a name of no tenant that looks like acme's desk

with webhooks (``acme-hook`` hears acme only; ``all-hook`` every tenant), the feed, MCP at
``/mcp`` and metrics that count pauses by tenant (acme named; anything else "other").
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette

from pausepoint import ApprovalPolicy, Pausepoint, Role
from pausepoint.metrics import PrometheusMetrics
from pausepoint.server import BearerTokens, Identity, OwnerPolicy, WebhookSender, create_app
from pausepoint.server._auth import tenant_members
from pausepoint.webhooks import Webhook
from tests.approval_apps import build
from tests.server.harness import make_store

SECRET = "whsec-tenants-test"
AGENT = "bank"
TOKENS: dict[str, str | Identity] = {
    "acme-alice": Identity("alice", tenant="acme"),
    "acme-desk": Identity("desk", tenant="acme"),
    "globex-alice": Identity("alice", tenant="globex"),
    "globex-bob": Identity("bob", tenant="globex"),
    "ops": "ops",
    "carol": "carol",
    # a sign-in whose sub reads "acme/desk" with no tenant claim: nobody of acme
    "impostor": Identity("acme/desk"),
    # ... and one whose token carries the role that makes approvers: still no approver, no role
    "impostor-roles": Identity("acme/desk", frozenset({"treasury"})),
}
MEMBERS = {"acme/alice": ["treasury"], "acme/desk": ["treasury"], "globex/bob": ["treasury"]}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def build_tenant_app(spec: dict[str, Any], ledger: list[str], hooks: dict[str, str] | None = None) -> Starlette:
    """The bank on the store ``spec``; ``hooks`` maps a webhook's name to its URL."""
    webhooks = [
        Webhook(name, url, secret=SECRET, events={"pause"}, tenants={"acme"} if name == "acme-hook" else None)
        for name, url in (hooks or {}).items()
    ]
    ai = Pausepoint(webhooks=webhooks)
    policy = ApprovalPolicy(roles={"treasury": Role(tools=["transfer_money"])}, members=tenant_members(MEMBERS))
    build(make_store(spec), policy, ledger=ledger, app=ai)
    return create_app(
        ai,
        auth=BearerTokens(TOKENS),
        policy=OwnerPolicy(
            approvers={"acme/desk", "globex/bob", "ops"}, approver_roles={"treasury"}, operators={"ops"}
        ),
        operators={"ops"},
        metrics=PrometheusMetrics(tenants=["acme"]),
        webhooks=WebhookSender(ai, interval=0.2) if webhooks else False,
        feed_interval=0.2,
        expiry_interval=None,
        console=False,
        mcp=True,
    )
