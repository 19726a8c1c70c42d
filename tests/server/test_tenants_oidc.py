"""Single sign-on with tenants: a token's tenant claim decides the tenant, over real HTTP with a
real provider on loopback (``oidc_issuer``). Two tokens for "alice" from two organisations are
two principals: each sees, lists and answers only the sessions of its own tenant, and a token
holding treasury approves in its own tenant only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from pausepoint import ApprovalPolicy, Pausepoint, Role
from pausepoint.server import OidcBearer, OwnerPolicy, create_app, token_roles
from pausepoint.stores import SqliteSessionStore
from tests.approval_apps import build
from tests.server.harness import serve_in_thread
from tests.server.oidc_issuer import AUDIENCE, LocalIssuer, local_issuer

SESSIONS = "/v1/agents/bank/sessions"


@pytest.fixture
def issuer() -> Iterator[LocalIssuer]:
    with local_issuer() as found:
        yield found


@pytest.fixture
def served(issuer: LocalIssuer, tmp_path: Any) -> Iterator[tuple[str, list[str]]]:
    ledger: list[str] = []

    def factory() -> Any:
        ai = Pausepoint()
        policy = ApprovalPolicy(roles={"treasury": Role(tools=["transfer_money"])}, members=token_roles)
        build(SqliteSessionStore(tmp_path / "s.db"), policy, ledger=ledger, app=ai)
        sso = OidcBearer(issuer=issuer.url, audience=AUDIENCE, principal_claim="email", tenant_claim="org.id")
        return create_app(ai, auth=sso, policy=OwnerPolicy(approver_roles={"treasury"}), console=False)

    with serve_in_thread(factory) as url:
        yield url, ledger


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_the_tokens_tenant_claim_decides_the_tenant(served, issuer):
    url, ledger = served
    acme = bearer(issuer.mint("u1", email="alice@example.com", org={"id": "acme"}))
    globex = bearer(issuer.mint("u2", email="alice@example.com", org={"id": "globex"}))
    acme_treasury = bearer(issuer.mint("u3", email="tess@example.com", org={"id": "acme"}, roles=["treasury"]))
    nobody = bearer(issuer.mint("u4", email="alice@example.com"))  # no tenant claim: of no tenant
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        who = (await http.get("/v1/agents", headers=acme)).json()
        assert (who["principal"], who["tenant"]) == ("alice@example.com", "acme")
        sessions = {}
        for name, token in (("acme", acme), ("globex", globex), ("none", nobody)):
            reply = await http.post(SESSIONS, json={"message": "pay 5 to savings"}, headers=token)
            assert reply.status_code == 200, reply.text
            sessions[name] = (reply.json()["session_id"], reply.json()["interrupts"][0]["ref"])
        for name, token in (("acme", acme), ("globex", globex), ("none", nobody)):
            mine, _ = sessions[name]
            listed = (await http.get(SESSIONS, headers=token)).json()["sessions"]
            assert [(s["session_id"], s["owner"], s["tenant"]) for s in listed] == [
                (mine, "alice@example.com", None if name == "none" else name)
            ]
            for other, (theirs, _) in sessions.items():
                if other != name:
                    assert (await http.get(f"{SESSIONS}/{theirs}", headers=token)).status_code == 404
        # treasury, by its token, in acme: an approver there (sees acme's inbox), and nowhere else
        inbox = (await http.get(SESSIONS + "?pending=true", headers=acme_treasury)).json()["sessions"]
        assert [s["session_id"] for s in inbox] == [sessions["acme"][0]]
        globex_id, globex_ref = sessions["globex"]
        cross = await http.post(
            f"{SESSIONS}/{globex_id}/interrupts/{globex_ref}/approve", json={}, headers=acme_treasury
        )
        assert cross.status_code == 404
        acme_id, acme_ref = sessions["acme"]
        done = await http.post(f"{SESSIONS}/{acme_id}/interrupts/{acme_ref}/approve", json={}, headers=acme_treasury)
        assert done.status_code == 200 and done.json()["finish_reason"] == "stop", done.text
    assert ledger == ["5->savings"]


async def test_a_tenant_claim_that_names_no_tenant_is_refused(served, issuer):
    url, _ = served
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        for bad in ("a/b", "", " acme", 7):
            token = issuer.mint("u1", email="alice@example.com", org={"id": bad})
            reply = await http.get("/v1/agents", headers=bearer(token))
            assert reply.status_code == 401, (bad, reply.text)
            assert "'org.id' claim names no tenant" in reply.json()["error"]["message"]
