"""The web console in a real headless Chromium, against a real server on loopback.

Each test is a person's path through the console; the assertions wait (Playwright's ``expect``)
rather than sleep, and a screenshot of every step is saved in ``artifacts/console/``.
"""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import Page, expect

from tests.console.conftest import Served, Shots
from tests.console.steps import hold

ALICE = {"Authorization": "Bearer alice-token"}
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")
CLOCK = r"\d\d:\d\d:\d\d"
PAYMENT = "Pay 1250.50 EUR to ACME GmbH (DE89370400440532013000) for invoice 2024-117."

# Records every piece of text added to a streaming model message (to see it arrive in pieces).
WATCH_STREAM = """
window.__streamed = [];
new MutationObserver((records) => {
  for (const r of records) {
    if (r.target.closest && r.target.closest('.streaming')) {
      for (const n of r.addedNodes) if (n.nodeType === Node.TEXT_NODE) window.__streamed.push(n.textContent);
    }
  }
}).observe(document.getElementById('log'), {childList: true, subtree: true});
"""


def open_console(page: Page, served: Served, who: str = "alice", **route: str) -> None:
    page.goto(served.console(token=f"{who}-token", **route))
    expect(page.locator("#who")).to_have_text(who)
    expect(page.locator("#feed-state")).to_have_text("live")


def send(page: Page, text: str) -> None:
    box = page.get_by_label("Message", exact=True)
    box.fill(text)
    box.press("Enter")


def paused_session(served: Served, message: str, app: str = "bank", agent: str = "bankingAgent") -> dict:
    """A session paused by another client (plain HTTP, as alice)."""
    reply = httpx.post(f"{served.url}/{app}/v1/agents/{agent}/sessions", json={"message": message}, headers=ALICE)
    assert reply.status_code == 200, reply.text
    return reply.json()


ANSWERS = "#audit .audit-entry:not(.audit-message)"  # the trail's answers (user messages are entries too)


def answer_count(served: Served, app: str, agent: str, session_id: str) -> int:
    url = f"{served.url}/{app}/v1/agents/{agent}/sessions/{session_id}/audit"
    entries = httpx.get(url, headers=ALICE).json()["entries"]
    return sum(entry["decision"] != "message" for entry in entries)  # answers, not the messages sent


def session_of(page: Page) -> str:
    found = re.search(r"session=([0-9a-f]+)", page.url)
    assert found, page.url
    return found[1]


# -- safety ---------------------------------------------------------------------------------------


def test_stray_typing_after_a_send_decides_nothing_and_goes_nowhere(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served)
    send(page, "Transfer $700 to savings.")
    card = page.locator(".card")
    expect(card).to_have_attribute("data-state", "open")
    box = page.get_by_label("Message", exact=True)
    expect(box).to_be_focused()  # the new card did not take focus
    url, depth = page.url, page.evaluate("history.length")
    sentence = "and thanks, a quick note: done. new entry?"
    page.keyboard.type(sentence)  # a, d, e, n ... all typed at once, right after the send
    page.keyboard.press("Enter")  # sends it: refused while the pause waits, and nothing is lost
    expect(page.locator("#composer-notice")).to_contain_text("A pause is waiting for an answer")
    expect(box).to_have_value(sentence)
    shots(page, "typed-into-the-composer")
    assert page.url == url and page.evaluate("history.length") == depth  # no navigation ("n" is just a letter)
    expect(card).to_have_attribute("data-state", "open")
    assert served.ledger == [] and answer_count(served, "bank", "bankingAgent", session_of(page)) == 0

    # Clicking Send leaves the person in the composer too.
    box.fill("")
    page.get_by_role("button", name="Send").click()
    expect(box).to_be_focused()
    # Focus on nothing in particular (a click on the conversation's empty space): typing goes to the composer.
    page.mouse.click(900, 700)
    expect(box).not_to_be_focused()
    page.keyboard.type("and again")
    expect(box).to_have_value("and again")
    expect(card).to_have_attribute("data-state", "open")

    # A card the person selected takes shortcuts, but a stray sentence still decides nothing:
    # "a" opens the confirmation, "n" closes it, "d" opens the reason, the rest is typed there.
    card.locator(".card-title").click()
    expect(card).to_be_focused()
    expect(card.locator(".card-keys")).to_be_visible()
    page.keyboard.type("and thanks")
    page.keyboard.press("Enter")
    reason = card.get_by_label("Reason for denying")
    expect(reason).to_be_focused()
    expect(reason).to_have_value(" thanks\n")  # Enter is a new line here, never a decision
    shots(page, "typed-on-a-selected-card")
    assert page.url == url
    expect(card).to_have_attribute("data-state", "open")
    assert served.ledger == [] and answer_count(served, "bank", "bankingAgent", session_of(page)) == 0


def test_a_high_risk_approval_is_shown_then_confirmed(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served)
    assert "token" not in page.url  # moved to sessionStorage at once
    expect(page.locator("#conv-sub")).to_have_text(
        "Moves money between accounts. Every transfer waits for your approval."
    )
    send(page, "Transfer $700 to savings.")
    card = page.locator(".card")
    expect(card.locator(".card-title")).to_have_text("Transfer $700 to savings")
    expect(card.locator(".badge-risk")).to_have_text("High risk")
    expect(card.locator(".card-effect")).to_have_text("If you approve: $700 will be sent to savings.")
    expect(card.get_by_role("button", name="Edit input")).to_have_count(0)  # userApproval allows no edits
    assert "session=" in page.url  # the new session is in the address bar: a link to this card
    shots(page, "paused")

    card.get_by_role("button", name="Approve").click()
    confirm = card.locator(".card-confirm")
    expect(confirm).to_be_visible()
    expect(confirm).to_contain_text("Approve “Transfer $700 to savings”?")
    expect(confirm).to_contain_text("$700 will be sent to savings.")
    expect(confirm.get_by_role("button", name="Back")).to_be_focused()  # Enter goes back
    expect(confirm.get_by_role("button", name="Hold to approve")).to_be_visible()  # high risk: held down
    shots(page, "confirm")
    assert served.ledger == []  # nothing happens before the confirmation
    confirm.get_by_role("button", name="Back").click()
    expect(confirm).to_be_hidden()
    expect(card).to_have_attribute("data-state", "open")

    page.evaluate(WATCH_STREAM)
    card.get_by_role("button", name="Approve").click()
    hold(page, confirm.get_by_role("button", name="Hold to approve"))
    final = page.locator(".msg-model .msg-body").last
    expect(final).to_contain_text("Transferred $700 to savings.")
    expect(card).to_have_attribute("data-state", "answered")
    expect(card.locator(".card-status")).to_have_text(re.compile(rf"^Approved by alice at {CLOCK} · via http$"))
    pieces = page.evaluate("window.__streamed")
    assert "".join(pieces) == "Transferred $700 to savings." and len(pieces) >= 2, pieces  # streamed, not at once
    assert served.ledger == ["700->savings"]
    expect(page.locator("#inbox-count")).to_have_text("0")
    shots(page, "approved")


def test_normal_risk_approves_on_a_click_and_shortcuts_always_confirm(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served, app="shell")
    expect(page.locator("#agent-select")).to_have_value("shellAgent")
    send(page, "Run: rm -rf build/")
    card = page.locator(".card").last
    expect(card.locator(".card-title")).to_have_text("Run shell")  # defaults from the schema: nothing declared
    expect(card.locator(".card-summary")).to_have_text("Command: rm -rf build/")
    expect(card.locator(".card-why")).to_have_text("Why it paused: The command can modify files.")
    expect(card.locator(".card-effect")).to_have_text("If you approve: “Run shell” runs now (Command: rm -rf build/).")
    card.click()
    page.keyboard.press("a")  # a shortcut never decides by itself
    confirm = card.locator(".card-confirm")
    expect(confirm).to_contain_text("Approve “Run shell”?")
    shots(page, "shortcut-confirm")
    assert served.executed == []
    page.keyboard.press("Shift+Tab")  # from "Back" to the yes: a deliberate step (normal risk needs no hold)
    page.keyboard.press("Enter")
    expect(card).to_have_attribute("data-state", "answered")
    assert served.executed == [{"command": "rm -rf build/", "resumed_metadata": {"tool_approved": True}}]

    send(page, "Run: rm -rf dist/")
    card = page.locator(".card").last
    card.get_by_role("button", name="Approve").click()  # normal risk: a click is the decision
    expect(card).to_have_attribute("data-state", "answered")
    assert len(served.executed) == 2

    page.get_by_label("Confirm every decision").check()  # ...unless the person wants to confirm everything
    send(page, "Run: rm -rf tmp/")
    card = page.locator(".card").last
    card.get_by_role("button", name="Approve").click()
    expect(card.locator(".card-confirm")).to_be_visible()
    assert len(served.executed) == 2
    card.get_by_role("button", name="Yes, approve").click()
    expect(card).to_have_attribute("data-state", "answered")
    assert len(served.executed) == 3
    shots(page, "confirmed-by-choice")


# -- what a person decides on ---------------------------------------------------------------------


def test_the_card_and_the_inbox_show_amount_and_payee(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served, app="pay")
    expect(page.locator("#inbox-count")).to_have_text("0")
    paused_session(served, PAYMENT, app="pay", agent="paymentsAgent")
    item = page.locator("#inbox .session-item")
    expect(item).to_have_count(1)  # announced live by the feed
    expect(item.locator(".session-title")).to_have_text("Pay €1,250.50 to ACME GmbH")
    expect(item.locator(".tag-risk")).to_have_text("High risk")
    expect(item.locator("time")).to_have_text("just now")
    for part in (".session-title", "time", ".expires"):  # nothing cut off
        fits = item.locator(part).evaluate("e => e.scrollWidth <= e.clientWidth && e.scrollHeight <= e.clientHeight")
        assert fits, part
    expect(item.locator(".expires")).to_have_text(re.compile(r"^expires in 1[45]:\d\d$"))
    shots(page, "inbox")

    item.get_by_role("link").click()
    card = page.locator(".card")
    expect(card.locator(".card-title")).to_have_text("Pay €1,250.50 to ACME GmbH")
    expect(card.locator(".card-summary")).to_have_text(
        "€1,250.50 from the company account to ACME GmbH, IBAN DE89370400440532013000."
    )
    fields = card.locator(".card-field")
    expect(fields).to_have_text(
        ["Amount€1,250.50", "PayeeACME GmbH", "IBANDE89370400440532013000", "Referenceinvoice 2024-117"]
    )
    expect(card.locator(".card-fields dt").first).to_have_attribute("title", "How much to pay.")
    expect(card.locator(".json").first).to_be_hidden()  # the raw input is there, behind "Details"
    expect(card.locator(".card-ref")).to_be_hidden()
    card.locator(".card-details summary").click()
    expect(card.locator(".json").first).to_contain_text('"iban": "DE89370400440532013000"')
    expect(card.locator(".card-tool")).to_contain_text("pay_invoice — Pay an invoice from the company account.")
    shots(page, "card")


def test_the_expiry_counts_down_and_says_what_follows(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served, app="quick")
    send(page, "Pay 80 EUR to Bo Lund (SE4550000000058398257466).")
    card = page.locator(".card")
    expiry = card.locator(".card-expiry")
    expect(expiry).to_contain_text(re.compile(rf"Expires in 0:0\d \(at {CLOCK}\)\."))
    expect(expiry).to_contain_text(
        "If nobody answers by then: It is denied automatically, and the agent is told nobody answered in time."
    )
    first = expiry.locator("strong").inner_text()
    expect(expiry.locator("strong")).not_to_have_text(first)  # it counts down
    shots(page, "counting-down")

    expect(card).to_have_attribute("data-state", "expired", timeout=30_000)  # settled by the server's sweep
    status = card.locator(".card-status")
    expect(status).to_have_text(
        re.compile(rf"^Expired: nobody answered in time · {CLOCK}\. The agent was told it was denied\.$")
    )
    expect(card.get_by_role("button", name="Approve")).to_have_count(0)
    expect(page.locator(".msg-model .msg-body").last).to_contain_text("I did not pay: expired: nobody answered before")
    entry = page.locator(ANSWERS)
    expect(entry).to_have_count(1)
    expect(entry.locator(".badge")).to_have_text("Expired")
    expect(entry.locator(".audit-title")).to_have_text("Pay €80.00 to Bo Lund")
    expect(entry.locator(".audit-who")).to_have_text(re.compile(rf"^Nobody answered in time · {CLOCK}$"))
    expect(entry.locator(".audit-detail")).to_have_text("The agent was told it was denied.")
    text = entry.inner_text()
    assert "someone" not in text and "via expiry" not in text and not ISO.search(text), text
    expect(page.locator("#inbox-count")).to_have_text("0")
    shots(page, "expired")
    assert served.paid == []


def test_the_audit_trail_says_what_was_decided_and_a_reload_rebuilds_the_cards(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served)
    send(page, "Transfer $5 to anna and $6 to ben.")
    cards = page.locator(".card")
    expect(cards).to_have_count(2)
    cards.nth(0).get_by_role("button", name="Approve").click()
    hold(page, cards.nth(0).get_by_role("button", name="Hold to approve"))
    expect(cards.nth(0)).to_have_attribute("data-state", "answered")
    expect(cards.nth(1)).to_have_attribute("data-state", "open")  # partial answers: the other still waits
    waiting = page.locator(".waiting-note")
    expect(waiting).to_have_text("Recorded. The agent goes on once the other pause is answered: Transfer $6 to ben.")
    shots(page, "waiting-for-the-other")
    waiting.get_by_role("button", name="Transfer $6 to ben").click()
    expect(cards.nth(1)).to_be_focused()  # the person asked for it

    page.keyboard.press("d")
    cards.nth(1).get_by_label("Reason for denying").fill("Ben was paid already.")
    cards.nth(1).get_by_role("button", name="Deny", exact=True).click()
    hold(page, cards.nth(1).get_by_role("button", name="Hold to deny"))  # high risk: a denial is held too
    expect(page.locator(".msg-model .msg-body").last).to_have_text("Transferred $5 to anna.")
    assert served.ledger == ["5->anna"]
    answered = served.model_requests("bankingAgent")[-2].messages[-1]  # what the model saw of both answers
    assert [p.output for p in answered.tool_responses] == [
        {"approved": True, "feedback": ""},
        {"denied": True, "reason": "Ben was paid already."},
    ]

    page.reload()  # the trail and the cards come from the server, not from this page's memory
    entries = page.locator(ANSWERS)
    expect(entries).to_have_count(4)  # the yes also granted the transfer it described, which ran on that grant
    expect(entries.locator(".badge")).to_have_text(["Approved by alice's grant", "Denied", "Granted", "Approved"])
    expect(entries.locator(".audit-title")).to_have_text(
        [
            "Transfer $5.00 to anna",
            "Transfer $6 to ben",
            "Later “Transfer money” calls in this session",
            "Transfer $5 to anna",
        ]
    )
    by_alice = re.compile(rf"^by alice at {CLOCK} · via http$")
    expect(entries.locator(".audit-who")).to_have_text(
        [re.compile(rf"^by alice \(granted earlier\) at {CLOCK}$"), by_alice, by_alice, by_alice]  # a person
    )
    expect(entries.nth(1).locator(".audit-reason")).to_have_text("“Ben was paid already.”")
    assert not ISO.search(page.locator("#audit").inner_text())
    entries.nth(3).locator("summary").click()
    expect(entries.nth(3).locator(".json")).to_contain_text('"approved": true')
    sent = page.locator("#audit .audit-message")  # who wrote into the session is in the trail too
    expect(sent.locator(".audit-who").last).to_have_text(re.compile(rf"^by alice at {CLOCK} · via http$"))
    panel = page.locator(".audit")
    assert panel.evaluate("e => e.scrollWidth <= e.clientWidth"), "the audit panel overflows to the right"

    rebuilt = page.locator(".card")
    expect(rebuilt).to_have_count(2)
    expect(rebuilt.locator(".card-title")).to_have_text(["Transfer $5 to anna", "Transfer $6 to ben"])
    expect(page.locator(".card[data-state=answered]")).to_have_count(2)
    expect(rebuilt.nth(0).locator(".card-status")).to_contain_text("Approved by alice at")
    expect(rebuilt.nth(1).locator(".card-status")).to_contain_text("Denied by alice at")
    expect(rebuilt.nth(1).locator(".card-status")).to_contain_text("“Ben was paid already.”")
    order = page.evaluate(
        """() => [...document.querySelectorAll('#log .msg, #log .card')].map((e) =>
              e.classList.contains('card') ? 'card' : e.classList.contains('msg-user') ? 'user' : 'agent')"""
    )
    assert order == ["user", "card", "card", "agent"], order  # each card where its call is in the conversation
    shots(page, "trail-after-reload")


# -- every answer the API allows -------------------------------------------------------------------


def test_respond_with_a_form_generated_from_the_output_schema(served: Served, browser, shots: Shots):
    # A question a plain yes cannot answer: the only place a card offers "Respond".
    page = browser.new_page()
    open_console(page, served, app="desk", agent="treasury")
    send(page, "which account pays ACME GmbH?")
    card = page.locator(".card")
    card.get_by_role("button", name="Respond").click()
    form = card.locator("form[aria-label^='Respond to']")
    account = form.get_by_label("Account", exact=True)
    expect(account).to_be_focused()
    expect(account.locator("option")).to_have_text(["—", "operating", "reserve"])  # a required choice, none made
    expect(form.locator("[data-field=account] .field-help")).to_have_text("The account the payment leaves from.")
    form.get_by_role("button", name="Send answer").click()
    expect(form.locator("[data-field=account] .field-error")).to_have_text("This field is required.")
    shots(page, "respond-missing")
    account.select_option("reserve")
    form.get_by_label("Note").fill("Call me first")
    form.get_by_role("button", name="Send answer").click()
    confirm = card.locator(".card-confirm")  # high risk: the answer is confirmed too
    expect(confirm).to_contain_text("Send this answer to “Which account pays ACME GmbH?”?")
    expect(confirm.locator("li")).to_have_text("Account: reserve · Note: Call me first")
    shots(page, "respond-confirm")
    hold(page, confirm.get_by_role("button", name="Hold to send this answer"))
    expect(page.locator(".msg-model .msg-body").last).to_have_text(
        "chooseAccount: {'account': 'reserve', 'note': 'Call me first'}"
    )
    expect(card.locator(".badge").first).to_have_text("Answered")
    entry = page.locator(ANSWERS)
    expect(entry.locator(".audit-detail")).to_have_text("Answer: Account: reserve · Note: Call me first")
    assert served.moved == []
    shots(page, "responded")


def test_cancel_the_open_pauses_then_write_again(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served)
    send(page, "Transfer $5 to anna and $6 to ben.")
    expect(page.locator(".card[data-state=open]")).to_have_count(2)
    send(page, "Actually, hold on.")
    notice = page.locator("#composer-notice")
    expect(notice).to_contain_text("2 pauses are waiting for an answer")
    expect(page.get_by_label("Message", exact=True)).to_have_value("Actually, hold on.")  # kept
    notice.get_by_role("button", name="Cancel them to write something else").click()
    form = page.locator("#cancel-form")
    expect(form).to_contain_text("Cancel the 2 open pauses (“Transfer $5 to anna”, “Transfer $6 to ben”)?")
    form.get_by_label("Reason").fill("Wrong accounts")
    shots(page, "cancel")
    form.get_by_role("button", name="Cancel all 2").click()
    cards = page.locator(".card")
    expect(page.locator(".card[data-state=cancelled]")).to_have_count(2)
    expect(cards.locator(".card-status")).to_have_text(
        [re.compile(rf"^Cancelled by alice at {CLOCK} · via http — “Wrong accounts”")] * 2
    )
    expect(page.locator(ANSWERS + " .badge")).to_have_text(["Cancelled", "Cancelled"])
    expect(page.locator("#cancel-open")).to_be_hidden()
    assert served.ledger == []  # nothing ran
    page.get_by_label("Message", exact=True).press("Enter")
    expect(page.locator(".msg-model .msg-body").last).to_have_text("You said: Actually, hold on.")
    tool_message = served.model_requests("bankingAgent")[-1].messages[-2]  # the model was told, then asked
    assert [p.output for p in tool_message.tool_responses] == [{"cancelled": True, "reason": "Wrong accounts"}] * 2
    shots(page, "written-again")


def test_edit_with_a_python_regex_pattern_is_checked_field_by_field(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served, app="pay")
    send(page, PAYMENT)
    card = page.locator(".card")
    card.get_by_role("button", name="Edit input").click()
    form = card.locator("form[aria-label^='Edit “']")
    iban = form.get_by_label("IBAN")
    amount = form.get_by_label("Amount")
    expect(iban).to_have_value("DE89370400440532013000")
    expect(form.get_by_label("Currency")).to_have_value("EUR")
    iban.fill("DE89 3704 0044")
    amount.fill("-5")
    expect(form.locator("[data-field=iban] .field-error")).to_have_text(
        re.compile(r"^Expected: 2 capital letters \(country\)")
    )
    expect(form.locator("[data-field=amount] .field-error")).to_have_text("Input should be greater than 0.")
    expect(iban).to_have_attribute("aria-invalid", "true")
    expect(form.locator("[data-field=payee] .field-error")).to_be_hidden()
    form.get_by_role("button", name="Approve with this input").click()
    expect(card.locator(".card-confirm")).to_be_hidden()  # refused here: nothing to confirm
    shots(page, "invalid")
    assert served.paid == []

    iban.fill("DE44500105175407324931")
    amount.fill("1250.50")
    expect(form.locator("[data-field=iban] .field-error")).to_be_hidden()
    expect(form.locator("[data-field=amount] .field-error")).to_be_hidden()
    form.get_by_role("button", name="Approve with this input").click()
    confirm = card.locator(".card-confirm")
    expect(confirm).to_contain_text("Approve “Pay €1,250.50 to ACME GmbH” with the edited input?")
    expect(confirm.locator("li")).to_have_text("IBAN: DE89370400440532013000 → DE44500105175407324931")
    shots(page, "confirm-edit")
    hold(page, confirm.get_by_role("button", name="Hold to approve the edited input"))
    expect(page.locator(".msg-model .msg-body").last).to_have_text("Paid: payment PMT-0001 (sent).")
    assert [p["iban"] for p in served.paid] == ["DE44500105175407324931"]
    expect(card.locator(".badge").first).to_have_text("Edited & approved")
    entry = page.locator(ANSWERS)
    expect(entry.locator(".audit-edits li")).to_have_text("IBAN: DE89370400440532013000 → DE44500105175407324931")
    shots(page, "paid")

    page.reload()
    rebuilt = page.locator(".card")
    expect(rebuilt).to_have_attribute("data-state", "answered")
    expect(rebuilt.locator(".card-status")).to_contain_text(
        "Changed: IBAN: DE89370400440532013000 → DE44500105175407324931"
    )


# -- several people, one pause ----------------------------------------------------------------------


def test_two_tabs_answer_one_card_one_wins_the_other_sees_it_answered(served: Served, browser, shots: Shots):
    paused = paused_session(served, "Transfer $40 to rent.")
    route = {"agent": "bankingAgent", "session": paused["session_id"]}
    first, second, watcher = browser.new_page(), browser.new_page(), browser.new_page()
    second.route("**/v1/feed", lambda r: r.abort())  # deaf to the feed: it learns only by answering
    second.goto(served.console(**route))
    for page in (first, watcher):
        open_console(page, served, **route)
    for page in (first, second, watcher):
        expect(page.locator(".card[data-state=open]")).to_have_count(1)

    first.locator(".card .card-title").click()
    first.keyboard.press("a")  # a shortcut opens the confirmation on "Back"; the yes is held down
    first.keyboard.press("Shift+Tab")
    first.keyboard.down("Enter")
    first.wait_for_timeout(1400)
    first.keyboard.up("Enter")
    expect(first.locator(".card .card-status")).to_contain_text("Approved by alice at")
    expect(first.locator(".msg-model .msg-body").last).to_have_text("Transferred $40 to rent.")
    shots(first, "winner")

    card = second.locator(".card")
    card.get_by_role("button", name="Approve").click()
    hold(second, card.get_by_role("button", name="Hold to approve"))  # too late: a 409 already_resolved
    expect(card).to_have_attribute("data-state", "elsewhere")
    expect(card.locator(".badge").first).to_have_text("Already answered")
    expect(card.locator(".card-status")).to_contain_text("Already answered elsewhere: Approved by alice at")
    expect(card.get_by_role("button")).to_have_count(0)
    shots(second, "already-answered")

    expect(watcher.locator(".card")).to_have_attribute("data-state", "elsewhere")  # told live by the feed
    expect(watcher.locator(".msg-model .msg-body").last).to_have_text("Transferred $40 to rent.")
    shots(watcher, "watcher")
    assert served.ledger == ["40->rent"]  # exactly once


def test_a_viewer_who_may_not_act_gets_no_composer_and_no_answers(served: Served, browser, shots: Shots):
    paused = paused_session(served, "Transfer $9 to zoe.")
    page = browser.new_page()
    open_console(page, served, who="desk", agent="bankingAgent", session=paused["session_id"])
    card = page.locator(".card")
    expect(card.locator(".card-title")).to_have_text("Transfer $9 to zoe")
    expect(card.locator(".badge").first).to_have_text("Waiting for an answer")
    expect(card.locator(".card-effect")).to_have_text("You may see this pause, but not answer it.")
    expect(page.locator(".msg-user .msg-role")).to_have_text("alice")  # not "You": desk did not write it
    expect(card.get_by_role("button", name="Approve")).to_have_count(0)
    expect(page.locator("#composer")).to_be_hidden()
    expect(page.locator("#readonly-note")).to_have_text("You may read this session; only alice acts in it.")
    expect(page.locator("#cancel-open")).to_be_hidden()
    shots(page, "read-only")


def test_the_inbox_updates_live_when_another_client_pauses(served: Served, browser, shots: Shots):
    page = browser.new_page()
    open_console(page, served)
    expect(page.locator("#inbox-count")).to_have_text("0")
    expect(page.locator("#inbox-empty")).to_be_visible()
    shots(page, "empty")

    paused = paused_session(served, "Transfer $7 to carol.")
    item = page.locator("#inbox .session-item")
    expect(item).to_have_count(1)
    expect(item.locator(".session-title")).to_have_text("Transfer $7 to carol")
    expect(page.locator("#inbox-count")).to_have_text("1")
    shots(page, "arrived")

    item.get_by_role("link").click()
    expect(page.locator(".card[data-state=open] .card-title")).to_have_text("Transfer $7 to carol")
    assert paused["session_id"] in page.url
    shots(page, "opened")

    ref = paused["interrupts"][0]["ref"]
    base = f"{served.bank}/v1/agents/bankingAgent/sessions/{paused['session_id']}"
    reply = httpx.post(f"{base}/interrupts/{ref}/approve", headers={**ALICE, "Idempotency-Key": "elsewhere"})
    assert reply.status_code == 200, reply.text
    expect(page.locator("#inbox .session-item")).to_have_count(0)
    expect(page.locator(".card")).to_have_attribute("data-state", "elsewhere")
    expect(page.locator(".card .card-status")).to_contain_text("Already answered elsewhere: Approved by alice at")
    expect(page.locator(".msg-model .msg-body").last).to_have_text("Transferred $7 to carol.")  # what followed
    shots(page, "answered-elsewhere")


# -- layout ---------------------------------------------------------------------------------------------


def test_a_phone_wide_window_shows_the_card_it_opens(served: Served, browser, shots: Shots):
    paused = paused_session(served, PAYMENT, app="pay", agent="paymentsAgent")
    page = browser.new_page()
    page.set_viewport_size({"width": 390, "height": 844})
    open_console(page, served, app="pay")
    shots(page, "inbox")
    page.locator("#inbox .session-link").click()
    card = page.locator(".card")
    expect(card).to_be_visible()
    assert paused["session_id"] in page.url

    def on_screen(selector: str) -> bool:
        return page.locator(selector).first.evaluate(
            "e => { const r = e.getBoundingClientRect(); return r.top >= 0 && r.top < innerHeight; }"
        )

    page.wait_for_function(
        "() => { const r = document.querySelector('.card').getBoundingClientRect(); "
        "return r.top >= 0 && r.top < innerHeight; }"
    )
    assert on_screen(".card-title")  # tapping the row shows its card, not the same screen
    shots(page, "card")
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 390  # nothing off the right edge
    for selector in ("#send", "#conv-title", ".card-actions .btn", ".card-fields dd"):
        box = page.locator(selector).first.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 390, selector

    page.locator("#conv-title").scroll_into_view_if_needed()
    head, composer = page.locator(".conv-head").bounding_box(), page.locator("#composer").bounding_box()
    assert head is not None and composer is not None
    assert composer["y"] >= head["y"] + head["height"] or composer["y"] + composer["height"] <= head["y"]
    shots(page, "header")

    card.get_by_role("button", name="Approve").click()
    hold(page, card.get_by_role("button", name="Hold to approve"))
    expect(page.locator(".msg-model .msg-body").last).to_have_text("Paid: payment PMT-0001 (sent).")
    shots(page, "paid")


# The contrast ratio (WCAG) of each visible, enabled button: its computed text colour over its
# computed background, translucent layers composited over what is beneath them.
CONTRAST = """
() => {
  const parse = (c) => {
    const p = c.match(/rgba?\\(([^)]+)\\)/)[1].split(/[ ,\\/]+/).filter(Boolean).map(Number);
    return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
  };
  const over = (top, under) => ({
    r: top.r * top.a + under.r * (1 - top.a), g: top.g * top.a + under.g * (1 - top.a),
    b: top.b * top.a + under.b * (1 - top.a), a: 1});
  const lum = ({r, g, b}) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c.a > 0) layers.push(c);
      if (c.a >= 1) break;
    }
    let color = {r: 255, g: 255, b: 255, a: 1};
    for (const layer of layers.reverse()) color = over(layer, color);
    return color;
  };
  return [...document.querySelectorAll('button')].filter((b) => b.offsetParent !== null && !b.disabled).map((b) => {
    const bg = background(b);
    const fg = over(parse(getComputedStyle(b).color), bg);
    const [hi, lo] = [lum(fg), lum(bg)].sort((x, y) => y - x);
    return {name: b.textContent.trim(), ratio: (hi + 0.05) / (lo + 0.05)};
  });
}
"""


def test_a_small_phone_has_the_approve_button_on_its_first_screen(served: Served, browser, shots: Shots):
    """A high-risk payment's card is taller than a small phone's screen: opened, or arriving
    after a send, the card is scrolled so that its Approve button is on the screen (found by a
    probe: it was below the fold)."""
    paused_session(served, PAYMENT, app="pay", agent="paymentsAgent")
    page = browser.new_page()
    page.set_viewport_size({"width": 375, "height": 667})

    def approve_on_screen(page: Page) -> bool:
        # on the screen (to the pixel), and what a tap at its middle reaches: nothing covers it
        return page.get_by_role("button", name="Approve", exact=True).first.evaluate(
            "e => { const r = e.getBoundingClientRect();"
            " return r.top >= 0 && r.bottom <= innerHeight + 1"
            " && e.contains(document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2)); }"
        )

    open_console(page, served, app="pay")
    page.locator("#inbox .session-link").click()
    expect(page.locator(".card")).to_be_visible()
    page.wait_for_function("() => !!document.querySelector('.card .btn-approve')")
    page.wait_for_timeout(300)  # the scroll is smooth on some engines
    assert approve_on_screen(page)
    shots(page, "opened")
    page = browser.new_page()  # a new conversation, on the console's first page
    page.set_viewport_size({"width": 375, "height": 667})
    open_console(page, served, app="pay")
    send(page, PAYMENT.replace("2024-117", "2024-118"))
    expect(page.locator(".card").last).to_be_visible()
    page.wait_for_timeout(300)
    assert approve_on_screen(page)
    shots(page, "arrived")


def test_every_button_has_enough_contrast_in_both_color_schemes(served: Served, browser, shots: Shots):
    page = browser.new_page()
    page.goto(served.url + "/pay/console/")
    seen: dict[str, float] = {}

    def check(state: str) -> None:
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme, reduced_motion="reduce")
            measured = page.evaluate(CONTRAST)
            assert measured, state
            for button in measured:
                assert button["ratio"] >= 4.5, (
                    f"{state}, {scheme}: {button['name']!r} has contrast {button['ratio']:.2f}"
                )
                seen[button["name"]] = min(seen.get(button["name"], 99), button["ratio"])
            shots(page, f"{state}-{scheme}")

    # the sign-in form shows once the console has asked the server how to sign in (/v1/console/sign-in)
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    check("sign-in")
    page.get_by_label("Bearer token").fill("alice-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#feed-state")).to_have_text("live")
    send(page, PAYMENT)
    card = page.locator(".card")
    expect(card).to_have_attribute("data-state", "open")
    check("card")
    card.get_by_role("button", name="Approve").click()
    check("confirm")
    card.get_by_role("button", name="Back").click()
    card.get_by_role("button", name="Deny").click()
    check("deny")
    card.get_by_role("button", name="Back").click()
    card.get_by_role("button", name="Edit input").click()
    check("edit")
    card.get_by_role("button", name="Back").click()
    page.get_by_role("button", name="Cancel open pauses").click()
    check("cancel")
    expected = {
        "Sign in",
        "Approve",
        "Edit input…",
        "Deny…",
        "Send",
        "New chat",
        "Sign out",
        "Cancel open pauses…",
        "Hold to approve",
        "Back",
        "Deny",
        "Approve with this input",
        "Dismiss",
        "Cancel it",
        "Keep them",
    }
    assert expected <= set(seen), expected - set(seen)
