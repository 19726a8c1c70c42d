"""Issue 42, item 6: what a decider needs to see — who asked, on every card; the currency of
every amount; the person behind a grant's decisions; the format an IBAN must have; inbox items
with the same title told apart; one obvious way to say yes."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.console.conftest import Served, Shots
from tests.console.steps import ANSWERS, CLOCK, approve, confirm, open_console, paused_session, send

PAYMENT = "Pay 1250.50 EUR to ACME GmbH (DE89370400440532013000) for invoice 2024-117."


def test_every_card_says_who_asked(served: Served, browser, shots: Shots):
    paused = paused_session(served, "Transfer $9 to zoe.")
    page = browser.new_page()
    open_console(page, served, who="desk", agent="bankingAgent", session=paused["session_id"])
    expect(page.locator(".card .card-asker")).to_have_text(re.compile(rf"^Asked by alice at {CLOCK}$"))
    pay = browser.new_page()
    open_console(pay, served, app="pay")
    send(pay, PAYMENT)
    card = pay.locator(".card")
    expect(card.locator(".card-asker")).to_have_text(re.compile(rf"^Asked by you \(alice\) at {CLOCK}$"))
    approve(pay, card)
    expect(card).to_have_attribute("data-state", "answered")
    pay.reload()  # a card rebuilt from the history says it too
    expect(pay.locator(".card .card-asker")).to_have_text(re.compile(rf"^Asked by you \(alice\) at {CLOCK}$"))
    shots(pay, "asker")


def test_every_amount_carries_its_currency_or_says_it_has_none(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served, app="desk", agent="treasury")
    send(page, "pay 9800 to savings")
    card = page.locator(".card")
    expect(card.locator(".card-title")).to_have_text("Transfer $9,800.00 to savings")
    expect(card.locator(".card-field")).to_have_text(["Amount$9,800.00", "To accountsavings"])
    shots(page, "currency")


def test_a_grants_decisions_name_the_person_who_granted(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served, app="desk", agent="treasury")
    send(page, "pay 700 to savings")
    card = page.locator(".card")
    card.get_by_role("button", name="Approve for this session").click()
    confirm(page, card, "approve for this session")
    expect(card).to_have_attribute("data-state", "answered")
    send(page, "pay 20 to lunch")  # runs on alice's grant: no card
    expect(page.locator(".msg-model .msg-body").last).to_have_text("transfer_money: sent 20 to lunch")
    note = page.locator(".activity-approved").last
    expect(note).to_have_text(re.compile(rf"^Approved by alice's grant \(given at {CLOCK}\)$"))
    entry = page.locator(ANSWERS).first
    expect(entry.locator(".badge")).to_have_text("Approved by alice's grant")
    expect(entry.locator(".audit-title")).to_have_text("Transfer $20.00 to lunch")
    shots(page, "granted")


def test_an_iban_error_names_the_expected_format(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served, app="pay")
    send(page, PAYMENT)
    card = page.locator(".card")
    card.get_by_role("button", name="Edit input").click()
    card.get_by_label("IBAN").fill("DE89 3704 0044")
    error = card.locator("[data-field=iban] .field-error")
    expect(error).to_have_text(
        "Expected: 2 capital letters (country), 2 digits (check), then 11 to 30 capital letters or digits "
        "(account), with no spaces; for example DE89370400440532013000."
    )
    shots(page, "iban")


def test_inbox_items_with_the_same_title_are_told_apart(served: Served, browser, shots: Shots):
    first = paused_session(served, "Transfer $7 to carol.")
    second = paused_session(served, "Transfer $7 to carol.", token="bob-token")
    page = browser.new_page()
    open_console(page, served, who="desk")
    items = page.locator("#inbox .session-item")
    expect(items).to_have_count(2)
    texts = [items.nth(i).inner_text() for i in range(2)]
    assert texts[0] != texts[1], texts
    joined = " ".join(texts)
    assert first["session_id"][:6] in joined and second["session_id"][:6] in joined, texts
    assert "alice" in joined and "bob" in joined, texts
    shots(page, "twins")


def test_one_obvious_way_to_say_yes(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served)
    send(page, "Transfer $700 to savings.")
    card = page.locator(".card")
    expect(card.locator(".card-actions .btn")).to_have_text(["Approve", "Deny…"])  # no "Respond" with a yes in it
    pay = browser.new_page()
    open_console(pay, served, app="pay")
    send(pay, PAYMENT)
    expect(pay.locator(".card .card-actions .btn")).to_have_text(
        ["Approve", "Edit input…", "Deny…"]
    )  # no made-up result
    question = browser.new_page()
    open_console(question, served, app="desk", agent="treasury")
    send(question, "which account pays ACME GmbH?")
    expect(question.locator(".card .card-actions .btn")).to_have_text(["Respond…", "Deny…"])  # no yes to give
    shots(page, "approve-or-deny")
