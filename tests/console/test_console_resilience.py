"""Issue 42, item 4: lost work and developer errors. With the server down, nothing typed is lost
and nothing is decided behind the person's back; what happened is said in a person's words, and
what was waiting is sent once the server is back. A revoked token disables every answer and
signs out cleanly. A link carrying another token, opened in a signed-in tab, takes its identity."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import expect
from pydantic import BaseModel, Field
from starlette.applications import Starlette
from starlette.routing import Mount

from examples import banking
from pausepoint import ModelRequest, Pausepoint
from pausepoint.server import BearerTokens, create_app
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, Step, last_tool_results, tool_call
from tests.console.conftest import Served, Shots
from tests.console.steps import approve, confirm, open_console, paused_session, send
from tests.server.harness import TOKENS, serve_in_thread

DEVELOPER_WORDS = ("Failed to fetch", "NetworkError", "Authorization", "Bearer", "credentials", "http_")


class Restartable:
    """The banking app on one loopback port, stopped and started again by the test (its sessions
    in a SQLite file, so they outlive the process's server)."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.ledger: list[str] = []
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(128)
        ready = threading.Event()

        def factory() -> Starlette:
            ai, _ = banking.build(SqliteSessionStore(self.db), self.ledger)
            app = create_app(ai, auth=BearerTokens(TOKENS), feed_interval=0.2)
            return Starlette(routes=[Mount("/bank", app)])

        async def main() -> None:
            config = uvicorn.Config(factory(), log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
            self._server = uvicorn.Server(config)
            ready.set()
            await self._server.serve(sockets=[sock])
            sock.close()

        self._thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
        self._thread.start()
        ready.wait(10)
        for _ in range(500):
            if self._server is not None and self._server.started:
                return
            threading.Event().wait(0.01)

    def stop(self) -> None:
        assert self._server is not None and self._thread is not None
        self._server.should_exit = True
        self._thread.join(15)

    def console(self, **route: str) -> str:
        extra = "".join(f"&{k}={v}" for k, v in route.items())
        return f"{self.url}/bank/console/#token=alice-token{extra}"


@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[Restartable]:
    server = Restartable(tmp_path / "sessions.db")
    server.start()
    try:
        yield server
    finally:
        if server._server is not None and not server._server.should_exit:
            server.stop()


def transfer_card(restartable: Restartable, browser: Any) -> tuple[Any, Any]:
    """A console page whose session asked to transfer $40 to rent: the page, and the open card."""
    page = browser.new_page()
    page.goto(restartable.console())
    expect(page.locator("#feed-state")).to_have_text("live")
    send(page, "Transfer $40 to rent.")
    card = page.locator(".card")
    expect(card).to_have_attribute("data-state", "open")
    return page, card


def no_developer_words(text: str) -> None:
    assert not [w for w in DEVELOPER_WORDS if w in text], text


def test_a_message_sent_while_the_server_is_down_is_kept_and_sent_when_it_is_back(
    restartable: Restartable, browser, shots: Shots
):
    page = browser.new_page()
    page.goto(restartable.console())
    expect(page.locator("#feed-state")).to_have_text("live")
    send(page, "Hello there.")
    expect(page.locator(".msg-model .msg-body").last).to_have_text("You said: Hello there.")

    restartable.stop()
    send(page, "Are you still there?")
    notice = page.locator("#composer-notice")
    expect(notice).to_contain_text("cannot reach the server")
    expect(notice).to_contain_text("sent once it is back")
    expect(page.get_by_label("Message", exact=True)).to_have_value("Are you still there?")  # kept
    no_developer_words(page.locator("body").inner_text())
    shots(page, "server-down")

    restartable.start()
    expect(page.locator(".msg-model .msg-body").last).to_have_text("You said: Are you still there?", timeout=20_000)
    expect(page.get_by_label("Message", exact=True)).to_have_value("")
    expect(page.locator(".msg-user .msg-body")).to_have_count(2)  # sent once, not twice
    shots(page, "sent-when-back")


def test_a_decision_while_the_server_is_down_says_so_and_goes_through_once_it_is_back(
    restartable: Restartable, browser, shots: Shots
):
    page, card = transfer_card(restartable, browser)
    restartable.stop()
    card.get_by_role("button", name="Deny…").click()
    card.get_by_label("Reason for denying").fill("Rent is paid")
    card.get_by_role("button", name="Deny", exact=True).click()
    confirm(page, card, "deny")
    status = card.locator(".card-status")
    expect(status).to_contain_text("cannot reach the server")
    expect(status).to_contain_text("sent again once it is back")
    expect(card).to_have_attribute("data-state", "open")
    no_developer_words(page.locator("body").inner_text())
    shots(page, "decision-waits")

    restartable.start()
    expect(card).to_have_attribute("data-state", "answered", timeout=20_000)
    expect(card.locator(".card-status")).to_contain_text("Denied by alice")
    expect(page.locator(".msg-model .msg-body").last).to_have_text("I did not transfer anything: Rent is paid.")
    assert restartable.ledger == []


def test_leaving_the_page_while_a_decision_waits_for_the_server_asks_first(restartable: Restartable, browser):
    """A decision waiting on its card lives in the page only: a reload would drop it unsaid (found
    by a probe). The browser asks first; once it is taken back, nothing holds the page."""
    page, card = transfer_card(restartable, browser)
    restartable.stop()
    approve(page, card)
    expect(card.locator(".card-status")).to_contain_text("cannot reach the server")
    with page.expect_event("dialog") as shown:
        page.close(run_before_unload=True)
    assert shown.value.type == "beforeunload"
    shown.value.dismiss()  # stay
    card.get_by_role("button", name="Don't send it").click()
    with page.expect_event("close"):  # nothing waits now: no question
        page.close(run_before_unload=True)
    assert restartable.ledger == []


SAID_ON_CARDS = """
window.saidOnCards = [];
new MutationObserver(() => {
  for (const status of document.querySelectorAll(".card-status")) {
    const text = status.textContent || "";
    if (text && window.saidOnCards.at(-1) !== text) window.saidOnCards.push(text);
  }
}).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
"""  # every text a card's status line shows, in order, read back with window.saidOnCards


def test_a_decision_whose_reply_was_lost_is_never_said_to_be_undecided(restartable: Restartable, browser):
    """The server decided, then the reply never reached the browser (found by a probe: the card
    said "Nothing is decided yet", and after "Don't send it", "Not sent: nothing was decided",
    while the transfer had run). The console cannot know: it says so, and once the server answers
    the card shows what it holds — decided, once."""
    page, card = transfer_card(restartable, browser)
    lost: list[str] = []

    def decided_then_lost(route: Any) -> None:
        if lost:
            route.continue_()
            return
        route.fetch()  # the server takes the answer and decides...
        lost.append(route.request.url)
        route.abort("connectionreset")  # ...and its reply never arrives

    page.route("**/interrupts/*/respond", decided_then_lost)
    page.route("**/interrupts/*/approve", decided_then_lost)
    page.evaluate(SAID_ON_CARDS)
    approve(page, card)
    dont_send = card.get_by_role("button", name="Don't send it")
    if dont_send.is_visible():  # the card says it cannot know (unless the feed showed the decision)
        with contextlib.suppress(PlaywrightTimeoutError):
            dont_send.click(timeout=2_000)
    expect(card).to_have_attribute("data-state", "answered", timeout=20_000)
    # The card may say it cannot know, or the feed may show the decision first: either way, no
    # status it ever showed says nothing was decided.
    said: list[str] = page.evaluate("window.saidOnCards")
    assert lost and said, said
    undecided = [text for text in said if "nothing is decided" in text.lower() or "nothing was decided" in text.lower()]
    assert not undecided, said
    assert "nothing was decided" not in page.locator("body").inner_text().lower()
    assert restartable.ledger == ["40->rent"]  # decided once, and shown as decided


def test_a_revoked_token_disables_every_answer_and_signs_out_cleanly(served: Served, browser, shots: Shots):
    paused = paused_session(served, "pay 700 to savings", app="desk", agent="treasury")
    page = browser.new_page()
    open_console(page, served, app="desk", agent="treasury", session=paused["session_id"])
    card = page.locator(".card")
    expect(card).to_have_attribute("data-state", "open")
    served.tokens.revoke("alice-token")
    approve(page, card)
    signed_out = page.locator("#signed-out")
    expect(signed_out).to_be_visible()
    expect(signed_out).to_contain_text("no longer accepted")
    expect(signed_out).to_contain_text("Nothing was decided")
    for button in card.get_by_role("button").all():
        expect(button).to_be_disabled()
    expect(page.get_by_label("Message", exact=True)).to_be_disabled()
    no_developer_words(page.locator("body").inner_text())
    assert page.evaluate("sessionStorage.getItem('pausepoint.token')") is None
    shots(page, "revoked")
    assert served.moved == []

    signed_out.get_by_role("button", name="Sign in again").click()
    expect(page.locator("#signin")).to_be_visible()
    page.get_by_label("Bearer token").fill("bob-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#who")).to_have_text("bob")
    expect(page.locator(".card")).to_have_attribute("data-state", "open")  # back where they were
    assert paused["session_id"] in page.url


def test_a_link_with_another_token_in_a_signed_in_tab_takes_the_new_identity(served: Served, browser, shots: Shots):
    paused = paused_session(served, "pay 700 to savings", app="desk", agent="treasury")
    page = browser.new_page()
    open_console(page, served, app="desk", agent="treasury")
    expect(page.locator("#who")).to_have_text("alice")
    page.goto(served.console("bob-token", app="desk", agent="treasury", session=paused["session_id"]))
    expect(page.locator("#who")).to_have_text("bob")
    expect(page.locator(".card")).to_have_attribute("data-state", "open")
    expect(page.locator("#toast")).to_contain_text("Signed in as bob")
    assert "token" not in page.url
    shots(page, "switched")
    card_data: Any = page.evaluate("sessionStorage.getItem('pausepoint.token')")
    assert card_data == "bob-token"


def card_cut_off(served: Served, browser: Any, message: str, app: str, **route: str) -> tuple[Any, Any]:
    """A console page of ``app`` whose ``message`` opened a card, then lost the server (its API
    refuses to connect until ``page.unroute``): the page and the card."""
    page = browser.new_page()
    open_console(page, served, app=app, **route)
    send(page, message)
    card = page.locator(".card")
    expect(card).to_have_attribute("data-state", "open")
    page.route(f"**/{app}/v1/**", lambda route: route.abort("connectionrefused"))
    return page, card


def test_an_answer_to_a_question_while_the_server_is_down_waits_and_goes_through_once_it_is_back(
    served: Served, browser, shots: Shots
):
    """The form's answer could not be checked with the server down, so it was never sent and
    never said to wait (found by a probe); a confirmed decision waits on its card, this one too."""
    page, card = card_cut_off(served, browser, "which account pays ACME GmbH?", "desk", agent="treasury")
    card.get_by_role("button", name="Respond").click()
    card.get_by_label("Account", exact=True).select_option("reserve")
    card.get_by_role("button", name="Send answer").click()
    confirm(page, card, "send this answer")
    expect(card.locator(".card-status")).to_contain_text("your answer is sent again once it is back")
    expect(card).to_have_attribute("data-state", "open")
    no_developer_words(page.locator("body").inner_text())

    page.unroute("**/desk/v1/**")
    expect(card).to_have_attribute("data-state", "answered", timeout=20_000)
    expect(page.locator(".msg-model .msg-body").last).to_have_text("chooseAccount: {'account': 'reserve', 'note': ''}")
    expect(page.locator(".audit-entry", has_text="Answer: Account: reserve")).to_have_count(1)  # once


def test_an_edited_input_the_server_refuses_once_it_is_back_says_why_on_its_card(served: Served, browser):
    """Checked only when it arrives, an answer the server refuses is said on its card, and
    nothing runs."""
    paying = "Pay 1250.50 EUR to ACME GmbH (DE89370400440532013000) for invoice 2024-117."
    page, card = card_cut_off(served, browser, paying, "pay")
    card.get_by_role("button", name="Edit input").click()
    card.get_by_label("IBAN", exact=True).fill("DE89 not an IBAN")
    card.get_by_role("button", name="Approve with this input").click()
    confirm(page, card, "approve the edited input")
    expect(card.locator(".card-status")).to_contain_text("sent again once it is back")

    page.unroute("**/pay/v1/**")
    status = card.locator(".card-status")
    expect(status).to_contain_text("iban", ignore_case=True, timeout=20_000)
    expect(status).not_to_contain_text("Sending")
    expect(card).to_have_attribute("data-state", "open")  # still to be decided
    assert served.paid == []


def test_a_refresh_that_cannot_reach_the_server_keeps_the_conversation_shown(served: Served, browser):
    """The session moved on elsewhere and the console read it again just as the server went away:
    the conversation, its card included, was replaced by "cannot reach the server" (a full run's
    one failure). What is shown stays; the refresh waits, and runs once the server answers."""
    paused = paused_session(served, "Transfer $7 to carol.")
    page = browser.new_page()
    open_console(page, served, session=paused["session_id"])
    card = page.locator(".card")
    expect(card).to_have_attribute("data-state", "open")
    page.route("**/history", lambda route: route.abort("connectionrefused"))

    ref = paused["interrupts"][0]["ref"]
    base = f"{served.bank}/v1/agents/bankingAgent/sessions/{paused['session_id']}"
    reply = httpx.post(f"{base}/interrupts/{ref}/approve", headers={"Authorization": "Bearer alice-token"})
    assert reply.status_code == 200, reply.text
    expect(card).to_have_attribute("data-state", "elsewhere")
    expect(page.locator("#offline")).to_contain_text("cannot reach the server")  # the refresh was tried
    expect(page.locator("#log .turn-error")).to_have_count(0)
    expect(card).to_have_count(1)
    expect(page.locator(".msg-user .msg-body")).to_have_text("Transfer $7 to carol.")

    page.unroute("**/history")
    expect(page.locator(".msg-model .msg-body").last).to_have_text("Transferred $7 to carol.", timeout=20_000)
    expect(page.locator("#offline")).to_be_hidden()


def test_a_feed_id_the_server_no_longer_takes_is_dropped_and_the_feed_goes_live(restartable: Restartable, browser):
    """After a restart whose agents follow other stores (or a store reset), the server refuses the
    feed's last id (400, naming it): the console followed it forever, "reconnecting…" (found by a
    probe). It follows from now instead, and reads what it missed."""
    page, card = transfer_card(restartable, browser)  # the feed has an id: the pause's event
    refused: list[str] = []

    def refuse_old_ids(route: Any) -> None:
        last = route.request.headers.get("last-event-id")
        if last is None:
            route.continue_()
            return
        refused.append(last)
        error = {"code": "invalid_request", "status": "INVALID_ARGUMENT", "message": "not an id this feed follows",
                 "details": {"code": "invalid_request", "last_event_id": last}}  # fmt: skip
        route.fulfill(status=400, json={"error": error})

    page.route("**/v1/feed", refuse_old_ids)
    restartable.stop()
    expect(page.locator("#feed-state")).to_have_text("reconnecting…")
    restartable.start()
    expect(page.locator("#feed-state")).to_have_text("live", timeout=20_000)
    assert refused  # it was asked to resume, refused, and went on from now
    expect(card).to_have_attribute("data-state", "open")


class Topic(BaseModel):
    topic: str


class Count(BaseModel):
    count: int = Field(ge=1, le=5, description="How many")
    note: str = Field("", max_length=20)


def counting(request: ModelRequest) -> Step:
    """ "count apples" asks a person how many (``askCount``); then says what they answered."""
    last = request.messages[-1]
    if last.role == "user":
        return tool_call("askCount", {"topic": last.text.removeprefix("count ")})
    return f"Counted: {last_tool_results(request).get('askCount')}"


@pytest.fixture
def counter(tmp_path: Path) -> Iterator[str]:
    """An agent whose question's answer has two fields with limits (``Count``), at ``/ask``: its URL."""

    def factory() -> Starlette:
        ai = Pausepoint()
        ask = ai.define_interrupt(name="askCount", description="Ask how many.", input_schema=Topic, output_schema=Count)
        ai.define_agent(name="counter", model=ScriptedModel(counting), tools=[ask],
                        store=SqliteSessionStore(tmp_path / "count.db"))  # fmt: skip
        return Starlette(routes=[Mount("/ask", create_app(ai, auth=BearerTokens(TOKENS), feed_interval=0.2))])

    with serve_in_thread(factory) as url:
        yield f"{url}/ask"


def test_an_answer_refused_once_the_server_is_back_shows_each_problem_by_its_field(counter: str, browser):
    """Found by a probe: the card's status listed the server's problems, but the form, opened
    again, marked no field; and after one was fixed, the stale status (the fixed problem too)
    stayed on the card."""
    page = browser.new_page()
    page.goto(f"{counter}/console/#token=alice-token&agent=counter")
    expect(page.locator("#feed-state")).to_have_text("live")
    send(page, "count apples")
    card = page.locator(".card")
    expect(card).to_have_attribute("data-state", "open")
    page.route("**/ask/v1/**", lambda route: route.abort("connectionrefused") if route.request.method == "POST"
               else route.continue_())  # fmt: skip
    card.get_by_role("button", name="Respond").click()
    form = card.locator("form[aria-label^='Respond']")
    form.get_by_label("count").fill("9")
    form.get_by_label("note").fill("n" * 25)
    form.get_by_role("button", name="Send answer").click()
    confirm(page, card, "send this answer")
    status = card.locator(".card-status")
    expect(status).to_contain_text("sent again once it is back")

    page.unroute("**/ask/v1/**")
    expect(status).to_contain_text("less than or equal to 5", timeout=20_000)  # refused, said on the card
    expect(card).to_have_attribute("data-state", "open")
    card.get_by_role("button", name="Respond").click()
    count_error, note_error = (form.locator(f"[data-field={name}] .field-error") for name in ("count", "note"))
    expect(count_error).to_have_text("Input should be less than or equal to 5.")
    expect(note_error).to_have_text("String should have at most 20 characters.")

    form.get_by_label("count").fill("2")
    form.get_by_role("button", name="Send answer").click()
    expect(count_error).to_be_hidden()
    expect(note_error).to_be_visible()
    expect(status).to_have_text("")  # the refusal of the earlier try no longer holds

    form.get_by_label("note").fill("ok")
    form.get_by_role("button", name="Send answer").click()
    expect(card).to_have_attribute("data-state", "answered")
    expect(page.locator(".msg-model .msg-body").last).to_have_text("Counted: {'count': 2, 'note': 'ok'}")
