"""An approval link to a call under a quorum, once the call was cancelled or expired with part of
its approvals in: the link's message says how many had approved by then, as the console and
the README say it ("Cancelled (1 of 2 approvals in)"). Found by a probe: it said "Cancelled by
rita via the API at …" alone."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from pausepoint import ApprovalPolicy, PauseDisplay, Pausepoint, Role
from pausepoint.server import BearerTokens, OwnerPolicy, create_app
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel
from pausepoint.webhooks import ApprovalLinks
from tests.server.harness import serve_in_thread
from tests.server.reach_harness import CONSOLE, LINK_SECRET, TOKENS, Clock, Transfer, auth, link_token, script

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def quorum_app(clock: Clock, store_path: str) -> Starlette:
    """The ``treasury`` agent: ``pay_vendor`` needs two of treasury (alice, bob, carol) and
    expires unanswered after an hour."""
    ai = Pausepoint(clock=clock)

    @ai.tool(requires_approval=True, display=PauseDisplay(title="Pay ${amount} to {to_account}"))
    async def pay_vendor(input: Transfer) -> str:
        """Pay a vendor."""
        return f"Paid ${input.amount} to {input.to_account}."

    policy = ApprovalPolicy(
        roles={"treasury": Role(tools=["pay_vendor"])},
        members={"alice": ["treasury"], "bob": ["treasury"], "carol": ["treasury"]},
        quorum={"pay_vendor": 2},
        ttl={"pay_vendor": timedelta(hours=1)},
    )
    ai.define_agent(
        name="treasury",
        model=ScriptedModel(script),
        tools=[pay_vendor],
        store=SqliteSessionStore(store_path),
        approval=policy,
    )
    return create_app(
        ai,
        auth=BearerTokens(TOKENS),
        policy=OwnerPolicy(approvers={"alice", "bob", "carol"}),
        expiry_interval=0.2,
        links=ApprovalLinks(LINK_SECRET, CONSOLE + "/", ttl=timedelta(days=1)),
    )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Clock]]:
    clock = Clock()
    with serve_in_thread(lambda: quorum_app(clock, str(tmp_path / "sessions.db"))) as base:
        yield base, clock


async def paid_with_one_approval(http: httpx.AsyncClient, base: str) -> tuple[str, str]:
    """A session dave started, its pay_vendor pause approved by alice (1 of 2): its URL and the
    token of a link to that pause."""
    reply = await http.post(
        f"{base}/v1/agents/treasury/sessions", json={"message": "Pay $90 to acme"}, headers=auth("dave")
    )
    assert reply.status_code == 200, reply.text
    session_id, [pause] = reply.json()["session_id"], reply.json()["interrupts"]
    session = f"{base}/v1/agents/treasury/sessions/{session_id}"
    approved = await http.post(f"{session}/interrupts/{pause['ref']}/approve", json={}, headers=auth("alice"))
    assert approved.status_code == 200, approved.text
    far = 4_000_000_000  # the link outlives the test; what it says is the pause's story
    return session, link_token(session_id, pause["ref"], pause["pause_id"], far)


async def read_link(http: httpx.AsyncClient, base: str, token: str) -> Any:
    read = await http.get(f"{base}/v1/links/{token}", headers=auth("bob"))
    assert read.status_code == 200, read.text
    return read.json()


async def test_a_link_to_a_call_cancelled_under_a_quorum_says_how_many_had_approved(served):
    base, _ = served
    async with httpx.AsyncClient(timeout=30) as http:
        session, token = await paid_with_one_approval(http, base)
        cancelled = await http.post(f"{session}/cancel", json={"reason": "withdrawn"}, headers=auth("dave"))
        assert cancelled.status_code == 200, cancelled.text
        read = await read_link(http, base, token)
    assert read["state"] == "used" and "was decided already: Cancelled by dave via the API" in read["message"]
    assert read["message"].endswith(" UTC (1 of 2 approvals in).")


async def test_a_link_to_a_call_expired_under_a_quorum_says_how_many_had_approved(served):
    base, clock = served
    async with httpx.AsyncClient(timeout=30) as http:
        session, token = await paid_with_one_approval(http, base)
        clock.advance(timedelta(minutes=61))  # past the pause's hour, before the server's sweep
        read = await read_link(http, base, token)
        assert read["state"] == "expired" and " (1 of 2 approvals in)." in read["message"], read["message"]
        entries: list = []
        for _ in range(300):  # the server's sweep answers it by its expiry policy
            entries = (await http.get(f"{session}/audit", headers=auth("alice"))).json()["entries"]
            if entries[-1]["decision"] == "expire":
                break
            await asyncio.sleep(0.05)
        assert entries[-1]["decision"] == "expire"
        read = await read_link(http, base, token)
    assert read["state"] == "expired" and "expired unanswered at" in read["message"]
    assert read["message"].endswith(" UTC (1 of 2 approvals in).")


async def test_a_used_link_waits_for_nobody(served):
    # Found by a probe: after the quorum's last approval, the link said "used" and still "Waiting
    # for 0 more approvals from treasury (carol)", with carol among who may approve.
    base, _ = served
    async with httpx.AsyncClient(timeout=30) as http:
        session, token = await paid_with_one_approval(http, base)
        before = (await read_link(http, base, token))["pause"]["view"]["approval"]
        [pause] = (await http.get(session, headers=auth("dave"))).json()["interrupts"]
        approved = await http.post(f"{session}/interrupts/{pause['ref']}/approve", json={}, headers=auth("bob"))
        assert approved.status_code == 200, approved.text
        read = await read_link(http, base, token)
    assert before["waiting_for"] and set(before["may_approve"]) == {"bob", "carol"}
    assert read["state"] == "used" and "(2 approvals: alice, bob)" in read["message"]
    after = read["pause"]["view"]["approval"]
    assert (after["waiting_for"], after["may_approve"], after["may_deny"]) == ("", [], [])
    assert (before["progress"], after["progress"]) == ("1 of 2 approvals", "2 of 2 approvals")
