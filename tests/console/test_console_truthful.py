"""The console says what happened, no more: an edited restart that carried no approval reads
"Edited & run again" (the tool ran again, and here paused again), never "Edited & approved"."""

from __future__ import annotations

import httpx
from playwright.sync_api import expect

from tests.console.conftest import Served, Shots
from tests.console.steps import ALICE, ANSWERS, open_console, paused_session

PAYMENT = "Pay 1250.50 EUR to ACME GmbH (DE89370400440532013000) for invoice 2024-117."


def _restart(served: Served, session_id: str, pause: dict, body: dict) -> dict:
    url = f"{served.url}/pay/v1/agents/paymentsAgent/sessions/{session_id}/interrupts/{pause['ref']}/restart"
    reply = httpx.post(url, json={**body, "pause_id": pause["pause_id"]}, headers=ALICE)
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def test_an_edited_restart_reads_as_approved_only_when_it_carried_the_approval(served: Served, browser, shots: Shots):
    paused = paused_session(served, PAYMENT, app="pay", agent="paymentsAgent")
    session_id = paused["session_id"]
    [pause] = paused["interrupts"]
    edited = {**pause["input"], "amount": "1300"}
    again = _restart(served, session_id, pause, {"replace_input": edited})  # no approval: it pauses again
    assert again["finish_reason"] == "interrupted" and served.paid == []
    [repaused] = again["interrupts"]
    approved = {**edited, "amount": "1350"}
    _restart(served, session_id, repaused, {"replace_input": approved, "resumed_metadata": {"tool_approved": True}})
    assert [p["amount"] for p in served.paid] == [approved["amount"]]

    page = browser.new_page()
    open_console(page, served, app="pay", agent="paymentsAgent", session=session_id)
    # newest first: the approved edit, then the edit that only ran the tool again
    expect(page.locator(ANSWERS + " .badge")).to_have_text(["Edited & approved", "Edited & run again"])
    shots(page, "edited-restarts")


def test_what_the_console_writes_itself_marks_what_a_person_cannot_see(served: Served, browser):
    """The server's views mark bidi, zero-width and other unseen characters (``⟨U+202E⟩``); the
    sentences the console builds from an input or an answer itself — an edited payment's "will be
    sent to", an answer in words, a grant's bounds — do too, and its JSON shows them escaped."""
    page = browser.new_page()
    open_console(page, served)
    base = page.url.split("#")[0]
    seen = page.evaluate(
        """async (base) => {
            const dom = await import(base + "dom.js");
            const effects = await import(base + "effects.js");
            const edited = effects.moneyOfInput(
                {amount: "5", currency: "USD", payee: "savings\\u202e5$ tnuocca\\u202c", iban: "DE89\\u200b3704"},
                {fields: [], title: ""});
            return {
                edited,
                words: dom.plainText({"pay\\u200bee": "a\\u2028b", note: "x\\t\\ty"}),
                json: dom.jsonView({payee: "savings\\u202e5$", "k\\u2066": 1}).textContent,
            };
        }""",
        base,
    )
    assert seen["edited"] == {"amount": "$5.00", "recipient": "savings⟨U+202E⟩5$ tnuocca⟨U+202C⟩",
                              "iban": "DE89⟨U+200B⟩3704"}  # fmt: skip
    assert seen["words"] == "Pay⟨U+200B⟩ee: a⟨U+2028⟩b · Note: x y"
    assert '"savings\\u202e5$"' in seen["json"] and '"k\\u2066"' in seen["json"]
    assert "\u202e" not in seen["json"] and "\u2066" not in seen["json"]
