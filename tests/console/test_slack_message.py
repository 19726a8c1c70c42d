"""The Slack message docs/operating.md shows (docs/images/slack-message.png, and the same card
once approved, slack-message-approved.png): the Block Kit JSON our Slack app posts for a
transfer's pause, received by a stand-in for Slack from a real server (``reach_harness``), and
the update Approve in Slack posts back — rendered by ``blockkit`` and read in a real Chromium.
The test asserts what a person must see there; each picture lands in ``artifacts/console/`` as
``docs-slack-*.png``, and with ``PAUSEPOINT_UPDATE_DOCS_IMAGES=1`` replaces the docs' copy."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.console.blockkit import mrkdwn, render
from tests.console.conftest import ARTIFACTS
from tests.console.steps import IMAGES
from tests.server.harness import ROOT
from tests.server.reach_harness import Served, serve_reach

TITLE = "Transfer $700.00 to savings"


async def _exchange(served: Served) -> tuple[dict[str, Any], dict[str, Any]]:
    """The card posted for dave's transfer, and the card as alice's Approve in Slack left it."""
    async with httpx.AsyncClient(timeout=30) as http:
        await served.ask(http, "Transfer $700 to savings")
        [card] = await served.slack.wait("messages", 1)
        body, headers = served.slack.callback(card, "approve", user="UALICE")
        pressed = await http.post(f"{served.base}/v1/slack/actions", content=body, headers=headers)
        assert pressed.json() == {"ok": True}, pressed.text
        [update] = await served.slack.wait("responses", 1)
    return card, update


@pytest.fixture(scope="module")
def messages(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    # module-scoped, so it runs before the browser's event loop starts
    with serve_reach(tmp_path_factory.mktemp("slack")) as served:
        return asyncio.run(_exchange(served))


def show(browser: Any, message: dict[str, Any]) -> Page:
    page = browser.new_page()
    page.set_viewport_size({"width": 700, "height": 600})
    page.set_content(render(message, at=datetime.now(UTC)))
    return page


def keep(page: Page, name: str) -> Path:
    """The message as ``docs-<name>.png``; copied to docs/images when asked to."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"docs-{name}.png"
    page.get_by_test_id("message").screenshot(path=str(path))
    if os.environ.get("PAUSEPOINT_UPDATE_DOCS_IMAGES") == "1":
        shutil.copyfile(path, IMAGES / f"{name}.png")
    return path


def test_a_transfers_slack_card_shows_what_a_person_decides_on(messages, browser):
    card, _ = messages
    page = show(browser, card)
    shown = page.get_by_test_id("message")
    expect(page.get_by_role("heading")).to_have_text(TITLE)  # the title, the amount with its currency
    expect(shown).to_contain_text("Money leaves the company.")
    expect(shown.locator(".fields")).to_have_text(re.compile(r"Amount\s*700\.00\s*To account\s*savings"))
    expect(shown.locator(".context").first).to_contain_text("High risk · treasury · asked by dave · Needs approval")
    expect(shown.locator(".context svg[data-emoji=red_circle]")).to_be_visible()
    expiry = shown.locator(".context").nth(1)
    expect(expiry).to_contain_text(re.compile(r"Expires (Today|Tomorrow) at \d{1,2}:\d\d [AP]M"))
    expect(expiry).to_contain_text("It is denied automatically, and the agent is told nobody answered in time.")
    approve = page.get_by_role("button", name="Approve", exact=True)
    deny = page.get_by_role("button", name="Deny", exact=True)
    expect(approve).to_have_class("primary")
    expect(deny).to_have_class("danger")
    expect(page.get_by_role("button", name="Open in console")).to_have_attribute(
        "data-url", re.compile(r"^https://pp\.example\.com/console/#link=")
    )
    keep(page, "slack-message")


def test_the_card_approved_in_slack_says_who_and_has_no_buttons(messages, browser):
    _, update = messages
    assert update["replace_original"] is True  # Slack replaces the card in place, for everyone
    page = show(browser, update)
    shown = page.get_by_test_id("message")
    expect(page.get_by_role("heading")).to_have_text(TITLE)
    outcome = shown.locator(".section").last
    expect(outcome.locator("b")).to_have_text(
        re.compile(r"^Approved by alice via Slack at \d{4}-\d\d-\d\d \d\d:\d\d UTC$")
    )
    expect(outcome.locator("svg[data-emoji=white_check_mark]")).to_be_visible()
    expect(page.get_by_role("button")).to_have_count(0)
    expect(shown).not_to_contain_text("Waiting for")
    keep(page, "slack-message-approved")


def test_the_renderer_reads_mrkdwn_as_slack_does():
    noon = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert (
        mrkdwn("*bold* _it_ ~gone~ `x*y*` a*b*c", noon) == "<b>bold</b> <i>it</i> <s>gone</s> <code>x*y*</code> a*b*c"
    )
    assert mrkdwn("&lt;!channel&gt; &amp; <https://e.com/?a=1&b=2|*here*>", noon) == (
        "&lt;!channel&gt; &amp; <a href='https://e.com/?a=1&amp;b=2'><b>here</b></a>"
    )
    assert mrkdwn("<!date^1767268800^{date_short_pretty} at {time}|fallback>", noon) == "Today at 12:00 PM"
    assert mrkdwn("<!date^1767398400^{date_short_pretty}|x>", noon) == "Jan 3, 2026"
    assert mrkdwn(":red_circle: :nope:\nnext", noon).endswith(":nope:<br>next")
    with pytest.raises(ValueError):
        render({"blocks": [{"type": "image", "image_url": "x", "alt_text": "x"}]})


def test_the_docs_show_the_slack_message():
    operating = (ROOT / "docs" / "operating.md").read_text(encoding="utf-8")
    named = set(re.findall(r"images/(slack-[\w-]+\.png)", operating))
    assert named == {"slack-message.png", "slack-message-approved.png"}
    assert all((IMAGES / name).is_file() for name in named), named
