"""Approval policies in the web console (real headless Chromium, a real server on loopback, a real
SQLite file): a quorum's progress ("1 of 2 approvals", who still needs to approve) on the card,
moving on live when another approver approves; the requester not offered an approval under
separation of duties; "Approve for this session" granting later calls. The same story the
Python API, REST and the terminal tell."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from starlette.applications import Starlette
from starlette.routing import Mount

from pausepoint import ApprovalPolicy, Pausepoint, Role
from pausepoint.server import BearerTokens, OwnerPolicy, create_app
from pausepoint.stores import SqliteSessionStore
from tests.approval_apps import MEMBERS, build, treasury
from tests.console.conftest import Shots
from tests.console.steps import Bank, open_session
from tests.server.harness import serve_in_thread

PEOPLE = ("alice", "bob", "carol", "dave")
TOKENS = {f"{who}-token": who for who in PEOPLE}


@pytest.fixture
def bank(tmp_path: Path) -> Iterator[Bank]:
    """/quorum: two of treasury (alice, bob, carol) approve each transfer (a tool that takes
    edits, which a quorum does not). /grants: one of
    treasury who did not ask for it, who may approve later transfers for the session. /audited:
    treasury approves; dave's role, auditor, may only deny."""
    ledger: list[str] = []

    def factory() -> Starlette:
        store = SqliteSessionStore(tmp_path / "sessions.db")
        quorum, grants, audited = Pausepoint(), Pausepoint(), Pausepoint()
        build(store, treasury(quorum={"transfer_money": 2}), ledger=ledger, app=quorum, edits=True)
        build(store, treasury(grantable={"transfer_money": timedelta(days=1)}, separation_of_duties=True),
              ledger=ledger, app=grants)  # fmt: skip
        deny_only = ApprovalPolicy(
            roles={"auditor": Role(tools=["transfer_money"], decisions=["deny"])}, members=MEMBERS
        )
        build(store, treasury() + deny_only, ledger=ledger, app=audited)
        options: dict[str, Any] = {
            "auth": BearerTokens(TOKENS),
            "policy": OwnerPolicy({"alice", "bob", "carol"}),
            "feed_interval": 0.2,
        }
        return Starlette(
            routes=[
                Mount("/quorum", create_app(quorum, **options)),
                Mount("/grants", create_app(grants, **options)),
                Mount("/audited", create_app(audited, **options)),
            ]
        )

    with serve_in_thread(factory) as url:
        yield Bank(url, ledger)


def test_a_quorum_shows_its_progress_and_who_still_needs_to_approve(bank: Bank, browser, shots: Shots):
    paused = bank.ask("quorum", "pay 500 to savings")
    alice, bob = browser.new_page(), browser.new_page()
    open_session(alice, bank, "quorum", "alice", paused["session_id"])
    open_session(bob, bank, "quorum", "bob", paused["session_id"])
    card, bobs = alice.locator(".card"), bob.locator(".card")
    approval = card.locator(".card-approval")
    expect(approval.locator(".approval-progress")).to_have_text("0 of 2 approvals")
    expect(approval.locator(".approval-waiting")).to_have_text(
        "Waiting for 2 more approvals from treasury (alice, bob or carol)."
    )
    expect(card.locator(".card-effect")).to_have_text(
        "If you approve: Your approval is counted (1 of 2). Once 1 more approves, 500.00 will be sent to savings."
    )
    expect(card.get_by_role("button", name="Respond…")).to_have_count(0)  # approve or deny: no made-up result
    expect(card.get_by_role("button", name="Approve for this session")).to_have_count(0)  # no grant for a quorum
    # the tool takes edits, but a quorum approves one input (found by a probe: the form, then a
    # held confirmation, then the server's refusal)
    expect(card.get_by_role("button", name="Edit input")).to_have_count(0)
    shots(alice, "waiting")

    card.get_by_role("button", name="Approve", exact=True).click()
    expect(approval.locator(".approval-progress")).to_have_text("1 of 2 approvals · approved by alice")
    expect(card).to_have_attribute("data-state", "counted")  # still open: it waits for the others
    expect(card.locator(".card-status")).to_have_text(
        "Your approval is counted: 1 of 2 approvals. Waiting for 1 more approval from treasury (bob or carol)."
    )
    expect(card.get_by_role("button", name="Approve", exact=True)).to_have_count(0)  # not twice
    expect(card.get_by_role("button", name="Deny…")).to_be_visible()
    assert bank.ledger == []
    shots(alice, "counted")

    # bob's console moved on live (the feed), and shows him as the one still needed
    expect(bobs.locator(".approval-progress")).to_have_text("1 of 2 approvals · approved by alice")
    expect(bobs.locator(".approval-waiting")).to_have_text("Waiting for 1 more approval from treasury (bob or carol).")
    shots(bob, "bob sees it")
    bobs.get_by_role("button", name="Approve", exact=True).click()
    expect(bobs).to_have_attribute("data-state", "answered")
    expect(bobs.locator(".card-status")).to_have_text(re.compile(r"^Approved \(2 of 2\) by bob at .* · via http$"))
    expect(bob.locator(".msg-model .msg-body").last).to_contain_text("sent 500 to savings")
    assert bank.ledger == ["500->savings"]
    expect(bob.locator("#audit .audit-entry:not(.audit-message)")).to_have_count(2)
    expect(bob.locator("#audit")).to_contain_text("Approved (1 of 2)")
    shots(bob, "resolved")
    expect(card).not_to_have_attribute("data-state", "open")  # alice's card settles from the feed


def test_approve_for_this_session_grants_later_calls_and_the_requester_may_not_approve(
    bank: Bank, browser, shots: Shots
):
    paused = bank.ask("grants", "pay 500 to savings")
    dave = browser.new_page()
    open_session(dave, bank, "grants", "dave", paused["session_id"])
    own = dave.locator(".card")
    expect(own.locator(".approval-waiting")).to_have_text(
        "Waiting for an approval from treasury (alice, bob or carol); not from dave, who asked for it."
    )
    # dave holds no treasury role: the policy lets him neither approve nor deny, and the card
    # offers neither (a probe found Deny offered, then refused with 403).
    expect(own.locator(".card-effect")).to_have_text("You asked for this call: someone else approves it.")
    expect(own.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    expect(own.get_by_role("button", name="Deny…")).to_have_count(0)
    ref = paused["interrupts"][0]["ref"]
    url = f"{bank.url}/grants/v1/agents/bank/sessions/{paused['session_id']}/interrupts/{ref}/deny"
    refused = httpx.post(url, json={"reason": "no"}, headers={"Authorization": "Bearer dave-token"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "approval_forbidden", refused.text
    shots(dave, "requester")

    alice = browser.new_page()
    open_session(alice, bank, "grants", "alice", paused["session_id"])
    card = alice.locator(".card")
    expect(card.locator(".approval-note")).to_have_text(
        "An approval may also approve later “Transfer money” calls in this session."
    )
    card.get_by_role("button", name="Approve for this session").click()
    confirm = card.locator(".card-confirm")
    expect(confirm).to_contain_text("and later calls for this session?")
    expect(confirm).to_contain_text("Later “Transfer money” calls in this session run without asking")
    shots(alice, "grant confirm")
    assert bank.ledger == []  # a grant always asks first
    confirm.get_by_role("button", name="Yes, approve for this session").click()
    expect(card).to_have_attribute("data-state", "answered")
    assert bank.ledger == ["500->savings"]
    expect(alice.locator("#audit")).to_contain_text("Granted")

    headers = {"Authorization": "Bearer dave-token"}
    url = f"{bank.url}/grants/v1/agents/bank/sessions/{paused['session_id']}"
    later = httpx.post(f"{url}/messages", json={"message": "pay 20 to x"}, headers=headers).json()
    assert later["finish_reason"] == "stop" and bank.ledger == ["500->savings", "20->x"]  # by alice's grant
    [grant] = httpx.get(f"{url}/grants", headers=headers).json()["grants"]
    assert (grant["principal"], grant["bounds"], grant["used"]) == ("alice", None, 1)
    alice.reload()
    expect(alice.locator("#audit")).to_contain_text("Approved by alice's grant")
    shots(alice, "granted")


# -- issue 42, item 3: every card's state follows from the session's events ---------------------------


def test_a_resolved_quorum_says_so_on_every_card(bank: Bank, browser, shots: Shots):
    paused = bank.ask("quorum", "pay 500 to savings")
    alice, bob = browser.new_page(), browser.new_page()
    open_session(alice, bank, "quorum", "alice", paused["session_id"])
    open_session(bob, bank, "quorum", "bob", paused["session_id"])
    expect(alice.locator(".card .card-field").first).to_have_text("Amount500.00 (no currency given)")
    alice.locator(".card").get_by_role("button", name="Approve", exact=True).click()
    expect(alice.locator(".card .approval-progress")).to_have_text("1 of 2 approvals · approved by alice")
    bob.locator(".card").get_by_role("button", name="Approve", exact=True).click()
    for page in (alice, bob):
        card = page.locator(".card")
        expect(card).not_to_have_attribute("data-state", "open")
        expect(card.locator(".approval-progress")).to_have_text("2 of 2 approvals · approved by alice, bob")
        expect(card).not_to_contain_text("Waiting for")
        expect(card.locator(".card-status")).not_to_contain_text("Your approval is counted")
    shots(alice, "alice after bob")
    alice.reload()  # the same from the history alone
    expect(alice.locator(".card .approval-progress")).to_have_text("2 of 2 approvals · approved by alice, bob")
    expect(alice.locator(".card")).not_to_contain_text("Waiting for")


def test_the_requester_is_not_told_the_card_waits_for_them(bank: Bank, browser, shots: Shots):
    paused = bank.ask("grants", "pay 500 to savings")
    dave = browser.new_page()
    open_session(dave, bank, "grants", "dave", paused["session_id"])
    card = dave.locator(".card")
    expect(card.locator(".badge").first).to_have_text("Waiting for treasury")
    expect(card).not_to_contain_text("Waiting for you")
    shots(dave, "requester")
    # nor does his inbox (found by a probe: "1 waiting for you", though he may neither approve nor deny)
    dave.goto(f"{bank.url}/grants/console/#token=dave-token&agent=bank")
    expect(dave.locator("#feed-state")).to_have_text("live")
    expect(dave.locator("#inbox .session-item")).to_have_count(1)
    expect(dave.locator("#inbox-count")).to_have_text("0")
    expect(dave.locator("#inbox .pending-pill")).to_have_count(0)


def test_a_role_that_may_only_deny_is_not_named_as_the_one_that_approves(bank: Bank, browser):
    """Found by a probe: dave, whose role (auditor) may only deny, was told "Approving this call
    takes auditor or treasury, which you do not hold" — the roles deciding the call, not those
    approving it; the REST view's words named treasury alone."""
    paused = bank.ask("audited", "pay 500 to savings")
    [pause] = paused["interrupts"]
    assert (pause["view"]["approval"]["roles"], pause["view"]["approval"]["approving_roles"]) == (
        ["auditor", "treasury"],
        ["treasury"],
    )
    dave = browser.new_page()
    open_session(dave, bank, "audited", "dave", paused["session_id"])
    card = dave.locator(".card")
    expect(card.locator(".badge").first).to_have_text("Waiting for treasury")
    expect(card.locator(".card-effect")).to_have_text(
        "Approving this call takes treasury, which you do not hold (you may still deny)."
    )
    expect(card.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    dave.goto(f"{bank.url}/audited/console/#token=dave-token&agent=bank")
    expect(dave.locator("#feed-state")).to_have_text("live")
    expect(dave.locator("#inbox-count")).to_have_text("1")  # his to deny: it waits for him too


def test_the_requester_without_the_role_is_told_the_role_not_separation_of_duties(bank: Bank, browser):
    """No separation of duties here: dave may not approve for want of the role, and the card says
    that (found by a probe: "You asked for this call", as if separation of duties applied)."""
    paused = bank.ask("quorum", "pay 500 to savings")
    dave = browser.new_page()
    open_session(dave, bank, "quorum", "dave", paused["session_id"])
    own = dave.locator(".card")
    expect(own.locator(".card-effect")).to_have_text("Approving this call takes treasury, which you do not hold.")
    expect(own.get_by_role("button", name="Approve", exact=True)).to_have_count(0)


# -- found by a probe: a quorum's counted approval and its cancel, in the lists ------------------------


def approve_as(bank: Bank, paused: dict[str, Any], who: str) -> None:
    """``who`` approves the session's pause from another client."""
    [pause] = paused["interrupts"]
    url = f"{bank.url}/quorum/v1/agents/bank/sessions/{paused['session_id']}/interrupts/{pause['ref']}/approve"
    reply = httpx.post(url, json={"pause_id": pause["pause_id"]}, headers={"Authorization": f"Bearer {who}-token"})
    assert reply.status_code == 200, reply.text


def test_the_inbox_does_not_count_a_quorum_pause_your_approval_is_counted_in(bank: Bank, browser, shots: Shots):
    paused = bank.ask("quorum", "pay 500 to savings")
    alice = browser.new_page()
    alice.goto(f"{bank.url}/quorum/console/#token=alice-token&agent=bank")
    expect(alice.locator("#feed-state")).to_have_text("live")
    item = alice.locator("#inbox .session-item")
    expect(alice.locator("#inbox-count")).to_have_text("1")
    expect(item.locator(".pending-pill")).to_have_text("1")

    approve_as(bank, paused, "alice")  # counted: it waits for bob or carol now, not for alice
    for shown in ("live", "after a reload"):
        expect(alice.locator("#inbox-count")).to_have_text("0")
        expect(item).to_have_attribute("data-counted", "true")
        expect(item.locator(".tag-counted")).to_have_text("Your approval is counted")
        expect(item.locator(".pending-pill")).to_have_count(0)
        shots(alice, f"inbox {shown}")
        if shown == "live":
            alice.reload()

    bob = browser.new_page()  # still waiting for bob
    bob.goto(f"{bank.url}/quorum/console/#token=bob-token&agent=bank")
    expect(bob.locator("#inbox-count")).to_have_text("1")
    expect(bob.locator("#inbox .session-item")).not_to_have_attribute("data-counted", "true")


def test_a_cancel_under_a_quorum_says_how_many_had_approved(bank: Bank, browser, shots: Shots):
    paused = bank.ask("quorum", "pay 500 to savings")
    approve_as(bank, paused, "alice")
    dave = browser.new_page()
    open_session(dave, bank, "quorum", "dave", paused["session_id"])
    dave.locator("#cancel-open").click()
    dave.locator("#cancel-reason").fill("not this month")
    dave.locator("#cancel-submit").click()
    card = dave.locator(".card")
    expect(card).to_have_attribute("data-state", "cancelled")
    entry = dave.locator("#audit .audit-entry[data-decision=cancel]")
    expect(entry.locator(".badge")).to_have_text("Cancelled (1 of 2 approvals in)")
    expect(card.locator(".card-status")).to_contain_text("Cancelled (1 of 2 approvals in) by dave")
    shots(dave, "cancelled")
    url = f"{bank.url}/quorum/v1/agents/bank/sessions/{paused['session_id']}/audit"
    entries = httpx.get(url, headers={"Authorization": "Bearer dave-token"}).json()["entries"]
    [recorded] = [e for e in entries if e["decision"] == "cancel"]
    assert (recorded["approvals"], recorded["required"]) == (1, 2)
