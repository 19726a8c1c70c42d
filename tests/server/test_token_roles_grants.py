"""Grants under roles a token carries (``ApprovalPolicy(members=token_roles)``, single sign-on):
a grant approves the requester's later calls within it, judged by the roles the grantor held
when they gave it — the policy cannot read the grantor's token on the requester's request
(found by a probe: such a grant was listed active and never approved anything)."""

from __future__ import annotations

import httpx
import pytest
from pydantic import BaseModel

from pausepoint import ApprovalPolicy, Pausepoint, Role
from pausepoint.server import BearerTokens, Identity, OwnerPolicy, create_app, token_roles
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, last_tool_results, tool_call
from tests.server.harness import serve_in_thread

DAVE = {"Authorization": "Bearer dave-token"}
ALICE = {"Authorization": "Bearer alice-token"}
TOKENS = {"dave-token": "dave", "alice-token": Identity("alice", roles=frozenset({"treasury"}))}


class Transfer(BaseModel):
    amount: int
    to_account: str


@pytest.mark.parametrize("own_members", [False, True], ids=["tokens-only", "with-the-agents-members"])
async def test_a_grant_given_by_a_tokens_role_approves_the_requesters_next_call(tmp_path, own_members):
    ran: list[int] = []
    ai = Pausepoint()

    @ai.tool(requires_approval=True)
    async def transfer_money(input: Transfer) -> str:
        """Move money."""
        ran.append(input.amount)
        return f"sent {input.amount}"

    def script(request):
        if last_tool_results(request):
            return "Done."
        return [tool_call("transfer_money", {"amount": 5, "to_account": "savings"})]

    roles = {"treasury": Role(tools=["transfer_money"], decisions=["approve", "deny"])}
    members = {"erin": ["treasury"]} if own_members else None
    policy = ApprovalPolicy(roles=roles, grantable=["transfer_money"], members=members)
    policy = policy + ApprovalPolicy(members=token_roles)  # as `pausepoint serve` with sign-on composes them
    ai.define_agent(name="bank", model=ScriptedModel(script), tools=[transfer_money],
                    store=SqliteSessionStore(tmp_path / "s.db"), approval=policy)  # fmt: skip

    def app():
        return create_app(ai, auth=BearerTokens(TOKENS), policy=OwnerPolicy(approver_roles={"treasury"}))

    with serve_in_thread(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            session = "/v1/agents/bank/sessions/s1"
            first = (await http.post(session + "/messages", json={"message": "pay"}, headers=DAVE)).json()
            ref = first["interrupts"][0]["ref"]
            granted = await http.post(f"{session}/interrupts/{ref}/approve", json={"grant": {}}, headers=ALICE)
            assert granted.status_code == 200 and ran == [5]
            second = (await http.post(session + "/messages", json={"message": "pay again"}, headers=DAVE)).json()
            assert (second["finish_reason"], second["interrupts"], ran) == ("stop", [], [5, 5])  # by the grant
            [grant] = (await http.get(session + "/grants", headers=DAVE)).json()["grants"]
            assert (grant["principal"], grant["used"]) == ("alice", 1)
            revoked = await http.post(f"{session}/grants/{grant['id']}/revoke", json={}, headers=ALICE)
            assert revoked.status_code == 200
            third = (await http.post(session + "/messages", json={"message": "and again"}, headers=DAVE)).json()
            assert third["finish_reason"] == "interrupted" and ran == [5, 5]  # revoked: a person decides again
