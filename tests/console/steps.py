"""What a person does in the console, step by step, shared by the browser tests."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Locator, Page, expect

from tests.console.conftest import ARTIFACTS, Served
from tests.server.harness import ROOT

ALICE = {"Authorization": "Bearer alice-token"}
CLOCK = r"\d\d:\d\d:\d\d"
ANSWERS = "#audit .audit-entry:not(.audit-message)"  # the trail's answers (user messages are entries too)
#: how long a held confirmation is held down in the tests (the console asks for less)
HOLD_MS = 1400


def open_console(page: Page, served: Served, who: str = "alice", **route: str) -> None:
    page.goto(served.console(token=f"{who}-token", **route))
    expect(page.locator("#who")).to_have_text(who)
    expect(page.locator("#feed-state")).to_have_text("live")


def send(page: Page, text: str) -> None:
    box = page.get_by_label("Message", exact=True)
    box.fill(text)
    box.press("Enter")


def paused_session(
    served: Served, message: str, app: str = "bank", agent: str = "bankingAgent", token: str = "alice-token"
) -> dict[str, Any]:
    """A session paused by another client (plain HTTP)."""
    reply = httpx.post(
        f"{served.url}/{app}/v1/agents/{agent}/sessions",
        json={"message": message},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def audit(served: Served, app: str, agent: str, session_id: str) -> list[dict[str, Any]]:
    url = f"{served.url}/{app}/v1/agents/{agent}/sessions/{session_id}/audit"
    return [e for e in httpx.get(url, headers=ALICE).json()["entries"] if e["decision"] != "message"]


def session_of(page: Page) -> str:
    found = re.search(r"session=([0-9a-f]+)", page.url)
    assert found, page.url
    return found[1]


def hold(page: Page, button: Locator, ms: int = HOLD_MS) -> None:
    """Press and hold ``button`` with the mouse, then let go."""
    button.scroll_into_view_if_needed()
    box = button.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.wait_for_timeout(ms)
    page.mouse.up()


def confirm(page: Page, card: Locator, verb: str) -> None:
    """Confirm the decision the card asks about, as the card asks for it: hold "Hold to <verb>"
    down, or click "Yes, <verb>" (a console that asks neither has decided already)."""
    held = card.get_by_role("button", name=f"Hold to {verb}", exact=True)
    yes = card.get_by_role("button", name=f"Yes, {verb}", exact=True)
    try:
        expect(held.or_(yes)).to_be_visible(timeout=3000)
    except AssertionError:
        return
    if held.is_visible():
        hold(page, held)
    else:
        yes.click()


def approve(page: Page, card: Locator) -> None:
    """Approve the card's pause, confirmed as the card asks."""
    card.get_by_role("button", name="Approve", exact=True).click()
    confirm(page, card, "approve")


IMAGES = ROOT / "docs" / "images"


def keep(page: Page, name: str) -> Path:
    """Save the screen as ``docs-<name>.png``; copy it to docs/images when asked to."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"docs-{name}.png"
    page.screenshot(path=str(path))
    if os.environ.get("PAUSEPOINT_UPDATE_DOCS_IMAGES") == "1":
        shutil.copyfile(path, IMAGES / f"console-{name}.png")
    return path


class Bank:
    """An app of the ``bank`` agent served at ``url`` under mounts named per case; ``ledger``
    sees what its tools did."""

    def __init__(self, url: str, ledger: list[str]) -> None:
        self.url = url
        self.ledger = ledger

    def ask(self, app: str, text: str) -> dict[str, Any]:
        """dave asks for something over HTTP (his own client)."""
        reply = httpx.post(
            f"{self.url}/{app}/v1/agents/bank/sessions",
            json={"message": text},
            headers={"Authorization": "Bearer dave-token"},
        )
        assert reply.status_code == 200, reply.text
        return dict(reply.json())

    def session(self, app: str, session_id: str) -> str:
        return f"{self.url}/{app}/v1/agents/bank/sessions/{session_id}"


def open_session(page: Page, bank: Bank, app: str, who: str, session_id: str) -> None:
    page.goto(f"{bank.url}/{app}/console/#token={who}-token&agent=bank&session={session_id}")
    expect(page.locator("#who")).to_have_text(who)
    expect(page.locator("#feed-state")).to_have_text("live")
