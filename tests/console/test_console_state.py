"""Issue 42, item 3: screens that went stale after a decision. A card's state — open, counted,
answered, cancelled, expired — and the lists' counts follow from the session's events, worked
out in one place, whichever way the news came (this page's answer, the feed, a reload)."""

from __future__ import annotations

from typing import Any

import httpx
from playwright.sync_api import expect

from tests.console.conftest import Served, Shots
from tests.console.steps import ALICE, approve, hold, open_console, send, session_of


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


def test_news_read_while_a_confirmation_opens_leaves_the_confirmation_open(served: Served, browser):
    """The session moved on elsewhere, and the page read it again while the person opened a
    confirmation (found as a flaky test: the card was made again under the held button). The
    news shows on the cards; the confirmation stays open, and holding it decides."""
    page = browser.new_page()
    open_console(page, served)
    send(page, "Transfer $5 to anna and $6 to ben.")
    cards = page.locator(".card")
    expect(cards).to_have_count(2)
    held: list[Any] = []

    def wait_here(route: Any) -> None:  # the page's next read of the history waits here
        if len(held) < 1:
            held.append(route)
        else:
            route.continue_()

    page.route("**/history", wait_here)

    session = session_of(page)
    base = f"{served.bank}/v1/agents/bankingAgent/sessions/{session}"
    ben = httpx.get(base, headers=ALICE).json()["interrupts"][1]["ref"]
    reply = httpx.post(f"{base}/interrupts/{ben}/approve", headers={**ALICE, "Idempotency-Key": "elsewhere"})
    assert reply.status_code == 200, reply.text
    for _ in range(100):  # the feed told the page, which reads the session again
        if held:
            break
        page.wait_for_timeout(100)
    assert held, "the page did not read the session again"

    anna = cards.nth(0)
    anna.get_by_role("button", name="Approve", exact=True).click()
    confirmation = anna.locator(".card-confirm")
    expect(confirmation).to_be_visible()
    held[0].continue_()
    expect(cards.nth(1)).to_have_attribute("data-state", "elsewhere")  # the news, shown
    expect(confirmation).to_be_visible()
    hold(page, anna.get_by_role("button", name="Hold to approve"))
    expect(anna).to_have_attribute("data-state", "answered")
    assert sorted(served.ledger) == ["5->anna", "6->ben"]
