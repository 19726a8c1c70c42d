"""The screenshots the README shows (docs/images/console-*.png), taken from the real console on a
real server: a payment's card, a high-risk confirmation, and the audit trail with a comment (an
approval link's page is taken by test_console_link). Each lands in ``artifacts/console/`` as
``docs-<name>.png``; with ``PAUSEPOINT_UPDATE_DOCS_IMAGES=1`` it also replaces the README's copy."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.console.conftest import Served
from tests.console.steps import IMAGES, hold, keep, open_console, send
from tests.server.harness import ROOT


def test_the_readme_shows_every_console_screen_it_names():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"docs/images/(console-[\w-]+\.png)", readme))
    assert {"console-card.png", "console-confirm.png", "console-link.png", "console-audit.png"} <= named
    assert all((IMAGES / name).is_file() for name in named), named


def test_the_screens_the_readme_shows(served: Served, browser):
    page = browser.new_page()
    open_console(page, served, app="pay")
    send(page, "Pay 1250.50 EUR to ACME GmbH (DE89370400440532013000) for invoice 2024-117.")
    card = page.locator(".card")
    expect(card.locator(".card-effect")).to_contain_text("€1,250.50 will be sent to ACME GmbH")
    card.locator(".card-title").scroll_into_view_if_needed()
    keep(page, "card")

    bank = browser.new_page()
    open_console(bank, served)
    send(bank, "Transfer $700 to savings.")
    transfer = bank.locator(".card")
    transfer.get_by_label("Comment").fill("Rent for March, as agreed.")
    transfer.get_by_role("button", name="Approve", exact=True).click()
    expect(transfer.locator(".confirm-text")).to_have_text("$700 will be sent to savings.")
    transfer.locator(".card-confirm").scroll_into_view_if_needed()
    keep(bank, "confirm")

    hold(bank, transfer.get_by_role("button", name="Hold to approve"))
    expect(bank.locator(".msg-model .msg-body").last).to_have_text("Transferred $700 to savings.")
    send(bank, "Transfer $40 to rent.")
    other = bank.locator(".card").last
    other.get_by_role("button", name="Deny…").click()
    other.get_by_label("Reason for denying").fill("Rent is paid already")
    other.get_by_role("button", name="Deny", exact=True).click()
    hold(bank, other.get_by_role("button", name="Hold to deny"))
    expect(bank.locator(".msg-model .msg-body").last).to_have_text("I did not transfer anything: Rent is paid already.")
    bank.reload()
    expect(bank.locator(".card[data-state=answered]")).to_have_count(2)
    expect(bank.locator("#audit .audit-comment")).to_have_text("Comment: “Rent for March, as agreed.”")
    bank.locator("#audit .audit-comment").scroll_into_view_if_needed()
    keep(bank, "audit")
