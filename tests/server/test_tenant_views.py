"""With tenants, a pause's view names who may decide it: ``may_approve``, ``may_deny`` and
``may_respond`` list the members of the pause's session's tenant (bare names, as its sessions
record principals) — for every reader, an operator of another tenant included — on every
surface: a turn's reply and its stream, the session, its pauses, MCP's inbox. They agree with
what the server lets each person do. Over real HTTP on loopback, with ``create_app`` and fixed
tokens of two tenants, and ``pausepoint serve --config`` with ``[tenants]``.

A deny-only clerk and an approver who holds no role are not offered Approve (the console reads
a null list as "anyone who may answer the session"); members that cannot be listed (a token's
roles: ``token_roles``) stay null.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic import BaseModel
from starlette.applications import Starlette

from pausepoint import ApprovalPolicy, Pausepoint, Role
from pausepoint.server import BearerTokens, Identity, OwnerPolicy, create_app, token_roles
from pausepoint.server._auth import tenant_members
from pausepoint.testing import ScriptedModel, last_tool_results, tool_call
from tests.cli.config_files import serving, write
from tests.cli.conftest import ROOT
from tests.mcp.conftest import SLOW
from tests.mcp.test_serve import call
from tests.server.feed_client import FeedReader
from tests.server.harness import serve_in_thread
from tests.server.test_display import sse

TOKENS: dict[str, str | Identity] = {
    "acme-alice": Identity("alice", tenant="acme"),
    "acme-desk": Identity("desk", tenant="acme"),
    "acme-clerk": Identity("clerk", tenant="acme"),
    "acme-view": Identity("view", tenant="acme"),  # an approver who holds no role
    "globex-ops": Identity("ops", tenant="globex"),  # an operator (and approver) of globex
    "globex-bob": Identity("bob", tenant="globex"),
}
#: per tenant, as ``pausepoint serve`` gives ``[tenants]``: the same names, other people elsewhere
MEMBERS = {
    "acme/desk": ["treasury"],
    "acme/clerk": ["clerk"],
    "globex/bob": ["treasury"],
    "globex/ops": ["treasury"],
    "root": ["treasury"],  # of no tenant
}
ROLES = {
    "treasury": Role(tools=["transfer_money"]),
    "clerk": Role(tools=["transfer_money"], decisions=["deny"]),
}
#: what acme's pause lists, whoever reads it: acme's members and the policy's own "auditor"
ACME = {"may_approve": ["desk"], "may_deny": ["auditor", "clerk", "desk"], "may_respond": ["desk"]}
UNLISTED = {"may_approve": None, "may_deny": None, "may_respond": None}
PAY = {"message": "pay"}


class Transfer(BaseModel):
    amount: int
    to_account: str


def script(request: Any) -> Any:
    if request.messages[-1].role == "user":
        return [tool_call("transfer_money", {"amount": 5, "to_account": "savings"})]
    return str(last_tool_results(request))


def build() -> Starlette:
    """``pay``: the policy's own members (a mapping) with members per tenant, composed as
    ``pausepoint serve`` composes them; ``ssoPay``: with a token's roles too, which list nobody."""
    ai = Pausepoint()

    @ai.tool(requires_approval=True)
    async def transfer_money(input: Transfer) -> str:
        """Move money."""
        return "sent"

    own = ApprovalPolicy(roles=ROLES, members={"auditor": ["clerk"]}, separation_of_duties=True)
    per_tenant = ApprovalPolicy(members=tenant_members(MEMBERS))
    for name, policy in (("pay", own + per_tenant), ("ssoPay", own + ApprovalPolicy(members=token_roles) + per_tenant)):
        ai.define_agent(name=name, model=ScriptedModel(script), tools=[transfer_money], approval=policy)
    approvers = {"acme/desk", "acme/clerk", "acme/view", "globex/bob", "globex/ops"}
    return create_app(
        ai,
        auth=BearerTokens(TOKENS),
        policy=OwnerPolicy(approvers, operators={"globex/ops"}),
        operators={"globex/ops"},
        expiry_interval=None,
        console=False,
        mcp=True,
    )


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve_in_thread(build) as served:
        yield served


@pytest.fixture
async def http(url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def who_may(pause: dict[str, Any]) -> dict[str, Any]:
    approval = pause["view"]["approval"]
    return {key: approval[key] for key in ("may_approve", "may_deny", "may_respond")}


async def test_a_tenants_pause_names_its_tenants_members_for_every_reader(http):
    sent = await http.post("/v1/agents/pay/sessions", json=PAY, headers=bearer("acme-alice"))
    assert sent.status_code == 200, sent.text
    session, [paused] = sent.json()["session_id"], sent.json()["interrupts"]
    assert who_may(paused) == ACME  # the turn's reply
    assert "(desk)" in paused["view"]["approval"]["waiting_for"]

    at = f"/v1/agents/pay/sessions/{session}"
    for token in ("acme-clerk", "acme-view", "acme-desk", "globex-ops"):  # globex's operator: acme's members
        [pause] = (await http.get(at + "/interrupts", headers=bearer(token))).json()["interrupts"]
        assert who_may(pause) == ACME, token
    read = (await http.get(at, headers=bearer("globex-ops"))).json()
    assert read["can_answer"] is False and who_may(read["interrupts"][0]) == ACME

    # What the view offers is what the server allows: the clerk and the role-less approver are refused.
    ref = paused["ref"]
    for token in ("acme-clerk", "acme-view"):
        refused = await http.post(f"{at}/interrupts/{ref}/approve", json={}, headers=bearer(token))
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "approval_forbidden", refused.text
    approved = await http.post(f"{at}/interrupts/{ref}/approve", json={}, headers=bearer("acme-desk"))
    assert approved.status_code == 200 and approved.json()["finish_reason"] == "stop", approved.text


async def test_a_streamed_turn_and_mcps_inbox_name_the_sessions_tenants_members(http, url):
    streamed = await http.post(
        "/v1/agents/pay/sessions", json=PAY, headers={**bearer("acme-alice"), "Accept": "text/event-stream"}
    )
    events = sse(streamed.text)
    [chunk] = [data for name, data in events if name == "chunk" and data["kind"] == "interrupt"]
    assert who_may(chunk["interrupt"]) == ACME
    [response] = [data for name, data in events if name == "response"]
    assert who_may(response["interrupts"][0]) == ACME

    client = httpx2.AsyncClient(headers=bearer("globex-ops"), timeout=SLOW)
    async with Client(streamable_http_client(f"{url}/mcp", http_client=client)) as operator:
        listed = await call(operator, "list_pending", agent="pay")
    mine = [s for s in listed if s["session_id"] == response["session_id"]]
    assert [p["approval"]["may_approve"] for s in mine for p in s["pauses"]] == [["desk"]]


async def test_the_feeds_pause_names_the_sessions_tenants_members_for_an_operator_of_another(http, url):
    """The feed's (and webhooks') events build the pause's view with the tenant the event
    recorded: they said null under tenants."""
    async with FeedReader(url, bearer("globex-ops")) as feed:
        sent = await http.post("/v1/agents/pay/sessions", json=PAY, headers=bearer("acme-alice"))
        session = sent.json()["session_id"]
        for count in range(1, 50):
            events = await feed.wait_for(count)
            pauses = [data for _, name, data in events if name == "pause" and data["session_id"] == session]
            if pauses:
                break
    assert who_may(pauses[0]["interrupt"]) == ACME


async def test_members_a_token_brings_cannot_be_listed_so_nobody_is_named(http):
    sent = await http.post("/v1/agents/ssoPay/sessions", json=PAY, headers=bearer("acme-alice"))
    assert who_may(sent.json()["interrupts"][0]) == UNLISTED


async def test_served_from_a_config_with_tenants_the_view_names_the_tenants_members(tmp_path: Path):
    write(tmp_path / "viewapp.py", APP)
    config = write(tmp_path / "tenants.toml", CONFIG.format(store=tmp_path / "v.db"))
    tokens = ("ALICE", "DESK", "CLERK", "VIEW", "ONCALL", "ROOT")
    env = {"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}", **{f"T_{name}": f"t-{name.lower()}" for name in tokens}}
    with serving("--config", str(config), "--port", "0", env=env) as served:
        async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
            sent = await http.post("/v1/agents/payAgent/sessions", json=PAY, headers=bearer("t-alice"))
            assert sent.status_code == 200, sent.text
            session, ref = sent.json()["session_id"], sent.json()["interrupts"][0]["ref"]
            expected = {"may_approve": ["desk"], "may_deny": ["clerk", "desk"], "may_respond": ["desk"]}
            at = f"/v1/agents/payAgent/sessions/{session}"
            for token in ("t-clerk", "t-view", "t-oncall"):  # oncall: an operator of no tenant (root's)
                [pause] = (await http.get(at + "/interrupts", headers=bearer(token))).json()["interrupts"]
                assert who_may(pause) == expected, token
            for token in ("t-clerk", "t-view"):
                refused = await http.post(f"{at}/interrupts/{ref}/approve", json={}, headers=bearer(token))
                assert refused.status_code == 403, refused.text


APP = '''\
from pydantic import BaseModel

from pausepoint import ApprovalPolicy, Pausepoint, Role
from pausepoint.testing import ScriptedModel, last_tool_results, tool_call

ai = Pausepoint()


class Transfer(BaseModel):
    amount: int
    to_account: str


@ai.tool(requires_approval=True)
async def transfer_money(input: Transfer) -> str:
    """Move money."""
    return "sent"


def script(request):
    if request.messages[-1].role == "user":
        return [tool_call("transfer_money", {"amount": 5, "to_account": "savings"})]
    return str(last_tool_results(request))


roles = {"treasury": Role(tools=["transfer_money"]), "clerk": Role(tools=["transfer_money"], decisions=["deny"])}
ai.define_agent(name="payAgent", model=ScriptedModel(script), tools=[transfer_money],
                approval=ApprovalPolicy(roles=roles, separation_of_duties=True))
'''

CONFIG = """\
app = "viewapp:ai"

[store]
url = "sqlite:///{store}"

[principals.oncall]
token_env = "T_ONCALL"
approver = true
operator = true

[principals.root]
token_env = "T_ROOT"
roles = ["treasury"]

[tenants.acme.principals.alice]
token_env = "T_ALICE"

[tenants.acme.principals.desk]
token_env = "T_DESK"
roles = ["treasury"]

[tenants.acme.principals.clerk]
token_env = "T_CLERK"
roles = ["clerk"]

[tenants.acme.principals.view]
token_env = "T_VIEW"
approver = true
"""
