"""Issue 42, item 1: a high-risk decision needs a deliberate act that no stray key sequence can
produce — in every variant of the card (approve, approve for the session, edit & approve,
respond, deny). The confirmation opens on "Back"; its yes must be held down (mouse, Space or
Enter); a click, a key press or a run of keys decides nothing."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.console.conftest import Served, Shots
from tests.console.steps import audit, hold, open_console, send, session_of

KEYS = ["a", "Enter", "Tab", "Enter", " ", "Tab", "Tab", "Enter", "y", "Enter"]


def test_two_keys_no_longer_approve_money(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served)
    send(page, "Transfer $700 to savings.")
    card = page.locator(".card")
    expect(card).to_have_attribute("data-state", "open")
    card.locator(".card-title").click()
    page.keyboard.press("a")
    confirm = card.locator(".card-confirm")
    expect(confirm).to_be_visible()
    expect(confirm.get_by_role("button", name="Back")).to_be_focused()  # Enter now goes back
    page.keyboard.press("Enter")
    expect(confirm).to_be_hidden()
    for key in KEYS:  # whatever a stray hand does on a selected card
        page.keyboard.press(key)
    page.wait_for_timeout(300)
    assert served.ledger == [] and audit(served, "bank", "bankingAgent", session_of(page)) == []
    expect(card).to_have_attribute("data-state", "open")
    page.keyboard.press("Escape")  # whatever step the keys opened closes

    card.get_by_role("button", name="Approve", exact=True).click()
    yes = confirm.get_by_role("button", name="Hold to approve")
    expect(confirm.get_by_role("button", name="Back")).to_be_focused()
    yes.focus()
    page.keyboard.press("Enter")  # a press is not a hold
    page.keyboard.press(" ")
    yes.click()  # nor is a click
    expect(confirm.locator(".hold-hint")).to_have_attribute("data-nudge", "true")
    expect(confirm).to_be_visible()
    assert served.ledger == [] and audit(served, "bank", "bankingAgent", session_of(page)) == []
    shots(page, "held-confirmation")

    # A hold ends when its key comes up elsewhere, another key goes down, or the button loses
    # focus: Enter down, Tab, Enter up (a run of keys, found by a probe) decides nothing.
    for run in (["Tab"], ["Shift"], []):
        yes.focus()
        page.keyboard.down("Enter")
        for key in run:
            page.keyboard.press(key)
        if not run:
            page.evaluate("document.activeElement.blur()")
        page.keyboard.up("Enter")
        page.wait_for_timeout(1200)  # past the hold's 900 ms
        expect(confirm).to_be_visible()
        assert served.ledger == [] and audit(served, "bank", "bankingAgent", session_of(page)) == []
    yes.focus()

    page.keyboard.down("Enter")  # held: the deliberate act, from the keyboard
    page.wait_for_timeout(1400)
    page.keyboard.up("Enter")
    expect(card).to_have_attribute("data-state", "answered")
    expect(page.locator(".msg-model .msg-body").last).to_have_text("Transferred $700 to savings.")
    assert served.ledger == ["700->savings"]


def _transfer(page: Page, served: Served):
    open_console(page, served, app="desk", agent="treasury")
    send(page, "pay 700 to savings")
    return page.locator(".card")


def _payment(page: Page, served: Served):
    open_console(page, served, app="pay")
    send(page, "Pay 1250.50 EUR to ACME GmbH (DE89370400440532013000) for invoice 2024-117.")
    return page.locator(".card")


def _question(page: Page, served: Served):
    open_console(page, served, app="desk", agent="treasury")
    send(page, "which account pays ACME GmbH?")
    return page.locator(".card")


def _approve_for_session(page: Page, served: Served):
    card = _transfer(page, served)
    card.get_by_role("button", name="Approve for this session").click()
    return card, "Hold to approve for this session"


def _edit_and_approve(page: Page, served: Served):
    card = _payment(page, served)
    card.get_by_role("button", name="Edit input").click()
    card.get_by_label("Reference").fill("invoice 2024-118")
    card.get_by_role("button", name="Approve with this input").click()
    return card, "Hold to approve the edited input"


def _respond(page: Page, served: Served):
    card = _question(page, served)
    card.get_by_role("button", name="Respond").click()
    card.get_by_label("Account", exact=True).select_option("reserve")
    card.get_by_role("button", name="Send answer").click()
    return card, "Hold to send this answer"


def _deny(page: Page, served: Served):
    card = _payment(page, served)
    card.get_by_role("button", name="Deny…").click()
    card.get_by_label("Reason for denying").fill("Paid by hand already")
    card.get_by_role("button", name="Deny", exact=True).click()
    return card, "Hold to deny"


def _approve(page: Page, served: Served):
    card = _payment(page, served)
    card.get_by_role("button", name="Approve", exact=True).click()
    return card, "Hold to approve"


@pytest.mark.parametrize(
    "variant", [_approve, _approve_for_session, _edit_and_approve, _respond, _deny], ids=lambda f: f.__name__[1:]
)
def test_every_variant_of_a_high_risk_card_asks_for_a_held_confirmation(variant, served: Served, browser, shots):
    page = browser.new_page()
    card, yes_name = variant(page, served)
    confirm = card.locator(".card-confirm")
    expect(confirm).to_be_visible()
    back = confirm.get_by_role("button", name="Back")
    expect(back).to_be_focused()
    yes = confirm.get_by_role("button", name=yes_name)
    # Tab and Shift+Tab move between Back and the yes, and stay in the step (found by a probe:
    # Tab from Back left it open with focus on the card's details)
    for key, focused in (("Tab", yes), ("Tab", back), ("Shift+Tab", yes), ("Shift+Tab", back)):
        page.keyboard.press(key)
        expect(focused).to_be_focused()
    yes.click()  # a click decides nothing
    expect(yes).to_be_focused()
    page.keyboard.press("Enter")  # nor does a key press on it
    page.wait_for_timeout(300)
    expect(card).to_have_attribute("data-state", "open")
    expect(confirm).to_be_visible()
    assert served.moved == [] and served.paid == []
    shots(page, "asked")
    hold(page, yes)
    expect(card).not_to_have_attribute("data-state", "open")
    expect(card).not_to_have_attribute("data-state", "expiring")


def test_normal_risk_confirmations_open_on_back_too(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served, app="shell")
    send(page, "Run: rm -rf build/")
    card = page.locator(".card").last
    card.click()
    page.keyboard.press("a")
    confirm = card.locator(".card-confirm")
    expect(confirm.get_by_role("button", name="Back")).to_be_focused()
    page.keyboard.press("Enter")
    expect(confirm).to_be_hidden()
    assert served.executed == []
    page.keyboard.press("a")
    confirm.get_by_role("button", name="Yes, approve").click()  # normal risk: a click on yes is enough
    expect(card).to_have_attribute("data-state", "answered")
    assert len(served.executed) == 1
