"""Through nginx, round-robin, no stickiness: a session's turns and answers land on different
processes, and racing approvals sent through two processes make one transfer each."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest

from .proxy import ALICE, Deployment, text, transfers_by_account

SESSIONS = "/v1/agents/bankingAgent/sessions"

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


async def post(http: httpx.AsyncClient, url: str, test_id: str, body: dict) -> httpx.Response:
    return await http.post(url, json=body, headers={**ALICE, "X-Test-Id": test_id})


async def pause(http: httpx.AsyncClient, deployed: Deployment, account: str) -> tuple[str, str]:
    """Start a session asking for a transfer to ``account``; its id and the pause's ref."""
    reply = await post(http, deployed.url + SESSIONS, f"{account}-send", {"message": f"Transfer $5 to {account}."})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["finish_reason"] == "interrupted"
    return body["session_id"], body["interrupts"][0]["ref"]


async def test_a_sessions_turns_and_answers_land_on_different_processes(deployed, http):
    accounts = [f"rr{i}x{uuid.uuid4().hex[:6]}" for i in range(6)]
    for account in accounts:  # one request at a time: nginx's round-robin alternates
        session, ref = await pause(http, deployed, account)
        answer = f"{SESSIONS}/{session}/interrupts/{ref}/respond"
        reply = await post(http, deployed.url + answer, f"{account}-answer", {"output": {"approved": True}})
        assert reply.status_code == 200, reply.text
        assert (reply.json()["finish_reason"], text(reply.json())) == ("stop", f"Transferred $5 to {account}.")
        reply = await post(http, deployed.url + f"{SESSIONS}/{session}/messages", f"{account}-thanks",
                           {"message": "Thanks!"})  # fmt: skip
        assert (reply.status_code, text(reply.json())) == (200, "You said: Thanks!"), reply.text

    for account in accounts:
        send, answer, thanks = (deployed.served_by(f"{account}-{step}") for step in ("send", "answer", "thanks"))
        assert send.upstream != answer.upstream != thanks.upstream, (send, answer, thanks)
    assert {s.upstream for s in deployed.served()} == {u.removeprefix("http://") for u in deployed.direct}
    assert transfers_by_account(deployed.ledger) == {account: 1 for account in accounts}


async def test_racing_approvals_through_two_processes_make_one_transfer_each(deployed, http):
    accounts = [f"race{i}x{uuid.uuid4().hex[:6]}" for i in range(8)]
    paused = [await pause(http, deployed, account) for account in accounts]
    for account, (session, ref) in zip(accounts, paused, strict=True):
        url = deployed.url + f"{SESSIONS}/{session}/interrupts/{ref}/respond"
        replies = await asyncio.gather(
            *(post(http, url, f"{account}-racer{n}", {"output": {"approved": True}}) for n in (1, 2))
        )
        won = [r for r in replies if r.status_code == 200]
        lost = [r for r in replies if r.status_code != 200]
        assert len(won) == 1 and text(won[0].json()) == f"Transferred $5 to {account}.", [r.text for r in replies]
        assert [(r.status_code, r.json()["error"]["code"]) for r in lost] == [(409, "already_resolved")]
        one, two = (deployed.served_by(f"{account}-racer{n}") for n in (1, 2))
        assert one.upstream != two.upstream  # the two racers reached two processes

    assert transfers_by_account(deployed.ledger) == {account: 1 for account in accounts}
