"""Approval links, Slack and email across tenants, end to end: two tenants, acme and globex, on
one server, with the same people in each (``build_tenant_reach_app``: dave asks, alice approves
and holds the treasury role — each in her own tenant). Whatever reaches a globex person — an
acme pause's link, its Slack card, its email — decides nothing and writes nothing: an acme
pause is, to globex's alice, a session that does not exist. Each check is followed by acme's
alice deciding the same pause through the same channel, so the refusal is the tenant's and
not the channel's."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from tests.server.reach_harness import Served, auth, link_token, serve_reach, token_of

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

ACTIONS = ("approve", "deny", "respond", "restart")


@pytest.fixture
def served(tmp_path: Any) -> Iterator[Served]:
    with serve_reach(tmp_path, tenants=True) as served:
        yield served


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


async def paused(served: Served, http: httpx.AsyncClient, tenant: str) -> tuple[str, dict, str]:
    """A transfer asked for by ``tenant``'s dave: the session's id, its pause, and the token of
    the link it was announced with."""
    body = await served.ask(http, who=f"{tenant}-dave")
    [pause] = body["interrupts"]
    return body["session_id"], pause, token_of(await served.link_of(body["session_id"], pause["pause_id"]))


async def snapshot(served: Served, http: httpx.AsyncClient, session_id: str, tenant: str) -> tuple:
    """All a decision would change, read as ``tenant``'s alice: the open pauses, the audit
    trail and the history (the session's log as the API shows it)."""
    pauses, audit = await served.state(http, session_id, f"{tenant}-alice")
    history = (await http.get(served.session(session_id) + "/history", headers=auth(f"{tenant}-alice"))).json()
    return pauses, audit, history


def missing(reply: httpx.Response, session_id: str) -> tuple[int, str]:
    """A 404's status and error body, with the session's id taken out (to compare two of them)."""
    return reply.status_code, json.dumps(reply.json()).replace(session_id, "<session>")


def payload_of(token: str) -> list[Any]:
    """What a link's token names: ["v1", agent, session id, ref, pause id, expiry]."""
    payload = token.split(".")[0]
    return list(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


def answer_url(served: Served, session_id: str, pause: dict, action: str) -> str:
    return f"{served.session(session_id)}/interrupts/{pause['ref']}/{action}"


async def test_an_acme_link_is_a_session_that_does_not_exist_to_globex(served, http):
    session_id, pause, token = await paused(served, http, "acme")
    before = await snapshot(served, http, session_id, "acme")
    [listed], _, _ = before
    # A link this server signed to a session no one has: what "does not exist" looks like.
    ghost_id = "no-such-session"
    ghost = link_token(ghost_id, pause["ref"], pause["pause_id"], payload_of(token)[-1])

    as_globex = auth("globex-alice")  # the same name and role as acme's approver, in globex
    read = await http.get(f"{served.base}/v1/links/{token}", headers=as_globex)
    nothing = await http.get(f"{served.base}/v1/links/{ghost}", headers=as_globex)
    assert missing(read, session_id) == missing(nothing, ghost_id)
    assert read.status_code == 404 and read.json()["error"]["code"] == "session_not_found"
    for action in ACTIONS:  # deciding with the link, through every answer route
        used = await http.post(answer_url(served, session_id, pause, action), json={"link": token}, headers=as_globex)
        ghostly = await http.post(answer_url(served, ghost_id, pause, action), json={"link": ghost}, headers=as_globex)
        assert missing(used, session_id) == missing(ghostly, ghost_id), action
        assert used.status_code == 404, action
    # so does globex's dave (the name of the acme pause's asker)
    assert (await http.get(f"{served.base}/v1/links/{token}", headers=auth("globex-dave"))).status_code == 404

    after = await snapshot(served, http, session_id, "acme")
    assert served.ledger == [] and after == before and after[0] == [listed]  # nothing decided, nothing written

    # acme's alice reads the same link and decides through it: the link was never used up
    shown = await http.get(f"{served.base}/v1/links/{token}", headers=auth("acme-alice"))
    assert shown.status_code == 200 and shown.json()["state"] == "open"
    decided = await http.post(
        answer_url(served, session_id, pause, "approve"), json={"link": token}, headers=auth("acme-alice")
    )
    assert decided.status_code == 200, decided.text
    assert served.ledger == ["transfer 700->savings"]
    entry = (await served.state(http, session_id, "acme-alice"))[1][-1]
    assert (entry["decision"], entry["principal"], entry["via"]) == ("approve", "alice", "link")


async def card(served: Served, session_id: str) -> dict:
    """The Slack card ``session_id``'s pause was posted as."""
    for count in range(1, 50):
        for message in await served.slack.wait("messages", count):
            [buttons] = [b for b in message["blocks"] if b["type"] == "actions"]
            value = next(e["value"] for e in buttons["elements"] if "value" in e)
            if payload_of(value)[2] == session_id:
                return message
    raise AssertionError("no Slack card came")


async def press(served: Served, http: httpx.AsyncClient, message: dict, action: str, user: str) -> httpx.Response:
    body, headers = served.slack.callback(message, action, user=user)
    return await http.post(f"{served.base}/v1/slack/actions", content=body, headers=headers)


async def test_globex_pressing_approve_on_an_acme_card_in_slack_decides_nothing_and_is_told_so(served, http):
    acme, _, _ = await paused(served, http, "acme")
    globex, _, _ = await paused(served, http, "globex")
    acme_card, globex_card = await card(served, acme), await card(served, globex)
    before = (await snapshot(served, http, acme, "acme"), await snapshot(served, http, globex, "globex"))
    told = []
    for message, user, who in (
        (acme_card, "UGLOBEXALICE", "globex/alice"),
        (globex_card, "UACMEALICE", "acme/alice"),
    ):
        for action in ("approve", "deny"):
            reply = await press(served, http, message, action, user)
            assert reply.status_code == 200, reply.text
            assert (reply.json()["ok"], reply.json()["error"]["code"]) == (False, "slack_not_allowed"), action
            [said] = (await served.slack.wait("responses", len(told) + 1))[len(told) :]
            told.append(said)
            assert said == {
                "response_type": "ephemeral",  # to the presser alone; the card is left as it is
                "replace_original": False,
                "text": f"Nothing was decided: {who} may not answer this request",
            }
    after = (await snapshot(served, http, acme, "acme"), await snapshot(served, http, globex, "globex"))
    assert served.ledger == [] and after == before

    # acme's alice presses Approve on the same acme card: decided, as alice of acme, once
    reply = await press(served, http, acme_card, "approve", "UACMEALICE")
    assert (reply.status_code, reply.json()) == (200, {"ok": True})
    [update] = (await served.slack.wait("responses", len(told) + 1))[len(told) :]
    assert update["replace_original"] is True and "Approved by alice via Slack" in update["blocks"][-1]["text"]["text"]
    assert served.ledger == ["transfer 700->savings"]
    entry = (await served.state(http, acme, "acme-alice"))[1][-1]
    assert (entry["decision"], entry["principal"], entry["via"]) == ("approve", "alice", "slack")
    assert await snapshot(served, http, globex, "globex") == before[1]  # globex's pause still waits


async def test_email_goes_to_each_tenants_desk_alone_and_its_link_is_refused_to_the_other(served, http):
    acme, acme_pause, acme_token = await paused(served, http, "acme")
    globex, _, globex_token = await paused(served, http, "globex")
    # The outbox is written with each pause: what is in it is all that will ever be sent.
    listing = await http.get(f"{served.base}/v1/ops/deliveries", headers=auth("ops"))
    queued = {(d["webhook"], d["event"]["session_id"]) for d in listing.json()["deliveries"]}
    mailed = {(hook, session) for hook, session in queued if hook.endswith("-mail")}
    assert mailed == {("acme-mail", acme), ("globex-mail", globex)}

    messages = await served.mailbox.wait(2)
    by_desk = {m["To"]: m for m in messages}
    assert set(by_desk) == {"acme-desk@example.com", "globex-desk@example.com"}
    for desk, token, other in (("acme", acme_token, globex_token), ("globex", globex_token, acme_token)):
        text = str(by_desk[f"{desk}-desk@example.com"].get_body(("plain",)).get_content())
        assert f"#link={token}" in text and other not in text, desk

    # globex's alice follows the link in acme's email: a session that does not exist, to her
    before = await snapshot(served, http, acme, "acme")
    for action in ACTIONS:
        used = await http.post(
            answer_url(served, acme, acme_pause, action), json={"link": acme_token}, headers=auth("globex-alice")
        )
        assert (used.status_code, used.json()["error"]["code"]) == (404, "session_not_found"), action
    read = await http.get(f"{served.base}/v1/links/{acme_token}", headers=auth("globex-alice"))
    assert (read.status_code, read.json()["error"]["code"]) == (404, "session_not_found")
    assert served.ledger == [] and await snapshot(served, http, acme, "acme") == before
    ok = await http.post(
        answer_url(served, acme, acme_pause, "deny"), json={"link": acme_token}, headers=auth("acme-alice")
    )
    assert ok.status_code == 200 and served.ledger == []
    entry = (await served.state(http, acme, "acme-alice"))[1][-1]
    assert (entry["decision"], entry["principal"], entry["via"]) == ("deny", "alice", "link")
