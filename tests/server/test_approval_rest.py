"""Approval policies over the REST API (real HTTP on loopback, a real SQLite file): a quorum's
progress on every read, grants given, listed and revoked, refusals as typed 4xx, and the OpenAPI
document describing it all. The same story the Python API tells (tests/test_approval_policy.py)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from pausepoint import Pausepoint
from pausepoint.server import BearerTokens, OwnerPolicy, create_app
from pausepoint.stores import SqliteSessionStore
from tests.approval_apps import build, treasury
from tests.server.harness import serve_in_thread
from tests.server.test_genkit_wire import GENKIT_PYTHON

TOKENS = {"a": "alice", "b": "bob", "c": "carol", "d": "dave"}
ALICE, BOB, CAROL, DAVE = ({"Authorization": f"Bearer {t}"} for t in "abcd")


class Bank:
    def __init__(self, url: str, ledger: list[str]) -> None:
        self.url = url
        self.ledger = ledger

    def sessions(self, app: str) -> str:
        return f"{self.url}/{app}/v1/agents/bank/sessions"


@pytest.fixture
def bank(tmp_path: Path) -> Iterator[Bank]:
    """Two of treasury approve transfers at /quorum; at /grants, one of treasury who did not ask
    for it approves, and may grant later transfers for up to a day. dave asks; alice, bob and
    carol (treasury) see every session."""
    ledger: list[str] = []

    def factory() -> Starlette:
        store = SqliteSessionStore(tmp_path / "sessions.db")
        options: dict[str, Any] = {"auth": BearerTokens(TOKENS), "policy": OwnerPolicy({"alice", "bob", "carol"})}
        quorum, grants = Pausepoint(), Pausepoint()
        build(store, treasury(quorum={"transfer_money": 2}), ledger=ledger, app=quorum)
        policy = treasury(grantable={"transfer_money": timedelta(days=1)}, separation_of_duties=True)
        build(store, policy, ledger=ledger, app=grants)
        return Starlette(
            routes=[
                Mount("/quorum", create_app(quorum, **options)),
                Mount("/grants", create_app(grants, **options)),
            ]
        )

    with serve_in_thread(factory) as url:
        yield Bank(url, ledger)


def approval_of(pause: dict[str, Any]) -> dict[str, Any]:
    shown: dict[str, Any] = pause["view"]["approval"]
    return shown


async def test_a_quorum_shows_its_progress_on_every_read_and_runs_once(bank):
    async with httpx.AsyncClient(timeout=30) as http:
        sent = (await http.post(bank.sessions("quorum"), json={"message": "pay 500 to savings"}, headers=DAVE)).json()
        session = f"{bank.sessions('quorum')}/{sent['session_id']}"
        [pause] = sent["interrupts"]
        assert pause["approval"]["required"] == 2 and pause["approval"]["approved_by"] == []
        assert (approval_of(pause)["progress"], approval_of(pause)["may_approve"]) == (
            "0 of 2 approvals",
            ["alice", "bob", "carol"],
        )
        approve = f"{session}/interrupts/{pause['ref']}/approve"
        refused = await http.post(approve, json={}, headers=DAVE)  # an auditor, not treasury
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "approval_forbidden"

        first = (await http.post(approve, json={}, headers=ALICE)).json()
        assert first["finish_reason"] == "interrupted" and bank.ledger == []
        inbox = (await http.get(bank.sessions("quorum") + "?pending=true", headers=BOB)).json()["sessions"]
        assert [s["session_id"] for s in inbox] == [sent["session_id"]]
        read = (await http.get(session, headers=BOB)).json()
        listed = (await http.get(f"{session}/interrupts", headers=BOB)).json()["interrupts"]
        for shown in (first["interrupts"][0], read["interrupts"][0], listed[0]):
            assert shown["approval"]["approved_by"] == ["alice"]
            assert approval_of(shown)["progress"] == "1 of 2 approvals"
            assert approval_of(shown)["may_approve"] == ["bob", "carol"]
            assert approval_of(shown)["waiting_for"] == "Waiting for 1 more approval from treasury (bob or carol)."
        twice = await http.post(approve, json={}, headers=ALICE)
        assert twice.status_code == 409 and twice.json()["error"]["code"] == "already_approved"

        done = (await http.post(approve, json={}, headers=CAROL)).json()
        assert (done["finish_reason"], done["interrupts"]) == ("stop", []) and bank.ledger == ["500->savings"]
        late = await http.post(approve, json={}, headers=BOB)
        assert late.status_code == 409 and late.json()["error"]["code"] == "already_resolved"
        trail = (await http.get(f"{session}/audit", headers=DAVE)).json()["entries"]
        assert [(e["decision"], e["principal"], e["via"], e["approvals"], e["required"]) for e in trail[1:]] == [
            ("approve", "alice", "http", 1, 2),
            ("approve", "carol", "http", 2, 2),
        ]
        assert bank.ledger == ["500->savings"]


async def test_grants_are_given_listed_and_revoked_over_rest(bank):
    async with httpx.AsyncClient(timeout=30) as http:
        sessions = bank.sessions("grants")
        sent = (await http.post(sessions, json={"message": "pay 500 to savings"}, headers=DAVE)).json()
        session = f"{sessions}/{sent['session_id']}"
        [pause] = sent["interrupts"]
        assert approval_of(pause)["grantable"] and approval_of(pause)["excluded"] == ["dave"]
        approve = f"{session}/interrupts/{pause['ref']}/approve"

        own = await http.post(approve, json={}, headers=DAVE)  # dave asked for it, and holds no treasury role
        assert own.status_code == 403 and own.json()["error"]["details"]["reason"] == "role"
        mine = (await http.post(sessions, json={"message": "pay 5 to x"}, headers=ALICE)).json()  # treasury asks
        [her_pause] = mine["interrupts"]
        her_own = await http.post(
            f"{sessions}/{mine['session_id']}/interrupts/{her_pause['ref']}/approve", json={}, headers=ALICE
        )
        assert her_own.status_code == 403 and her_own.json()["error"]["details"]["reason"] == "separation_of_duties"
        for bad, code in (({"grant": {"uses": 0}}, 422), ({"grant": {"bounds": {"nope": {"max": 1}}}}, 422)):
            refused = await http.post(approve, json=bad, headers=ALICE)
            assert refused.status_code == code, refused.text
        denied = await http.post(f"{session}/interrupts/{pause['ref']}/deny", json={"grant": {}}, headers=ALICE)
        assert denied.status_code == 400  # a denial grants nothing: the field is not taken
        assert bank.ledger == [] and (await http.get(f"{session}/grants", headers=DAVE)).json()["grants"] == []

        bounded = {"bounds": {"amount": {"max": 100}}, "uses": 2, "ttl_seconds": 3600}
        granted = (await http.post(approve, json={"grant": bounded}, headers=ALICE)).json()
        assert granted["finish_reason"] == "stop" and bank.ledger == ["500->savings"]
        [grant] = (await http.get(f"{session}/grants", headers=DAVE)).json()["grants"]
        assert (grant["tool"], grant["principal"], grant["via"], grant["status"], grant["used"], grant["uses"]) == (
            "transfer_money",
            "alice",
            "http",
            "active",
            0,
            2,
        )
        assert grant["bounds"] == {"amount": {"max": 100}}

        small = (await http.post(f"{session}/messages", json={"message": "pay 20 to x"}, headers=DAVE)).json()
        assert small["finish_reason"] == "stop" and bank.ledger == ["500->savings", "20->x"]  # by the grant
        big = (await http.post(f"{session}/messages", json={"message": "pay 200 to x"}, headers=DAVE)).json()
        [outside] = big["interrupts"]  # beyond its bounds: a person decides
        await http.post(f"{session}/interrupts/{outside['ref']}/deny", json={"reason": "too much"}, headers=BOB)

        missing = await http.post(f"{session}/grants/nosuch/revoke", json={}, headers=BOB)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "grant_not_found"
        revoke = f"{session}/grants/{grant['id']}/revoke"
        revoked = (await http.post(revoke, json={"reason": "audit"}, headers=BOB)).json()["grant"]
        assert (revoked["status"], revoked["revoked_by"], revoked["reason"], revoked["used"]) == (
            "revoked",
            "bob",
            "audit",
            1,
        )
        after = (await http.post(f"{session}/messages", json={"message": "pay 30 to x"}, headers=DAVE)).json()
        assert after["finish_reason"] == "interrupted" and bank.ledger == ["500->savings", "20->x"]

        trail = (await http.get(f"{session}/audit", headers=DAVE)).json()["entries"]
        rows = [(e["decision"], e["principal"], e["via"], e["grant"]) for e in trail if e["decision"] != "message"]
        assert rows == [
            ("approve", "alice", "http", None),
            ("grant", "alice", "http", grant["id"]),
            ("approve", "alice", "policy", grant["id"]),  # by alice's grant
            ("deny", "bob", "http", None),
            ("revoke", "bob", "http", grant["id"]),
        ]
        [given] = [e for e in trail if e["decision"] == "grant"]  # its time as the grant's own is written
        assert given["scope"]["expires_at"] == grant["expires_at"] and grant["expires_at"].endswith("Z")


async def test_the_openapi_document_describes_quorum_progress_and_grants(bank):
    async with httpx.AsyncClient(timeout=30) as http:
        doc = (await http.get(f"{bank.url}/grants/openapi.json", headers=ALICE)).json()
    paths, schemas = doc["paths"], doc["components"]["schemas"]
    session = "/v1/agents/{agent}/sessions/{session_id}"
    assert schemas["GrantInfo"]["properties"].keys() >= {"id", "tool", "bounds", "uses", "used", "status"}
    assert paths[session + "/grants"]["get"]["responses"]["200"]
    revoke = paths[session + "/grants/{grant_id}/revoke"]["post"]
    assert revoke["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/RevokeBody")
    for body in ("ApproveBody", "RestartBody", "RespondBody", "RestartItem", "RespondItem"):
        assert "grant" in schemas[body]["properties"], body
    assert schemas["GrantBody"]["properties"].keys() == {"tool", "bounds", "uses", "ttl_seconds"}
    view = schemas["ApprovalView"]["properties"]
    assert view.keys() >= {"progress", "approved_by", "may_approve", "waiting_for", "grantable"}


@pytest.mark.skipif(
    not Path(GENKIT_PYTHON).exists(), reason="genkit 0.12.0 is not installed (PAUSEPOINT_GENKIT_PYTHON)"
)
async def test_a_quorum_approval_through_genkits_client_records_one_approval(bank):
    """Genkit 0.12's own client approves a transfer two must approve: one approval is recorded,
    the pause stays open as "1 of 2 approvals" (on its wire too), the same approver again is
    refused, and a second approver (over REST) runs it once."""
    done = await asyncio.to_thread(
        subprocess.run,
        [GENKIT_PYTHON, str(Path(__file__).with_name("genkit_quorum.py")), f"{bank.url}/quorum/agents/bank", "a"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    [asked] = seen["asked"]["interrupts"]
    assert asked["metadata"]["approval"] == {
        "required": 2,
        "approvals": 0,
        "approvedBy": [],
        "progress": "0 of 2 approvals",
        "requestedBy": "alice",
    }
    [still] = seen["approved"]["interrupts"]
    assert seen["asked"]["finish"] == seen["approved"]["finish"] == "interrupted"
    assert still["toolRequest"]["ref"] == asked["toolRequest"]["ref"]
    assert still["metadata"]["approval"]["progress"] == "1 of 2 approvals"
    assert still["metadata"]["approval"]["approvedBy"] == ["alice"]
    assert seen["again"]["status"] == "ALREADY_EXISTS" and "approved this call" in seen["again"]["message"]
    [paused_part] = [p for m in seen["snapshot"] for p in m["content"] if "toolRequest" in p]
    assert paused_part["metadata"]["approval"]["progress"] == "1 of 2 approvals"
    assert bank.ledger == []

    session = f"{bank.sessions('quorum')}/{seen['session_id']}"
    async with httpx.AsyncClient(timeout=30) as http:
        trail = (await http.get(f"{session}/audit", headers=ALICE)).json()["entries"]
        assert [(e["decision"], e["principal"], e["via"], e["approvals"]) for e in trail[1:]] == [
            ("approve", "alice", "genkit", 1)
        ]
        [pause] = (await http.get(f"{session}/interrupts", headers=BOB)).json()["interrupts"]
        assert approval_of(pause)["progress"] == "1 of 2 approvals"
        done_ = (await http.post(f"{session}/interrupts/{pause['ref']}/approve", json={}, headers=BOB)).json()
    assert done_["finish_reason"] == "stop" and bank.ledger == ["500->savings"]


async def test_the_python_client_gives_counts_lists_and_revokes_like_a_local_chat(bank):
    """pausepoint.client tells the same story as a local chat: a quorum's approval counted, a
    grant given with an approval (not dropped on the way), listed and revoked."""
    from pausepoint import Grant
    from pausepoint.client import Client
    from pausepoint.errors import AlreadyApproved, ApprovalForbidden, GrantNotFound

    async with Client(f"{bank.url}/quorum", token="d") as dave, Client(f"{bank.url}/quorum", token="a") as alice:
        asked = dave.agent("bank").chat()
        [pause] = (await asked.send("pay 500 to savings")).interrupts
        chat = alice.agent("bank").chat(asked.session_id)
        res = await chat.resume(restart=[pause.restart()])
        [still] = res.interrupts
        assert still.approval is not None and still.approval.approved_by == ["alice"] and bank.ledger == []
        with pytest.raises(AlreadyApproved):
            await chat.resume(restart=[still.restart()])

    async with Client(f"{bank.url}/grants", token="d") as dave, Client(f"{bank.url}/grants", token="b") as bob:
        asked = dave.agent("bank").chat()
        [pause] = (await asked.send("pay 40 to y")).interrupts
        with pytest.raises(ApprovalForbidden) as own:  # dave decides no transfer: its reason is kept (a probe)
            await asked.resume(restart=[pause.restart()])
        assert own.value.details["reason"] == "role"
        chat = bob.agent("bank").chat(asked.session_id)
        await chat.resume(restart=[pause.restart(grant=Grant(uses=1))])
        [grant] = await chat.grants()
        assert (grant.principal, grant.uses, grant.status) == ("bob", 1, "active")
        revoked = await chat.revoke_grant(grant.id, reason="done")
        assert (revoked.status, revoked.revoked_by) == ("revoked", "bob")
        with pytest.raises(GrantNotFound):
            await chat.revoke_grant("nosuch")
    assert bank.ledger == ["40->y"]


async def test_an_idempotency_key_replays_only_its_principals_approval(bank):
    async with httpx.AsyncClient(timeout=30) as http:
        sent = (await http.post(bank.sessions("quorum"), json={"message": "pay 500 to savings"}, headers=DAVE)).json()
        session = f"{bank.sessions('quorum')}/{sent['session_id']}"
        [pause] = sent["interrupts"]
        approve = f"{session}/interrupts/{pause['ref']}/approve"
        key = {"Idempotency-Key": f"approve:{pause['ref']}"}  # a key derived from the ref, as a console may
        first = await http.post(approve, json={}, headers={**ALICE, **key})
        assert first.status_code == 200 and first.json()["finish_reason"] == "interrupted"
        for other in (BOB, DAVE):  # another approver; the requester, who has no treasury role
            reused = await http.post(approve, json={}, headers={**other, **key})
            assert reused.status_code == 409 and reused.json()["error"]["code"] == "idempotency_key_reused"
        again = await http.post(approve, json={}, headers={**ALICE, **key})
        assert again.status_code == 200 and again.json() == first.json()
        trail = (await http.get(f"{session}/audit", headers=DAVE)).json()["entries"]
        assert [(e["decision"], e["principal"]) for e in trail[1:]] == [("approve", "alice")] and bank.ledger == []

        done = await http.post(approve, json={}, headers={**BOB, "Idempotency-Key": f"approve:{pause['ref']}:bob"})
        assert done.json()["finish_reason"] == "stop" and bank.ledger == ["500->savings"]


async def test_who_may_answer_is_checked_before_which_answer_a_pause_takes(bank):
    async with httpx.AsyncClient(timeout=30) as http:
        sent = (await http.post(bank.sessions("quorum"), json={"message": "pay 500 to savings"}, headers=DAVE)).json()
        respond = f"{bank.sessions('quorum')}/{sent['session_id']}/interrupts/{sent['interrupts'][0]['ref']}/respond"
        refused = await http.post(respond, json={"output": "sent"}, headers=DAVE)  # an auditor: no say at all
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "approval_forbidden"
        wrong = await http.post(respond, json={"output": "sent"}, headers=ALICE)  # treasury: not a made-up result
        assert wrong.status_code == 422 and wrong.json()["error"]["code"] == "decision_not_allowed"
        assert bank.ledger == []


async def test_a_grant_out_of_range_is_the_same_refusal_through_the_client_as_in_a_local_chat(bank):
    """Found by a probe: the client raised InvalidRequest with pydantic's report of the request's
    schema, where a local chat raises InvalidGrant: a grant refused is InvalidGrant everywhere."""
    from pausepoint import Grant
    from pausepoint.client import Client
    from pausepoint.errors import InvalidGrant

    async with Client(f"{bank.url}/grants", token="d") as dave, Client(f"{bank.url}/grants", token="a") as alice:
        asked = await dave.agent("bank").chat().send("pay 500 to savings")
        chat = alice.agent("bank").chat(asked.session_id)
        for grant in (Grant(uses=0), Grant(uses=10**10), Grant(ttl=timedelta(days=-1)), Grant(ttl=timedelta(0))):
            with pytest.raises(InvalidGrant, match="a grant's"):
                await chat.approve(asked.interrupts[0].ref, grant=grant)
        assert bank.ledger == []
        done = await chat.approve(asked.interrupts[0].ref, grant=Grant(uses=2))
    assert done.finish_reason == "stop" and bank.ledger == ["500->savings"]


async def test_a_grants_uses_is_a_json_number_with_nothing_after_its_point(bank):
    """JSON has one kind of number and its Schema's ``integer`` takes ``2.0`` (found by a probe:
    the document allowed it and the server refused it); ``2.5``, ``"2"`` and ``true`` stay no count."""
    async with httpx.AsyncClient(timeout=30) as http:
        sessions = bank.sessions("grants")
        sent = (await http.post(sessions, json={"message": "pay 500 to savings"}, headers=DAVE)).json()
        session = f"{sessions}/{sent['session_id']}"
        approve = f"{session}/interrupts/{sent['interrupts'][0]['ref']}/approve"
        for uses in (2.5, "2", True):
            refused = await http.post(approve, json={"grant": {"uses": uses}}, headers=ALICE)
            assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_request", uses
        assert bank.ledger == []
        granted = await http.post(approve, json={"grant": {"uses": 2.0}}, headers=ALICE)
        assert granted.status_code == 200 and bank.ledger == ["500->savings"], granted.text
        [grant] = (await http.get(f"{session}/grants", headers=DAVE)).json()["grants"]
        assert grant["uses"] == 2 and type(grant["uses"]) is int
