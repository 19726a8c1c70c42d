"""What an outside browser probe found: an approvals desk offered a cancel it may not do; focus
left on an answered card after a held decision; a token a header cannot carry said the server was
away; a deep link to an unknown agent or an id no session can have showed something else; a
screen reader was told "waiting for your answer" by people who may not answer, and after the
pause was decided."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import expect

from pausepoint.stores import SqliteSessionStore
from tests.console.conftest import Served, Shots
from tests.console.steps import ALICE, approve, hold, open_console, paused_session, send


def test_an_approvals_desk_answers_but_is_not_offered_to_cancel(served: Served, browser, shots: Shots):
    """bob approves for treasury: he may answer alice's pause, not converse in her session, and
    cancelling its pauses is conversing (the server refuses it): he is not offered it."""
    reply = httpx.post(
        f"{served.url}/desk/v1/agents/treasury/sessions",
        json={"message": "pay 700 to savings"},
        headers={"Authorization": "Bearer alice-token"},
    )
    assert reply.status_code == 200, reply.text
    session = reply.json()["session_id"]

    bob = browser.new_page()
    open_console(bob, served, who="bob", app="desk", agent="treasury", session=session)
    card = bob.locator(".card")
    expect(card).to_have_attribute("data-state", "open")
    expect(card.get_by_role("button", name="Approve", exact=True)).to_be_visible()  # he answers
    expect(bob.locator("#composer")).to_be_hidden()  # he does not converse
    expect(bob.locator("#readonly-note")).to_contain_text("You may answer this session's pauses")
    expect(bob.locator("#cancel-open")).to_be_hidden()
    shots(bob, "desk")

    # the owner, who converses in it, is offered the cancel on the same session
    alice = browser.new_page()
    open_console(alice, served, who="alice", app="desk", agent="treasury", session=session)
    expect(alice.locator(".card")).to_have_attribute("data-state", "open")
    expect(alice.locator("#cancel-open")).to_be_visible()

    # bob approves: it stands, and nothing offered him a cancel meanwhile
    bob.get_by_role("button", name="Approve", exact=True).click()
    hold(bob, card.get_by_role("button", name="Hold to approve"))
    expect(card).to_have_attribute("data-state", "answered")
    expect(bob.locator("#cancel-open")).to_be_hidden()
    assert served.moved == ["700->savings"]


def test_after_a_held_decision_typing_goes_to_the_message_box(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served)
    box = page.get_by_label("Message", exact=True)

    send(page, "Transfer $700 to savings.")
    card = page.locator(".card")
    approve(page, card)  # held: high risk
    expect(card).to_have_attribute("data-state", "answered")
    expect(box).to_be_focused()  # not the answered card
    page.keyboard.type("thanks")
    expect(box).to_have_value("thanks")
    shots(page, "typed-after-the-decision")

    # A person who selects the answered card and types: the card has nothing to decide, the
    # characters reach the message box.
    box.fill("")
    card.locator(".card-title").click()
    expect(card).to_be_focused()
    page.keyboard.type("and done")
    expect(box).to_have_value("and done")
    expect(box).to_be_focused()
    assert served.ledger == ["700->savings"]

    # Focus moved elsewhere while the decision was under way: it stays there.
    box.fill("")
    held: list[Any] = []
    page.route("**/interrupts/**/approve", lambda route: held.append(route))
    send(page, "Transfer $800 to savings.")
    second = page.locator(".card").last
    expect(second).to_have_attribute("data-state", "open")
    second.get_by_role("button", name="Approve", exact=True).click()
    hold(page, second.get_by_role("button", name="Hold to approve"))
    for _ in range(100):
        if held:
            break
        page.wait_for_timeout(50)
    assert held, "the approval was not sent"
    elsewhere = page.locator("#confirm-all")
    elsewhere.focus()
    held[0].continue_()
    expect(second).to_have_attribute("data-state", "answered")
    page.wait_for_timeout(300)  # what follows the decision (the session read again) is done
    expect(elsewhere).to_be_focused()
    expect(box).not_to_be_focused()


def test_a_token_no_header_can_carry_is_not_accepted(served: Served, browser, shots: Shots):
    page = browser.new_page()
    page.goto(f"{served.url}/bank/console/")
    error = page.locator("#signin-error")
    page.get_by_label("Bearer token").fill("tok€n")
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(error).to_have_text("That token was not accepted.")
    shots(page, "pasted")

    other = browser.new_page()
    other.goto(f"{served.url}/bank/console/#token=%E2%82%AC%00x")
    error = other.locator("#signin-error")
    expect(error).to_have_text("That token was not accepted.")
    assert "token=" not in other.url
    # another token in the address bar is tried in its place: a wrong one is not accepted either,
    # a good one signs in
    other.goto(f"{served.url}/bank/console/#token=nope&agent=bankingAgent")
    expect(other).to_have_url(f"{served.url}/bank/console/#agent=bankingAgent")
    expect(error).to_have_text("That token was not accepted.")
    other.goto(f"{served.url}/bank/console/#token=alice-token")
    expect(other.locator("#who")).to_have_text("alice")
    expect(other.locator("#signin")).to_be_hidden()
    expect(other.locator("#feed-state")).to_have_text("live")
    assert "token=" not in other.url


def test_a_deep_link_to_an_unknown_agent_or_an_impossible_session_says_so(served: Served, browser, shots: Shots):
    page = browser.new_page()
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    open_console(page, served, agent="nope", session="abc")
    expect(page.locator("#conv-title")).to_have_text("No agent “nope”")
    expect(page.locator("#conv-sub")).to_contain_text("There is no agent named “nope” here")
    expect(page.locator("#composer")).to_be_hidden()
    expect(page.locator("#log .msg")).to_have_count(0)
    assert "agent=nope" in page.url
    assert not [url for url in asked if "/sessions/abc" in url]  # no other agent's session read
    shots(page, "unknown-agent")

    # an id no session can have is never sent to the server: "No session", as for an unknown one
    for raw, shown in [("a%2Fb", "a/b"), ("../../v1/agents", "../../v1/agents")]:
        asked.clear()
        page.goto(f"{served.url}/bank/console/#agent=bankingAgent&session={raw}")
        error = page.locator("#log .turn-error")
        expect(error).to_have_text(f"No session '{shown}'")
        expect(page.locator("#log")).not_to_contain_text("route")
        expect(page.locator("#composer")).to_be_hidden()
        page.wait_for_timeout(300)
        assert not [url for url in asked if "/sessions/a%2F" in url or "/sessions/.." in url]
    shots(page, "impossible-session")

    # an unknown (well-formed) session is the server's to say, as before
    page.goto(f"{served.url}/bank/console/#agent=bankingAgent&session=abc")
    expect(page.locator("#log .turn-error")).to_have_text("No session 'abc'")

    # a plain route to a real agent shows it again, ready to write
    page.goto(f"{served.url}/bank/console/#agent=bankingAgent")
    expect(page.locator("#conv-title")).to_have_text("New conversation")
    expect(page.locator("#composer")).to_be_visible()
    send(page, "hello")
    expect(page.locator(".msg-model .msg-body").last).to_be_visible()


def test_what_a_pause_says_and_a_call_shows_hides_no_reordering_character(served: Served, browser):
    """A tool's reason for pausing (built from the model's input), the call's line in the log and
    a reason given by a denial show an invisible or reordering character as a marker, as the
    card's title and fields do (found by a probe: "Why it paused" read "exe.txt" for "txt.exe")."""
    payee = "ACME \u202etxt.exe\u202c"
    page = browser.new_page()
    open_console(page, served, app="desk", agent="treasury")
    send(page, f"hold 5 for {payee}")
    card = page.locator(".card")
    expect(card).to_have_attribute("data-state", "open")
    marked = "ACME ⟨U+202E⟩txt.exe⟨U+202C⟩"
    why = f"Why it paused: Money set aside for {marked} is not available to pay others."
    expect(card.locator(".card-why")).to_have_text(why)
    expect(page.locator(".activity-call .activity-preview").first).to_contain_text(marked)
    assert "\u202e" not in card.locator(".card-why").inner_text() + card.locator(".card-title").inner_text()


def test_what_a_screen_reader_hears_of_a_pause_fits_who_reads_it_and_ends_with_it(served: Served, browser):
    done = paused_session(served, "Hello.")
    page = browser.new_page()
    open_console(page, served, who="desk", agent="bankingAgent", session=done["session_id"])
    announced = page.locator("#announce")
    session = f"{served.bank}/v1/agents/bankingAgent/sessions/{done['session_id']}"
    paused = httpx.post(f"{session}/messages", json={"message": "Transfer $9 to zoe."}, headers=ALICE).json()
    expect(page.locator(".card")).to_have_attribute("data-state", "open")  # told live by the feed
    expect(announced).to_have_text("The agent is waiting for an answer you may not give: Transfer $9 to zoe")

    ref = paused["interrupts"][0]["ref"]
    assert httpx.post(f"{session}/interrupts/{ref}/approve", json={}, headers=ALICE).status_code == 200
    expect(page.locator(".card")).to_have_attribute("data-state", "elsewhere")  # answered, by alice
    expect(announced).to_have_text("")  # nothing waits: nothing said to


def test_a_session_deleted_while_its_card_is_open_closes_the_card_and_leaves_the_inbox(
    served: Served, browser, shots: Shots, tmp_path: Path
):
    """Found by two probes: a session deleted from the store (REST answered 404 on every route and
    no longer listed it) stayed in the console's inbox, its card "Waiting for you" with Approve and
    Deny, even after the card's own approval was refused with ``session_not_found``."""
    session = paused_session(served, "Transfer $700 to savings.")["session_id"]
    page = browser.new_page()
    open_console(page, served, agent="bankingAgent", session=session)
    card = page.locator(".card")
    expect(card).to_have_attribute("data-state", "open")
    expect(page.locator("#inbox .session-item")).to_have_count(1)

    async def delete() -> None:  # as another process (an operator's retention job) does
        store = SqliteSessionStore(tmp_path / "sessions.db")
        assert await store.delete(session)
        await store.close()

    with ThreadPoolExecutor(1) as other:  # (Playwright's loop runs in this thread)
        other.submit(asyncio.run, delete()).result()
    approve(page, card)
    expect(card).to_have_attribute("data-state", "gone")
    expect(card).to_contain_text("The session no longer exists")
    expect(card.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    expect(card.get_by_role("button", name="Deny", exact=True)).to_have_count(0)
    expect(page.locator("#inbox .session-item")).to_have_count(0)  # as REST's inbox no longer lists it
    shots(page, "deleted-session")
    assert served.ledger == []
