"""Approval links in the console (issue 42): a notification's link opens that one card — the same
card and confirmation as the console, no chat, no inbox — and decides only once the person is
signed in and confirms; a used or expired link says so and offers nothing to press.

The links come the way people get them: the server announces each pause through its webhook
(here an httpx transport that keeps what it is sent, in place of the network) with its link.
Runs where the server serves approval links (``create_app(links=ApprovalLinks(...))``).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from playwright.sync_api import Page, expect

from pausepoint import webhooks
from pausepoint.server import OwnerPolicy, create_app
from pausepoint.stores import SqliteSessionStore
from tests.console import apps
from tests.console.conftest import Shots, Tokens
from tests.console.steps import hold, keep
from tests.server.harness import TOKENS

if "links" not in inspect.signature(create_app).parameters or not hasattr(webhooks, "ApprovalLinks"):
    pytest.skip("this server does not serve approval links yet", allow_module_level=True)

from pausepoint.server import WebhookSender

SECRET = "console-link-test-secret-0123456789"


@dataclass
class Linked:
    """The treasury app served at the root (its webhook's deliveries kept in ``told``)."""

    url: str
    moved: list[str] = field(default_factory=list)
    told: list[dict[str, Any]] = field(default_factory=list)

    def ask(self, message: str) -> dict[str, Any]:
        reply = httpx.post(
            f"{self.url}/v1/agents/treasury/sessions",
            json={"message": message},
            headers={"Authorization": "Bearer alice-token"},
        )
        assert reply.status_code == 200, reply.text
        return dict(reply.json())

    def link_of(self, session_id: str, timeout: float = 15) -> str:
        """The approval link the webhook announced the session's pause with."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for body in self.told:
                if body.get("type") == "pause" and body.get("session_id") == session_id and body.get("link"):
                    return str(body["link"])
            time.sleep(0.1)
        raise AssertionError(f"no pause of {session_id} was announced with a link: {self.told}")

    def audit(self, session_id: str) -> list[dict[str, Any]]:
        url = f"{self.url}/v1/agents/treasury/sessions/{session_id}/audit"
        entries = httpx.get(url, headers={"Authorization": "Bearer alice-token"}).json()["entries"]
        return [e for e in entries if e["decision"] != "message"]


@pytest.fixture
def linked(tmp_path: Path) -> Iterator[Linked]:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    result = Linked(f"http://127.0.0.1:{port}")

    def keep(request: httpx.Request) -> httpx.Response:
        result.told.append(json.loads(request.content))
        return httpx.Response(200)

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    holder: dict[str, uvicorn.Server] = {}

    async def main() -> None:
        hook = webhooks.Webhook("ops", "https://hooks.example/pauses", secret=SECRET, events=["pause"])
        ai = apps.build(SqliteSessionStore(tmp_path / "desk.db"), result.moved, webhooks=[hook])
        app = create_app(
            ai,
            auth=Tokens(TOKENS),
            policy=OwnerPolicy({"alice", "bob"}),
            feed_interval=0.2,
            expiry_interval=0.5,
            links=webhooks.ApprovalLinks(SECRET, console_url=f"{result.url}/console"),
            webhooks=WebhookSender(ai, transport=httpx.MockTransport(keep), interval=0.2),
        )
        config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
        server = holder["server"] = uvicorn.Server(config)
        await server.serve(sockets=[sock])

    thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    thread.start()
    for _ in range(1000):
        if "server" in holder and holder["server"].started:
            break
        time.sleep(0.01)
    try:
        yield result
    finally:
        holder["server"].should_exit = True
        thread.join(10)
        sock.close()


def sign_in(page: Page, who: str) -> None:
    expect(page.locator("#signin")).to_be_visible()
    expect(page.locator("#signin-note")).to_contain_text("Opening its link decided nothing")
    page.get_by_label("Bearer token").fill(f"{who}-token")
    page.get_by_role("button", name="Sign in").click()


def test_a_link_shows_its_one_card_and_decides_only_once_confirmed(linked: Linked, browser, shots: Shots):
    paused = linked.ask("pay 700 to savings")
    link = linked.link_of(paused["session_id"])
    page = browser.new_page()
    page.goto(link)  # a fresh tab, nobody signed in: opening it decides nothing
    sign_in(page, "bob")
    card = page.locator("#link-card .card")
    expect(card.locator(".card-title")).to_have_text("Transfer $700.00 to savings")
    expect(page.locator("#link-context")).to_contain_text("asked by alice")
    expect(card.locator(".card-effect")).to_have_text("If you approve: $700.00 will be sent to savings now.")
    expect(page.locator("#app")).to_be_hidden()  # no chat, no inbox
    expect(page.locator("#composer")).to_be_hidden()
    assert linked.audit(paused["session_id"]) == [] and linked.moved == []
    shots(page, "link-card")
    keep(page, "link")  # the README's picture of a link's page

    card.get_by_role("button", name="Approve", exact=True).click()
    confirm = card.locator(".card-confirm")
    expect(confirm.get_by_role("button", name="Back")).to_be_focused()
    expect(confirm.locator(".confirm-text")).to_have_text("$700.00 will be sent to savings now.")
    shots(page, "link-confirm")
    assert linked.moved == []
    hold(page, confirm.get_by_role("button", name="Hold to approve"))
    expect(card).to_have_attribute("data-state", "answered")
    expect(card.locator(".card-status")).to_contain_text("Approved by bob")
    expect(page.locator("#link-message")).to_contain_text("Recorded")
    assert linked.moved == ["700->savings"]
    [entry] = [e for e in linked.audit(paused["session_id"]) if e["decision"] == "approve"]
    assert (entry["principal"], entry["via"]) == ("bob", "link")
    shots(page, "link-decided")

    again = browser.new_page()
    again.goto(link)  # the same tab's sign-in: this tab is new, so it asks again
    sign_in(again, "alice")
    expect(again.locator("#link-message")).to_contain_text("This link was used already")
    expect(again.locator("#link-card .card")).to_have_count(0)
    expect(again.get_by_role("button", name="Approve")).to_have_count(0)
    shots(again, "link-used")


def test_an_expired_link_says_so_and_offers_nothing(linked: Linked, browser, shots: Shots):
    paused = linked.ask("hold 50 for ACME GmbH")  # its pause expires after apps.HOLD_TTL
    link = linked.link_of(paused["session_id"])
    time.sleep(apps.HOLD_TTL.total_seconds() + 1)
    page = browser.new_page()
    page.goto(f"{linked.url}/console/#token=alice-token")
    expect(page.locator("#who")).to_have_text("alice")
    page.goto(link)  # a signed-in tab: the link opens there
    expect(page.locator("#link-message")).to_contain_text("This link has expired")
    expect(page.locator("#link-page").get_by_role("button")).to_have_count(0)
    shots(page, "link-expired")
