"""Issue 42, item 2: every sentence that says what a decision does says it in the card's own
words — its title, amount and payee ("$700 will be sent to savings") — never "The agent is told:
Approved: Yes", never a raw tool name ("pay_invoice runs now")."""

from __future__ import annotations

from playwright.sync_api import Locator, expect

from tests.console.conftest import Served, Shots
from tests.console.steps import hold, open_console, send

RAW = ("userApproval", "transfer_money", "pay_invoice", "run_shell", "chooseAccount", "Approved: Yes")
# The console's own sentences about what a decision does (the view's title, summary and fields
# are the tool's words, from the server).
SAYS = (
    ".card-effect, .confirm-title, .confirm-text, .hold-hint, .form-effect, .approval-note, .card-status, .card-asker"
)


def sentences(card: Locator) -> str:
    return " ".join(card.locator(SAYS).all_inner_texts())


def no_raw_words(text: str) -> None:
    assert not [word for word in RAW if word in text], text


def test_an_approval_question_says_what_a_yes_moves(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served)
    send(page, "Transfer $700 to savings.")
    card = page.locator(".card")
    expect(card.locator(".card-effect")).to_have_text("If you approve: $700 will be sent to savings.")
    no_raw_words(sentences(card))
    card.get_by_role("button", name="Approve", exact=True).click()
    confirm = card.locator(".card-confirm")
    expect(confirm.locator(".confirm-text")).to_have_text("$700 will be sent to savings.")
    no_raw_words(sentences(card))
    shots(page, "confirm")
    confirm.get_by_role("button", name="Back").click()
    card.get_by_role("button", name="Deny…").click()
    expect(card.locator("form:not([hidden]) .form-effect")).to_have_text(
        "Nothing is sent: the agent is told you said no, and why."
    )


def test_a_payment_says_who_gets_how_much(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served, app="pay")
    send(page, "Pay 1250.50 EUR to ACME GmbH (DE89370400440532013000) for invoice 2024-117.")
    card = page.locator(".card")
    expect(card.locator(".card-effect")).to_have_text(
        "If you approve: €1,250.50 will be sent to ACME GmbH (IBAN DE89370400440532013000) now."
    )
    no_raw_words(sentences(card))
    card.get_by_role("button", name="Edit input").click()
    form = card.locator("form[aria-label^='Edit']")
    expect(form.locator(".form-effect")).to_have_text("“Pay €1,250.50 to ACME GmbH” runs now, with your changes.")
    form.get_by_label("Amount").fill("1300")
    form.get_by_role("button", name="Approve with this input").click()
    confirm = card.locator(".card-confirm")
    expect(confirm.locator(".confirm-text")).to_have_text(
        "€1,300.00 will be sent to ACME GmbH (IBAN DE89370400440532013000) now."
    )
    no_raw_words(sentences(card))
    shots(page, "edited")


def test_a_command_and_a_question_say_it_with_their_titles(served: Served, browser):
    page = browser.new_page()
    open_console(page, served, app="shell")
    send(page, "Run: rm -rf build/")
    card = page.locator(".card")
    expect(card.locator(".card-effect")).to_have_text("If you approve: “Run shell” runs now (Command: rm -rf build/).")
    no_raw_words(sentences(card))

    other = browser.new_page()
    open_console(other, served, app="desk", agent="treasury")
    send(other, "which account pays ACME GmbH?")
    question = other.locator(".card")
    expect(question.locator(".card-effect")).to_have_text(
        "Answer “Which account pays ACME GmbH?”: the agent goes on with your answer."
    )
    no_raw_words(sentences(question))
    send(other, "pay 700 to savings")  # refused while the question waits: nothing raw in that either
    no_raw_words(other.locator("#composer-notice").inner_text())


def test_approving_for_the_session_says_what_else_it_approves(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served, app="desk", agent="treasury")
    send(page, "pay 700 to savings")
    card = page.locator(".card")
    no_raw_words(sentences(card))
    card.get_by_role("button", name="Approve for this session").click()
    confirm = card.locator(".card-confirm")
    expect(confirm.locator(".confirm-text")).to_have_text(
        "$700.00 will be sent to savings now. Later “Transfer money” calls in this session run without asking, "
        "until the grant ends or is revoked."
    )
    no_raw_words(sentences(card))
    shots(page, "grant")


def test_an_amount_typed_in_scientific_notation_is_confirmed_as_its_plain_number(served: Served, browser, shots: Shots):
    """Found by a probe: "1e2" in a money field dropped "… will be sent to …" from the held
    confirmation, which showed "Amount: 12.50 → 1e2", and the card then "1E+2". It is the plain
    number it means, as a number field's "1e2" is 100."""
    page = browser.new_page()
    open_console(page, served, app="pay")
    send(page, "Pay 1250.50 EUR to ACME GmbH (DE89370400440532013000) for invoice 2024-117.")
    card = page.locator(".card")
    card.get_by_role("button", name="Edit input").click()
    card.locator("form[aria-label^='Edit']").get_by_label("Amount").fill("1.3e3")
    card.get_by_role("button", name="Approve with this input").click()
    confirm = card.locator(".card-confirm")
    expect(confirm.locator(".confirm-text")).to_have_text(
        "€1,300.00 will be sent to ACME GmbH (IBAN DE89370400440532013000) now."
    )
    expect(confirm).to_contain_text("Amount: 1250.50 → 1300")
    expect(confirm).not_to_contain_text("e3")
    shots(page, "plain-amount")
    hold(page, confirm.get_by_role("button", name="Hold to approve the edited input"))
    expect(card).to_have_attribute("data-state", "answered")
    expect(card.locator(".card-status")).to_contain_text("Amount: 1250.50 → 1300")
    assert [payment["amount"] for payment in served.paid] == ["1300"]
