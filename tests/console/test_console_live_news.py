"""What happens to an open session elsewhere shows in the console as it happens (real headless
Chromium, a real server on loopback, its feed): every kind of event the feed sends about the
session — a grant revoked, a pause escalated to other approvers, not only pauses and answers —
and a confirmation whose decision is no longer this person's to give closes instead of staying
pressable (found by a probe: a grant revoked elsewhere read "Granted … until" until a reload; a
second tab kept "Hold to approve" open after its own approval was counted in the first, and the
hold sent an approval the server refused)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from starlette.applications import Starlette
from starlette.routing import Mount

from pausepoint import Escalation, Pausepoint
from pausepoint.server import BearerTokens, OwnerPolicy, create_app
from pausepoint.stores import SqliteSessionStore
from tests.approval_apps import build, treasury
from tests.console.conftest import Shots
from tests.console.steps import Bank, open_session
from tests.server.harness import serve_in_thread

PEOPLE = ("alice", "bob", "carol", "dave", "erin")
TOKENS = {f"{who}-token": who for who in PEOPLE}
#: how long treasury has to decide an escalating transfer before it goes to leads
TREASURY_TTL = timedelta(seconds=4)


@pytest.fixture
def bank(tmp_path: Path) -> Iterator[Bank]:
    """/grants: one of treasury (alice, bob, carol) approves a transfer and may grant later ones.
    /quorum: two of treasury approve each transfer. /escalating: treasury has ``TREASURY_TTL`` to
    decide a transfer, then it is handed to leads (erin) for an hour."""
    ledger: list[str] = []

    def factory() -> Starlette:
        store = SqliteSessionStore(tmp_path / "sessions.db")
        grants, quorum, escalating = Pausepoint(), Pausepoint(), Pausepoint()
        build(store, treasury(grantable={"transfer_money": timedelta(days=1)}), ledger=ledger, app=grants)
        build(store, treasury(quorum={"transfer_money": 2}), ledger=ledger, app=quorum)
        handed_on = treasury(
            ttl={"transfer_money": TREASURY_TTL},
            escalation={"transfer_money": [Escalation(to=["leads"], ttl=timedelta(hours=1))]},
        )
        build(store, handed_on, ledger=ledger, app=escalating)
        options: dict[str, Any] = {
            "auth": BearerTokens(TOKENS),
            "policy": OwnerPolicy({"alice", "bob", "carol", "erin"}),
            "feed_interval": 0.2,
            "expiry_interval": 0.3,
        }
        return Starlette(
            routes=[
                Mount("/grants", create_app(grants, **options)),
                Mount("/quorum", create_app(quorum, **options)),
                Mount("/escalating", create_app(escalating, **options)),
            ]
        )

    with serve_in_thread(factory) as url:
        yield Bank(url, ledger)


def test_a_grant_revoked_elsewhere_shows_in_the_open_trail(bank: Bank, browser, shots: Shots):
    paused = bank.ask("grants", "pay 500 to savings")
    session, ref = bank.session("grants", paused["session_id"]), paused["interrupts"][0]["ref"]
    alice = {"Authorization": "Bearer alice-token"}
    granted = httpx.post(f"{session}/interrupts/{ref}/approve", json={"grant": {}}, headers=alice)
    assert granted.status_code == 200, granted.text

    page = browser.new_page()
    open_session(page, bank, "grants", "alice", paused["session_id"])
    trail = page.locator("#audit > .audit-entry")
    expect(trail.first).to_have_attribute("data-decision", "grant")
    expect(trail.first).to_contain_text("Later “Transfer money” calls in this session")

    [grant] = httpx.get(f"{session}/grants", headers=alice).json()["grants"]
    revoked = httpx.post(f"{session}/grants/{grant['id']}/revoke", json={"reason": "enough"}, headers=alice)
    assert revoked.status_code == 200, revoked.text
    # told by the feed, with no reload: the trail's newest entry is the revocation
    expect(trail.first).to_have_attribute("data-decision", "revoke")
    expect(trail.first).to_contain_text("Grant revoked")
    expect(trail.first).to_contain_text("No longer: later “Transfer money” calls in this session")
    shots(page, "revoked live")


def test_a_pause_handed_to_other_approvers_shows_who_decides_it_now(bank: Bank, browser, shots: Shots):
    """Treasury's time runs out and the pause goes to leads: alice's card (open, then hers no
    longer), erin's (someone else's, then hers) and bob's inbox say so as it happens, not
    "Expired"; alice's open confirmation closes."""
    paused = bank.ask("escalating", "pay 500 to savings")
    alice, erin = browser.new_page(), browser.new_page()
    open_session(alice, bank, "escalating", "alice", paused["session_id"])
    open_session(erin, bank, "escalating", "erin", paused["session_id"])
    bob = browser.new_page()  # treasury too, looking at no session in particular: his inbox
    bob.goto(f"{bank.url}/escalating/console/#token=bob-token&agent=bank")
    expect(bob.locator("#feed-state")).to_have_text("live")
    expect(bob.locator("#inbox-count")).to_have_text("1")
    hers, erins = alice.locator(".card"), erin.locator(".card")
    expect(hers.get_by_role("button", name="Approve", exact=True)).to_be_visible()
    expect(erins.get_by_role("button", name="Approve", exact=True)).to_have_count(0)  # not leads' yet
    expect(erins.locator(".card-effect")).to_have_text("Approving this call takes treasury, which you do not hold.")
    hers.locator(".card-title").click()
    alice.keyboard.press("a")  # a shortcut asks first
    expect(hers.locator(".card-confirm")).to_be_visible()  # asked, and still asking when the time runs out

    handed = "Handed to leads: nobody decided it in time."
    timeout = (TREASURY_TTL + timedelta(seconds=10)) / timedelta(milliseconds=1)
    expect(hers.locator(".approval-note")).to_contain_text(handed, timeout=timeout)
    expect(hers).to_have_attribute("data-state", "open")  # it still waits: for leads
    expect(hers.locator(".badge").first).to_have_text("Waiting for leads")
    expect(hers.locator(".card-effect")).to_have_text("Approving this call takes leads, which you do not hold.")
    expect(hers.locator(".card-confirm")).to_be_hidden()
    expect(hers.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    expect(hers.locator(".card-expiry")).to_contain_text("Expires in")
    expect(alice.locator("#audit > .audit-entry").first).to_have_attribute("data-decision", "escalate")
    shots(alice, "handed on")
    expect(bob.locator("#inbox-count")).to_have_text("0")  # not his to decide any more
    expect(bob.locator("#inbox .session-item .expires")).to_contain_text("expires in")

    expect(erins).to_have_attribute("data-state", "open")
    expect(erins.locator(".badge").first).to_have_text("Waiting for you")
    erins.get_by_role("button", name="Approve", exact=True).click()  # normal risk: decided at once
    expect(erins).to_have_attribute("data-state", "answered")
    assert bank.ledger == ["500->savings"]
    expect(hers).to_have_attribute("data-state", "elsewhere")
    shots(erin, "approved by leads")


def test_a_confirmation_closes_once_its_decision_is_no_longer_yours(bank: Bank, browser, shots: Shots):
    """alice has a 2-of-2 transfer open in three tabs: she approves in the first while the second
    asks her to confirm an approval and the third has her reason for a denial typed. Once her
    approval is counted, the second tab's confirmation closes (nothing to hold); the denial, which
    is still hers to give, stays as she left it."""
    paused = bank.ask("quorum", "pay 444 to savings")
    first, second, third = browser.new_page(), browser.new_page(), browser.new_page()
    for page in (first, second, third):
        open_session(page, bank, "quorum", "alice", paused["session_id"])
    asking, denying = second.locator(".card"), third.locator(".card")
    asking.locator(".card-title").click()
    second.keyboard.press("a")  # a shortcut asks first
    confirm = asking.locator(".card-confirm")
    expect(confirm.get_by_role("button", name="Yes, approve")).to_be_visible()
    denying.get_by_role("button", name="Deny…").click()
    denying.get_by_label("Reason for denying (the agent reads it)").fill("not this month")

    card = first.locator(".card")
    card.get_by_role("button", name="Approve", exact=True).click()  # normal risk: decided at once
    expect(card).to_have_attribute("data-state", "counted")

    expect(asking).to_have_attribute("data-state", "counted")  # told by the feed
    expect(confirm).to_be_hidden()
    expect(asking.get_by_role("button", name="Yes, approve")).to_have_count(0)
    expect(asking.locator(".card-status")).to_have_text(
        "Your approval is counted: 1 of 2 approvals. Waiting for 1 more approval from treasury (bob or carol)."
    )
    expect(asking.get_by_role("button", name="Deny…")).to_be_visible()  # what is still hers to do
    shots(second, "confirmation closed")

    expect(denying).to_have_attribute("data-state", "counted")
    expect(denying.get_by_label("Reason for denying (the agent reads it)")).to_have_value("not this month")
    expect(denying.get_by_role("button", name="Deny", exact=True)).to_be_visible()
    shots(third, "denial kept")

    alice = {"Authorization": "Bearer alice-token"}
    entries = httpx.get(f"{bank.session('quorum', paused['session_id'])}/audit", headers=alice)
    decided = [(e["decision"], e["principal"]) for e in entries.json()["entries"] if e["decision"] != "message"]
    assert decided == [("approve", "alice")]  # her one approval: nothing sent twice
    assert bank.ledger == []
