"""An approval link's page tells what the server holds (found by a probe, console11): an answer
whose reply was lost is never said to be undecided, and a link whose call paused again says so
live, as GET /v1/links/{token} and a reload say it.

The links come as people get them (the server's webhook announces each pause with its link); the
page runs in a real headless Chromium against a real server on loopback.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, Route, expect
from pydantic import BaseModel

from pausepoint import Interrupt, ModelRequest, PauseDisplay, Pausepoint
from pausepoint.server import OwnerPolicy
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, Step, tool_call
from tests.console import apps
from tests.console.conftest import Shots
from tests.console.steps import approve
from tests.console.test_console_link import Linked, announcer, open_link, serving, with_links

SAID = """
window.saidOnLink = [];
new MutationObserver(() => {
  for (const part of document.querySelectorAll("#link-message, #link-card .card-status")) {
    const text = part.textContent || "";
    if (text && !window.saidOnLink.includes(text)) window.saidOnLink.push(text);
  }
}).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
"""  # every text the link's page says above its card and on it, read back with window.saidOnLink


def said_on(page: Page) -> list[str]:
    return list(page.evaluate("window.saidOnLink"))


def links_to(tmp_path: Path, agent: str, make: Callable[[SqliteSessionStore, Linked], Pausepoint]) -> Iterator[Linked]:
    """The app ``make`` builds, served with approval links (alice and bob approve)."""
    result = Linked("", agent=agent)

    def make_app(url: str) -> Any:
        ai = make(SqliteSessionStore(tmp_path / f"{agent}.db"), result)
        return with_links(ai, result, f"{url}/console", OwnerPolicy({"alice", "bob"}))

    with serving(result, make_app):
        yield result


@pytest.fixture
def treasury(tmp_path: Path) -> Iterator[Linked]:
    """The console tests' treasury app (tests.console.apps): a transfer waits for treasury."""
    yield from links_to(tmp_path, "treasury", lambda store, result: apps.build(store, result.moved, [announcer()]))


def test_an_answer_whose_reply_was_lost_is_sent_again_and_shown_decided(treasury: Linked, browser, shots: Shots):
    """The server decides, the reply comes back slowly and is lost (a flaky proxy): the probe saw
    "Nothing was decided" with Approve still offered, while the transfer had run. The page sends
    the answer again under its idempotency key and shows what the server holds: decided, once."""
    paused = treasury.ask("pay 700 to savings")
    page = browser.new_page()
    open_link(page, treasury.link_of(paused["session_id"]), "bob")
    card = page.locator("#link-card .card")
    lost: list[int] = []

    def decided_then_lost(route: Route) -> None:
        if lost:
            route.continue_()
            return
        lost.append(route.fetch().status)  # the server takes the answer and decides...
        time.sleep(1.5)  # ...the feed's news of it arrives while the page waits for its reply...
        route.abort("connectionreset")  # ...and the reply never arrives

    page.route("**/interrupts/*/approve", decided_then_lost)
    page.evaluate(SAID)
    approve(page, card)
    expect(card).to_have_attribute("data-state", "answered", timeout=20_000)
    expect(card.locator(".card-status")).to_contain_text("Approved by bob")
    expect(page.locator("#link-message")).to_have_text("Recorded. You can close this tab.")
    expect(card.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    shots(page, "lost-reply-decided")
    said = said_on(page)
    assert lost == [200], lost
    assert not [text for text in said if "nothing was decided" in text.lower()], said
    assert treasury.moved == ["700->savings"]  # decided once
    [entry] = treasury.audit(paused["session_id"])
    assert (entry["decision"], entry["principal"], entry["via"]) == ("approve", "bob", "link")


class Question(BaseModel):
    question: str


def asking_app(store: SqliteSessionStore) -> Pausepoint:
    """The ``asker`` agent: its ``ask_person`` pauses itself each time it runs, so an answer to
    its pause runs it again and it pauses anew (same call, a new pause: its link is superseded)."""
    ai = Pausepoint(webhooks=[announcer()])

    @ai.tool(display=PauseDisplay(title="Ask: {question}"))
    async def ask_person(input: Question) -> str:
        """Ask a person something; asks anew each time it runs."""
        raise Interrupt({"question": input.question})

    def script(request: ModelRequest) -> Step:
        last = request.messages[-1]
        return tool_call("ask_person", {"question": last.text}) if last.role == "user" else "asked"

    ai.define_agent(name="asker", model=ScriptedModel(script), tools=[ask_person], store=store)
    return ai


@pytest.fixture
def asking(tmp_path: Path) -> Iterator[Linked]:
    yield from links_to(tmp_path, "asker", lambda store, _: asking_app(store))


def link_state(served: Linked, link: str) -> dict[str, Any]:
    """What GET /v1/links/{token} says of ``link`` (as alice)."""
    token = link.split("#link=", 1)[1]
    reply = httpx.get(f"{served.url}/v1/links/{token}", headers={"Authorization": "Bearer alice-token"})
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def test_an_open_link_whose_call_paused_again_says_a_new_request_waits(asking: Linked, browser, shots: Shots):
    """bob answers over the API; the call runs again and pauses anew. The probe saw "Someone
    answered it first ... You can close this tab" on the open page, while REST and a reload said
    the link was superseded and a new request waits."""
    paused = asking.ask("which colour?", who="dave")
    [pause] = paused["interrupts"]
    link = asking.link_of(paused["session_id"])
    page = browser.new_page()
    open_link(page, link, "alice")
    expect(page.locator("#link-card .card").get_by_role("button", name="Approve", exact=True)).to_be_visible()

    url = f"{asking.url}/v1/agents/asker/sessions/{paused['session_id']}/interrupts/{pause['ref']}/approve"
    reply = httpx.post(url, json={"pause_id": pause["pause_id"]}, headers={"Authorization": "Bearer bob-token"})
    assert reply.status_code == 200, reply.text
    assert reply.json()["interrupts"][0]["pause_id"] != pause["pause_id"]  # the same call, paused anew

    message = page.locator("#link-message")
    expect(message).to_contain_text("A newer request replaced the one this link is about")
    expect(message).to_contain_text("The new request is in your inbox")
    expect(page.locator("#link-card .card")).to_have_count(0)
    expect(page.locator("#link-page").get_by_role("button")).to_have_count(0)
    shots(page, "superseded-live")
    live = message.inner_text()
    state = link_state(asking, link)
    assert state["state"] == "superseded" and state["message"] in live  # the story REST tells
    page.reload()
    expect(message).to_have_text(live)  # and a reload


def test_an_answer_given_on_the_link_that_made_the_call_ask_again_stands(asking: Linked, browser, shots: Shots):
    """The person's own answer runs the call again and it pauses anew: the page keeps their answer
    recorded (it is) and says the new request waits, not "close this tab"."""
    paused = asking.ask("which colour?", who="dave")
    link = asking.link_of(paused["session_id"])
    page = browser.new_page()
    open_link(page, link, "alice")
    card = page.locator("#link-card .card")
    page.evaluate(SAID)
    approve(page, card)
    expect(card).to_have_attribute("data-state", "answered")
    expect(card.locator(".card-status")).to_contain_text("by alice")
    expect(page.locator("#link-message")).to_have_text(
        "Recorded. The agent asked again: the new request is in your inbox."
    )
    shots(page, "own-answer-asked-again")
    assert link_state(asking, link)["state"] == "superseded"
    said = said_on(page)
    assert not [text for text in said if "nothing was decided" in text.lower()], said
