"""Email end to end: a pause sent through SMTP (aiosmtpd on loopback) as text and HTML telling
what the console's card tells, with the approval link; the link used to decide once; a server
that refuses a message gets it again, with the same Message-ID."""

from __future__ import annotations

import re
from collections.abc import Iterator
from email.message import EmailMessage
from typing import Any

import httpx
import pytest

from pausepoint.errors import DefinitionError
from pausepoint.webhooks import EmailNotifier, Webhook
from tests.server.reach_harness import CONSOLE, Served, auth, serve_reach, token_of

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


@pytest.fixture
async def http() -> Any:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


@pytest.fixture
def served(tmp_path: Any) -> Iterator[Served]:
    with serve_reach(tmp_path) as served:
        yield served


def parts(message: EmailMessage) -> tuple[str, str]:
    """The text and the HTML part of a message."""
    text = message.get_body(("plain",))
    page = message.get_body(("html",))
    assert text is not None and page is not None
    return str(text.get_content()), str(page.get_content())


async def test_a_pause_is_an_email_with_the_card_and_the_link_that_decides_once(served, http):
    body = await served.ask(http)
    session_id, [pause] = body["session_id"], body["interrupts"]
    [message] = await served.mailbox.wait(1)
    text, page = parts(message)
    assert message.get_content_type() == "multipart/alternative"
    assert message["Subject"] == "Decision needed: Transfer $700.00 to savings (treasury, high risk)"
    assert (message["From"], message["To"]) == ("pausepoint@example.com", "treasury@example.com")
    assert message["Auto-Submitted"] == "auto-generated" and message["Pausepoint-Event-Type"] == "pause"
    assert message["Message-ID"] == f"<pausepoint.{message['Pausepoint-Event-Id']}@example.com>"
    for line in (
        "Transfer $700.00 to savings",
        "Money leaves the company.",
        "Amount: 700.00",
        "To account: savings",
        "Risk: high",
        "Asked by: dave",
        "Approval: Needs approval — Waiting for an approval from treasury (alice, bob or carol); not from dave",
        "It is denied automatically, and the agent is told nobody answered in time.",
        "opening the link decides nothing",
    ):
        assert line in text, line
    assert re.search(r"Expires: \d{4}-\d\d-\d\d \d\d:\d\d UTC — ", text)
    [link] = re.findall(re.escape(CONSOLE) + r"/#link=[\w.-]+", text)
    assert link == await served.link_of(session_id, pause["pause_id"])  # the same link every channel carries
    assert f"href='{link}'" in page and "<h2 style='margin:0 0 8px'>Transfer $700.00 to savings</h2>" in page
    assert "<th align='left' style='padding:2px 12px 2px 0'>Amount</th><td>700.00</td>" in page

    # the person opens the link (signed in as bob), reads the card, and approves there
    token = token_of(link)
    shown = (await http.get(f"{served.base}/v1/links/{token}", headers=auth("bob"))).json()
    assert shown["state"] == "open" and shown["pause"]["view"]["title"] in message["Subject"]
    url = f"{served.session(session_id)}/interrupts/{pause['ref']}/approve"
    assert (await http.post(url, json={"link": token}, headers=auth("bob"))).status_code == 200
    assert (await http.post(url, json={"link": token}, headers=auth("carol"))).json()["error"]["code"] == "link_used"
    assert served.ledger == ["transfer 700->savings"]
    entry = (await served.state(http, session_id))[1][-1]
    assert (entry["decision"], entry["principal"], entry["via"]) == ("approve", "bob", "link")
    assert entry["view"]["title"] == "Transfer $700.00 to savings"  # the audit tells the email's story


async def test_what_a_model_wrote_is_escaped_in_the_html(served, http):
    await served.ask(http, "Transfer $5 to <script>alert(1)</script>")
    [message] = await served.mailbox.wait(1)
    text, page = parts(message)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "To account: <script>alert(1)</script>" in text  # plain text is plain


async def test_a_refused_message_is_sent_again_by_the_outbox_with_the_same_message_id(tmp_path, http):
    with serve_reach(tmp_path, refuse_mail=2) as served:
        await served.ask(http)
        [message] = await served.mailbox.wait(1)
    assert len(served.mailbox.attempts) == 3  # two 451s, then taken
    assert message["Pausepoint-Event-Type"] == "pause" and message["Message-ID"].startswith("<pausepoint.")
    # every attempt is the same message: the same Message-ID, the same link (made from the pause alone)
    assert len({m["Message-ID"] for m in served.mailbox.attempts}) == 1
    assert len({parts(m)[0] for m in served.mailbox.attempts}) == 1 and "#link=" in parts(message)[0]


def test_email_settings_are_checked():
    good: dict[str, Any] = {"host": "smtp.example.com", "sender": "pp@example.com", "to": ["desk@example.com"]}
    for bad in (
        {**good, "sender": "pp@example.com\r\nBcc: all@example.com"},  # a header smuggled in
        {**good, "to": ["desk"]},
        {**good, "to": []},
        {**good, "host": "smtp.example.com\r\n"},
        {**good, "port": 0},
        {**good, "security": "maybe"},
        {**good, "security": "none", "username": "u", "password": "p"},  # a password never goes in clear
        {**good, "username": "u"},
    ):
        with pytest.raises(DefinitionError):
            EmailNotifier("mail", **bad)
    # an HTTP webhook's settings, taken and never used before (found by a probe)
    for http_only in ({"url": "https://ops.example.com/hook"}, {"secret": "s3cret"}, {"headers": {"X-Team": "ops"}}):
        with pytest.raises(DefinitionError, match=f"{next(iter(http_only))} is an HTTP webhook's"):
            EmailNotifier("mail", **good, **http_only)
    with pytest.raises(DefinitionError):
        Webhook("mail", "https://example.com", secret="s", format="email")
    notifier = EmailNotifier("mail", **good, username="u", password="hunter2-password")
    assert "hunter2" not in repr(notifier) and notifier.url == "smtp://smtp.example.com:587"
    assert notifier.events == {"pause"} and notifier.to == ("desk@example.com",)
