"""Issue 42, item 3: screens that went stale after a decision. A card's state — open, counted,
answered, cancelled, expired — and the lists' counts follow from the session's events, worked
out in one place, whichever way the news came (this page's answer, the feed, a reload)."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.console.conftest import Served, Shots
from tests.console.steps import approve, open_console, send


def test_a_cancelled_card_says_cancelled_and_nothing_waits_on_it(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served)
    send(page, "Transfer $5 to anna and $6 to ben.")
    cards = page.locator(".card")
    expect(cards).to_have_count(2)
    approve(page, cards.nth(0))
    waiting = page.locator(".waiting-note")
    expect(waiting).to_contain_text("goes on once the other pause is answered")
    recent = page.locator("#recent .session-item[data-key*='bankingAgent']")
    expect(recent.locator(".pending-pill")).to_have_text("1")

    page.get_by_role("button", name="Cancel open pauses").click()
    page.locator("#cancel-form").get_by_role("button", name="Cancel it").click()
    other = cards.nth(1)
    expect(other).to_have_attribute("data-state", "cancelled")
    expect(other.locator(".badge").first).to_have_text("Cancelled")
    expect(other).not_to_contain_text("Needs an answer")
    expect(other.locator(".card-approval")).to_have_count(0)
    expect(page.locator(".waiting-note")).to_have_count(0)  # nothing waits on the cancelled card
    expect(recent.locator(".pending-pill")).to_have_count(0)  # the Recent list counts nothing open
    expect(page.locator("#inbox-count")).to_have_text("0")
    shots(page, "cancelled")

    page.reload()
    expect(page.locator(".card").nth(1)).to_have_attribute("data-state", "cancelled")
    expect(page.locator(".card").nth(1)).not_to_contain_text("Needs an answer")


def test_an_answered_card_keeps_no_needs_an_answer_box(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served)
    send(page, "Transfer $700 to savings.")
    card = page.locator(".card")
    approve(page, card)
    expect(card).to_have_attribute("data-state", "answered")
    expect(card).not_to_contain_text("Needs an answer")
    expect(card).not_to_contain_text("Waiting for")
    shots(page, "answered")
