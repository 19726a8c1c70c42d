"""Issue 42, item 7: what approval inboxes people know do — the inbox filtered by state (waiting,
decided, expired, failed), an item dismissed (hidden for this person, still waiting) and brought
back, and a comment saved with a decision and shown in the audit trail."""

from __future__ import annotations

import re
import time

import httpx
from playwright.sync_api import expect

from tests.console.apps import HOLD_TTL
from tests.console.conftest import Served, Shots
from tests.console.steps import ALICE, ANSWERS, approve, audit, open_console, paused_session


def _decide(served: Served, session: dict, action: str, body: dict) -> None:
    [pause] = session["interrupts"]
    url = f"{served.url}/desk/v1/agents/treasury/sessions/{session['session_id']}/interrupts/{pause['ref']}/{action}"
    reply = httpx.post(url, json={**body, "pause_id": pause["pause_id"]}, headers=ALICE)
    assert reply.status_code == 200, reply.text


def test_the_inbox_filters_by_state(served: Served, browser, shots: Shots):
    waiting = paused_session(served, "pay 700 to savings", app="desk", agent="treasury")
    decided = paused_session(served, "pay 300 to rent", app="desk", agent="treasury")
    _decide(served, decided, "approve", {})
    paused_session(served, "hold 50 for ACME GmbH", app="desk", agent="treasury")
    reply = httpx.post(f"{served.url}/desk/v1/agents/treasury/sessions", json={"message": "please fail"}, headers=ALICE)
    assert reply.status_code == 200 and reply.json()["finish_reason"] == "failed", reply.text
    time.sleep(HOLD_TTL.total_seconds() + 1.5)  # the hold expires (the server's sweep settles it)

    page = browser.new_page()
    open_console(page, served, app="desk", agent="treasury")
    inbox = page.locator("#inbox .session-item")
    filters = page.get_by_role("group", name="Show")
    expect(filters.get_by_role("button", name=re.compile("^Waiting"))).to_have_attribute("aria-pressed", "true")
    expect(inbox.locator(".session-title")).to_have_text(["Transfer $700.00 to savings"])
    assert waiting["session_id"][:6] in inbox.inner_text()

    filters.get_by_role("button", name=re.compile("^Decided")).click()
    expect(inbox.locator(".session-title")).to_have_text(["Transfer $300.00 to rent"])
    expect(inbox.first).to_contain_text("Approved by alice")
    shots(page, "decided")

    filters.get_by_role("button", name=re.compile("^Expired")).click()
    expect(inbox.locator(".session-title")).to_have_text(["Hold €50.00 for ACME GmbH"])
    expect(inbox.first).to_contain_text("nobody answered in time")

    filters.get_by_role("button", name=re.compile("^Failed")).click()
    expect(inbox).to_have_count(1)
    expect(inbox.first).to_contain_text("The agent's turn failed")
    shots(page, "failed")

    filters.get_by_role("button", name=re.compile("^Waiting")).click()
    expect(inbox).to_have_count(1)


def test_dismiss_hides_an_item_for_this_person_and_it_can_come_back(served: Served, browser, shots: Shots):
    paused_session(served, "pay 700 to savings", app="desk", agent="treasury")
    other = paused_session(served, "pay 20 to lunch", app="desk", agent="treasury")
    page = browser.new_page()
    open_console(page, served, app="desk", agent="treasury")
    inbox = page.locator("#inbox .session-item")
    expect(inbox).to_have_count(2)
    item = inbox.filter(has_text="lunch")
    item.get_by_role("button", name=re.compile("^Dismiss")).click()
    expect(inbox).to_have_count(1)
    expect(page.locator("#inbox-count")).to_have_text("1")
    filters = page.get_by_role("group", name="Show")
    dismissed = filters.get_by_role("button", name=re.compile("^Dismissed"))
    expect(dismissed).to_contain_text("1")
    shots(page, "dismissed")
    page.reload()  # remembered
    expect(page.locator("#inbox .session-item")).to_have_count(1)
    dismissed.click()
    back = page.locator("#inbox .session-item")
    expect(back).to_have_count(1)
    expect(back.first).to_contain_text("still waits")
    back.first.get_by_role("button", name=re.compile("^Restore")).click()
    filters.get_by_role("button", name=re.compile("^Waiting")).click()
    expect(page.locator("#inbox .session-item")).to_have_count(2)
    assert audit(served, "desk", "treasury", other["session_id"]) == []  # dismissing decided nothing


def test_a_comment_is_saved_with_the_decision_and_shown_in_the_audit(served: Served, browser, shots: Shots):
    paused = paused_session(served, "pay 700 to savings", app="desk", agent="treasury")
    page = browser.new_page()
    open_console(page, served, app="desk", agent="treasury", session=paused["session_id"])
    card = page.locator(".card")
    card.get_by_label("Comment").fill("Checked the invoice with Bo.")
    approve(page, card)
    expect(card).to_have_attribute("data-state", "answered")
    entry = page.locator(ANSWERS).first
    expect(entry.locator(".audit-comment")).to_have_text("Comment: “Checked the invoice with Bo.”")
    expect(card.locator(".card-status")).to_contain_text("Checked the invoice with Bo.")
    [recorded] = [e for e in audit(served, "desk", "treasury", paused["session_id"]) if e["decision"] == "approve"]
    assert recorded["metadata"] == {"comment": "Checked the invoice with Bo."}
    shots(page, "comment")

    page.reload()
    expect(page.locator(ANSWERS).first.locator(".audit-comment")).to_have_text(
        "Comment: “Checked the invoice with Bo.”"
    )


def test_a_busy_inbox_shows_every_waiting_session_named_as_its_client_named_it(served: Served, browser):
    """Past a page of the listing (found by a probe: the inbox read the 50 newest and said
    "Waiting 50" while 88 waited, the oldest never shown), and each named so two can be told
    apart ("seed-118" and "seed-116" both read "seed-1")."""
    with httpx.Client(headers=ALICE) as http:
        for n in range(1, 131):
            url = f"{served.url}/bank/v1/agents/bankingAgent/sessions/seed-{n:03d}/messages"
            reply = http.post(url, json={"message": f"Transfer ${n} to rent."})
            assert reply.status_code == 200 and reply.json()["interrupts"], reply.text
    page = browser.new_page()
    open_console(page, served, app="bank", agent="bankingAgent")
    expect(page.locator("#inbox-count")).to_have_text("130", timeout=30_000)
    expect(page.locator("#inbox .session-item")).to_have_count(130)
    text = page.locator("#inbox").inner_text()
    assert "session seed-001" in text and "session seed-130" in text
