"""The web console in a real headless Chromium, against a real server on loopback.

Each test is a person's path through the console; the assertions wait (Playwright's ``expect``)
rather than sleep, and a screenshot of every step is saved in ``artifacts/console/``.
"""

from __future__ import annotations

import json

import httpx
from playwright.sync_api import Page, expect

from tests.console.conftest import Served, Shots

ALICE = {"Authorization": "Bearer alice-token"}

# Records every piece of text added to a streaming model message (to see it arrive in pieces).
WATCH_STREAM = """
window.__streamed = [];
new MutationObserver((records) => {
  for (const r of records) {
    if (r.target.closest && r.target.closest('.streaming')) {
      for (const n of r.addedNodes) if (n.nodeType === Node.TEXT_NODE) window.__streamed.push(n.textContent);
    }
  }
}).observe(document.getElementById('log'), {childList: true, subtree: true});
"""


def open_console(page: Page, served: Served, **route: str) -> None:
    page.goto(served.console(**route))
    expect(page.locator("#who")).to_have_text("alice")
    expect(page.locator("#feed-state")).to_have_text("live")


def send(page: Page, text: str) -> None:
    box = page.get_by_label("Message", exact=True)
    box.fill(text)
    box.press("Enter")


def test_approve_a_transfer_and_watch_the_answer_stream_in(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served)
    assert "token" not in page.url  # moved to sessionStorage at once
    shots(page, "signed-in")

    send(page, "Transfer $500 to savings.")
    card = page.locator(".card")
    expect(card).to_have_count(1)
    expect(card).to_contain_text("userApproval")
    expect(card.locator(".json").first).to_contain_text('"details": "Transfer $500 to savings"')
    expect(card.get_by_role("button", name="Approve")).to_be_visible()
    expect(card.get_by_role("button", name="Edit input")).to_have_count(0)  # userApproval allows no edits
    expect(card).to_be_focused()
    assert "session=" in page.url  # the new session is in the address bar: a link to this card
    shots(page, "paused")
    assert served.ledger == []

    page.evaluate(WATCH_STREAM)
    card.get_by_role("button", name="Approve").click()
    final = page.locator(".msg-model .msg-body").last
    expect(final).to_contain_text("Transferred $500 to savings.")
    expect(card).to_have_attribute("data-state", "answered")
    expect(card.locator(".card-status")).to_contain_text("Approved by alice via http at")
    pieces = page.evaluate("window.__streamed")
    assert "".join(pieces) == "Transferred $500 to savings." and len(pieces) >= 2, pieces  # streamed, not at once
    assert served.ledger == ["500->savings"]
    expect(page.locator("#inbox-count")).to_have_text("0")
    shots(page, "approved")


def paused_session(served: Served, message: str, app: str = "bank", agent: str = "bankingAgent") -> dict:
    """A session paused by another client (plain HTTP, as alice)."""
    reply = httpx.post(f"{served.url}/{app}/v1/agents/{agent}/sessions", json={"message": message}, headers=ALICE)
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_deny_with_a_reason_the_model_then_sees(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served)
    send(page, "Transfer $900 to casino.")
    card = page.locator(".card")
    expect(card).to_be_focused()
    page.keyboard.press("d")  # the card's shortcut opens the reason field
    reason = card.get_by_label("Reason for denying")
    expect(reason).to_be_focused()
    reason.fill("Not to a casino, please.")
    shots(page, "reason")
    reason.press("Enter")

    expect(card.locator(".card-status")).to_contain_text("Denied by alice via http at")
    expect(card.locator(".card-status")).to_contain_text("Not to a casino, please.")
    expect(page.locator(".msg-model .msg-body").last).to_have_text(
        "I did not transfer anything: Not to a casino, please.."
    )
    last = served.model_requests("bankingAgent")[-1].messages[-1]
    assert [p.output for p in last.tool_responses] == [{"denied": True, "reason": "Not to a casino, please."}]
    assert served.ledger == []
    expect(page.locator("#audit .audit-entry")).to_have_count(1)
    expect(page.locator("#audit")).to_contain_text("Denied")
    shots(page, "denied")


def test_two_tabs_answer_one_card_one_wins_the_other_sees_it_answered(served: Served, browser, shots: Shots):
    paused = paused_session(served, "Transfer $40 to rent.")
    route = {"agent": "bankingAgent", "session": paused["session_id"]}
    first, second, watcher = browser.new_page(), browser.new_page(), browser.new_page()
    second.route("**/v1/feed", lambda r: r.abort())  # deaf to the feed: it learns only by answering
    second.goto(served.console(**route))
    for page in (first, watcher):
        open_console(page, served, **route)
    for page in (first, second, watcher):
        expect(page.locator(".card[data-state=open]")).to_have_count(1)

    first.locator(".card").focus()
    first.keyboard.press("a")
    expect(first.locator(".card .card-status")).to_contain_text("Approved by alice via http")
    expect(first.locator(".msg-model .msg-body").last).to_have_text("Transferred $40 to rent.")
    shots(first, "winner")

    second.locator(".card").get_by_role("button", name="Approve").click()  # too late: a 409 already_resolved
    card = second.locator(".card")
    expect(card).to_have_attribute("data-state", "elsewhere")
    expect(card.locator(".badge")).to_have_text("Already answered")
    expect(card.locator(".card-status")).to_contain_text("Already answered elsewhere: Approved by alice via http")
    expect(card.get_by_role("button")).to_have_count(0)
    shots(second, "already-answered")

    expect(watcher.locator(".card")).to_have_attribute("data-state", "elsewhere")  # told live by the feed
    shots(watcher, "watcher")
    assert served.ledger == ["40->rent"]  # exactly once


def test_the_inbox_updates_live_when_another_client_pauses(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served)
    expect(page.locator("#inbox-count")).to_have_text("0")
    expect(page.locator("#inbox-empty")).to_be_visible()
    shots(page, "empty")

    paused = paused_session(served, "Transfer $7 to carol.")
    item = page.locator("#inbox .session-item")
    expect(item).to_have_count(1)
    expect(item).to_contain_text("userApproval: Transfer $7 to carol")
    expect(page.locator("#inbox-count")).to_have_text("1")
    shots(page, "arrived")

    item.get_by_role("link").click()
    expect(page.locator(".card[data-state=open]")).to_contain_text("Transfer $7 to carol")
    assert paused["session_id"] in page.url
    shots(page, "opened")

    ref = paused["interrupts"][0]["ref"]
    base = f"{served.bank}/v1/agents/bankingAgent/sessions/{paused['session_id']}"
    reply = httpx.post(f"{base}/interrupts/{ref}/approve", headers={**ALICE, "Idempotency-Key": "elsewhere"})
    assert reply.status_code == 200, reply.text
    expect(page.locator("#inbox .session-item")).to_have_count(0)
    expect(page.locator(".card")).to_have_attribute("data-state", "elsewhere")
    shots(page, "answered-elsewhere")


def test_edit_the_input_of_a_shell_command_before_it_runs(served: Served, browser, shots: Shots):
    page = browser.new_page()
    page.goto(served.console(app="shell"))
    expect(page.locator("#agent-select")).to_have_value("shellAgent")
    send(page, "Run: rm -rf build/")
    card = page.locator(".card")
    expect(card).to_contain_text("run_shell")
    expect(card).to_contain_text("paused itself")
    expect(card.locator(".card-section", has_text="Metadata")).to_contain_text(
        '"reason": "The command can modify files."'
    )
    page.keyboard.press("e")
    editor = card.get_by_label("Input (JSON)")
    expect(editor).to_be_focused()
    assert json.loads(editor.input_value()) == {"command": "rm -rf build/"}
    submit = card.get_by_role("button", name="Approve with this input")

    editor.fill('{"command": ')
    expect(card.locator(".editor-check")).to_contain_text("Not valid JSON")
    expect(submit).to_be_disabled()
    editor.fill('{"cmd": "ls"}')
    expect(card.locator(".editor-check")).to_contain_text("input.command is required")
    expect(submit).to_be_disabled()
    shots(page, "invalid")
    editor.fill('{"command": "rm -rf ./build/tmp"}')
    expect(card.locator(".editor-check")).to_have_text("Valid input.")
    shots(page, "valid")
    submit.click()

    expect(card.locator(".card-status")).to_contain_text("Edited & approved by alice via http")
    expect(page.locator(".msg-model .msg-body").last).to_contain_text("ran 'rm -rf ./build/tmp'")
    assert served.executed == [
        {
            "command": "rm -rf ./build/tmp",
            "resumed_metadata": {"tool_approved": True},
            "original_input": {"command": "rm -rf build/"},
        }
    ]
    shots(page, "ran")


def test_the_audit_trail_shows_every_answer(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served)
    send(page, "Transfer $5 to anna and $6 to ben.")
    cards = page.locator(".card")
    expect(cards).to_have_count(2)
    cards.nth(0).get_by_role("button", name="Approve").click()
    expect(cards.nth(0)).to_have_attribute("data-state", "answered")
    expect(cards.nth(1)).to_have_attribute("data-state", "open")  # partial answers: the other still waits
    cards.nth(1).get_by_role("button", name="Deny").click()
    cards.nth(1).get_by_label("Reason for denying").fill("Ben was paid already.")
    cards.nth(1).get_by_role("button", name="Deny", exact=True).click()
    expect(page.locator(".msg-model .msg-body").last).to_have_text("Transferred $5 to anna.")

    page.reload()  # the trail comes from the server, not from this page's memory
    entries = page.locator("#audit .audit-entry")
    expect(entries).to_have_count(2)
    expect(entries.nth(0)).to_contain_text("Denied by alice via http")
    expect(entries.nth(0)).to_contain_text("Ben was paid already.")
    expect(entries.nth(1)).to_contain_text("Approved by alice via http")
    entries.nth(1).locator("summary").click()
    expect(entries.nth(1).locator(".json")).to_contain_text('"approved": true')
    shots(page, "trail")
    assert served.ledger == ["5->anna"]

    page.set_viewport_size({"width": 420, "height": 900})  # a narrow window: one column
    side, main = page.locator(".sidebar").bounding_box(), page.locator("#main").bounding_box()
    assert side is not None and main is not None and side["y"] + side["height"] <= main["y"] + 1
    assert main["width"] <= 420
    for selector in ("#send", "#conv-title", ".msg-user"):  # nothing is pushed off the right edge
        box = page.locator(selector).first.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 420, selector
    page.locator("#message").scroll_into_view_if_needed()
    shots(page, "narrow")
