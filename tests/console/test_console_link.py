"""Approval links in the console (issue 42): a notification's link opens that one card — the same
card and confirmation as the console, no chat, no inbox — and decides only once the person is
signed in and confirms; a used or expired link says so and offers nothing to press.

The links come the way people get them: the server announces each pause through its webhook
(here an httpx transport that keeps what it is sent, in place of the network) with its link.
Runs where the server serves approval links (``create_app(links=ApprovalLinks(...))``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from playwright.sync_api import Page, expect
from starlette.applications import Starlette
from starlette.routing import Mount

from pausepoint import Pausepoint, webhooks
from pausepoint.server import OwnerPolicy, create_app
from pausepoint.stores import SqliteSessionStore
from tests.approval_apps import build, treasury
from tests.console import apps
from tests.console.conftest import Shots, Tokens
from tests.console.steps import hold, keep
from tests.server.harness import TOKENS

if "links" not in inspect.signature(create_app).parameters or not hasattr(webhooks, "ApprovalLinks"):
    pytest.skip("this server does not serve approval links yet", allow_module_level=True)

from pausepoint.server import WebhookSender

SECRET = "console-link-test-secret-0123456789"
PEOPLE = {**TOKENS, "carol-token": "carol", "dave-token": "dave"}


@dataclass
class Linked:
    """An app served with approval links (its webhook's deliveries kept in ``told``): by default
    the treasury app at the root; ``quorum_linked`` serves two of its own."""

    url: str
    moved: list[str] = field(default_factory=list)
    told: list[dict[str, Any]] = field(default_factory=list)
    agent: str = "treasury"

    def ask(self, message: str, app: str = "", who: str = "alice") -> dict[str, Any]:
        reply = httpx.post(
            f"{self.url}{app}/v1/agents/{self.agent}/sessions",
            json={"message": message},
            headers={"Authorization": f"Bearer {who}-token"},
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

    def audit(self, session_id: str, app: str = "") -> list[dict[str, Any]]:
        url = f"{self.url}{app}/v1/agents/{self.agent}/sessions/{session_id}/audit"
        entries = httpx.get(url, headers={"Authorization": "Bearer alice-token"}).json()["entries"]
        return [e for e in entries if e["decision"] != "message"]

    def keep(self, request: httpx.Request) -> httpx.Response:
        """The webhook's transport: what it is sent is kept, in place of the network."""
        self.told.append(json.loads(request.content))
        return httpx.Response(200)


def with_links(ai: Pausepoint, result: Linked, console_url: str, policy: OwnerPolicy) -> Any:
    """``ai`` served with approval links to ``console_url``; its pauses announced to ``result``."""
    return create_app(
        ai,
        auth=Tokens(PEOPLE),
        policy=policy,
        feed_interval=0.2,
        expiry_interval=0.5,
        links=webhooks.ApprovalLinks(SECRET, console_url=console_url),
        webhooks=WebhookSender(ai, transport=httpx.MockTransport(result.keep), interval=0.2),
    )


def announcer() -> webhooks.Webhook:
    return webhooks.Webhook("ops", "https://hooks.example/pauses", secret=SECRET, events=["pause"])


@contextlib.contextmanager
def serving(result: Linked, make_app: Callable[[str], Any]) -> Iterator[Linked]:
    """Serve ``make_app(url)`` (built in the server's own loop) on a free loopback port."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    result.url = f"http://127.0.0.1:{port}"
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    holder: dict[str, uvicorn.Server] = {}

    async def main() -> None:
        config = uvicorn.Config(make_app(result.url), log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
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


@pytest.fixture
def linked(tmp_path: Path) -> Iterator[Linked]:
    result = Linked("")

    def make_app(url: str) -> Any:
        ai = apps.build(SqliteSessionStore(tmp_path / "desk.db"), result.moved, webhooks=[announcer()])
        return with_links(ai, result, f"{url}/console", OwnerPolicy({"alice", "bob"}))

    with serving(result, make_app):
        yield result


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


# -- a link's page follows its pause (found by a probe: it never changed once shown) ----------------

#: how long a transfer waits at ``/quick`` before it expires (the page's countdown runs out)
QUICK_TTL = timedelta(seconds=10)


@pytest.fixture
def quorum_linked(tmp_path: Path) -> Iterator[Linked]:
    """The bank of ``tests.approval_apps`` with approval links: two of treasury (alice, bob, carol)
    approve each transfer, at ``/quorum`` (pauses wait) and at ``/quick`` (they expire after
    ``QUICK_TTL``); dave asks."""
    result = Linked("", agent="bank")

    def make_app(url: str) -> Any:
        mounts = []
        for name, ttl in (("quorum", None), ("quick", QUICK_TTL)):
            ai = Pausepoint(webhooks=[announcer()])
            quorum = treasury(quorum={"transfer_money": 2}, ttl={"transfer_money": ttl} if ttl else None)
            build(SqliteSessionStore(tmp_path / f"{name}.db"), quorum, ledger=result.moved, app=ai)
            app = with_links(ai, result, f"{url}/{name}/console", OwnerPolicy({"alice", "bob", "carol"}))
            mounts.append(Mount(f"/{name}", app))
        return Starlette(routes=mounts)

    with serving(result, make_app):
        yield result


def approve_over_http(linked: Linked, app: str, paused: dict[str, Any], who: str) -> None:
    """``who`` approves the session's pause from another client (no link)."""
    [pause] = paused["interrupts"]
    url = f"{linked.url}{app}/v1/agents/bank/sessions/{paused['session_id']}/interrupts/{pause['ref']}/approve"
    reply = httpx.post(url, json={"pause_id": pause["pause_id"]}, headers={"Authorization": f"Bearer {who}-token"})
    assert reply.status_code == 200, reply.text


def open_link(page: Page, link: str, who: str) -> None:
    page.goto(link.replace("#link=", f"#token={who}-token&link="))
    expect(page.locator("#link-who")).to_have_text(who)


def test_a_link_page_follows_its_quorum_decided_elsewhere(quorum_linked: Linked, browser, shots: Shots):
    paused = quorum_linked.ask("pay 500 to savings", app="/quorum", who="dave")
    page = browser.new_page()
    open_link(page, quorum_linked.link_of(paused["session_id"]), "bob")
    card = page.locator("#link-card .card")
    expect(card.locator(".approval-progress")).to_have_text("0 of 2 approvals")
    expect(page.locator("#link-message")).to_contain_text("Decide on it below")

    approve_over_http(quorum_linked, "/quorum", paused, "alice")  # counted: the card moves on
    expect(card.locator(".approval-progress")).to_have_text("1 of 2 approvals · approved by alice")
    expect(card).to_have_attribute("data-state", "open")  # bob may still approve
    approve_over_http(quorum_linked, "/quorum", paused, "carol")  # the quorum is complete
    expect(card).to_have_attribute("data-state", "elsewhere")
    expect(card.locator(".approval-progress")).to_have_text("2 of 2 approvals · approved by alice, carol")
    expect(card.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    expect(card.get_by_role("button", name="Deny…")).to_have_count(0)
    expect(page.locator("#link-message")).to_contain_text("Someone answered it first")
    expect(card).not_to_contain_text("Waiting for")
    assert quorum_linked.moved == ["500->savings"]
    shots(page, "decided-elsewhere")


def test_a_link_page_says_a_counted_approval_after_a_reload(quorum_linked: Linked, browser, shots: Shots):
    paused = quorum_linked.ask("pay 500 to savings", app="/quorum", who="dave")
    page = browser.new_page()
    open_link(page, quorum_linked.link_of(paused["session_id"]), "bob")
    card = page.locator("#link-card .card")
    card.get_by_role("button", name="Approve", exact=True).click()
    counted = "Your approval is counted; the others decide now."
    expect(page.locator("#link-message")).to_contain_text(counted)
    expect(card).to_have_attribute("data-state", "counted")

    page.reload()  # the same from the session alone
    expect(card).to_have_attribute("data-state", "counted")
    expect(card.locator(".approval-progress")).to_have_text("1 of 2 approvals · approved by bob")
    expect(page.locator("#link-message")).to_contain_text(counted)
    shots(page, "counted-after-reload")

    approve_over_http(quorum_linked, "/quorum", paused, "alice")  # the others complete it: shown live
    expect(card).to_have_attribute("data-state", "elsewhere")
    expect(page.locator("#link-message")).to_contain_text("your approval counted")
    assert quorum_linked.moved == ["500->savings"]


def test_a_link_page_counts_down_and_shows_the_expiry(quorum_linked: Linked, browser, shots: Shots):
    paused = quorum_linked.ask("pay 500 to savings", app="/quick", who="dave")
    page = browser.new_page()
    open_link(page, quorum_linked.link_of(paused["session_id"]), "bob")
    card = page.locator("#link-card .card")
    expiry = card.locator(".card-expiry strong")
    expect(expiry).to_contain_text("Expires in")
    first = expiry.inner_text()
    expect(expiry).not_to_have_text(first)  # it ticks
    expect(card).to_have_attribute("data-state", "expired", timeout=QUICK_TTL.total_seconds() * 1000 + 15_000)
    expect(page.locator("#link-message")).to_contain_text("Its time ran out")
    expect(card.get_by_role("button")).to_have_count(0)
    shots(page, "expired")
    assert [e["decision"] for e in quorum_linked.audit(paused["session_id"], app="/quick")] == ["expire"]
