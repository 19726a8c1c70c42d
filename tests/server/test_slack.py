"""Slack end to end, against a local server that speaks Slack's side of the wire: a pause posted
as a Block Kit card, the Approve / Deny buttons' callbacks signed as Slack signs them, the
decision made through the approval rules once, and the card updated in place for everyone.
Replayed, forged, expired, cross-tenant and malformed callbacks decide nothing and write nothing."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode

import httpx
import pytest

from pausepoint.errors import DefinitionError
from pausepoint.webhooks import SlackApp
from tests.server.reach_harness import CONSOLE, SLACK_SECRET, Served, serve_reach, slack_headers, write_artifact

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


@pytest.fixture
def served(tmp_path: Any) -> Iterator[Served]:
    with serve_reach(tmp_path) as served:
        yield served


@pytest.fixture
async def http() -> Any:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


async def card(served: Served, http: httpx.AsyncClient, text: str = "Transfer $700 to savings") -> tuple:
    """A new session paused on ``text``, its pause, and the Slack card it was announced with."""
    body = await served.ask(http, text)
    [pause] = body["interrupts"]
    for count in range(1, 50):
        for message in await served.slack.wait("messages", count):
            if _named(message) == [body["session_id"], pause["pause_id"]]:
                return body["session_id"], pause, message
    raise AssertionError("no Slack card came")


def _named(message: dict) -> list[str]:
    """The session and the pause a card's buttons name (its link's payload, base64url JSON)."""
    [buttons] = [b for b in message["blocks"] if b["type"] == "actions"]
    payload = next(e["value"] for e in buttons["elements"] if "value" in e).split(".")[0]
    fields = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return [fields[2], fields[4]]


async def press(served: Served, http: httpx.AsyncClient, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return await http.post(f"{served.base}/v1/slack/actions", content=body, headers=headers)


async def responses_after(served: Served, seen: int, count: int = 1) -> list[dict]:
    """The ``count`` posts to a response_url after the first ``seen``."""
    return (await served.slack.wait("responses", seen + count))[seen:]


async def test_a_pause_is_a_card_whose_approve_button_decides_once_and_updates_the_card(served, http):
    session_id, pause, message = await card(served, http)
    write_artifact("slack-pause-message.json", message)
    blocks = {b["type"]: b for b in message["blocks"]}
    assert blocks["header"]["text"]["text"] == "Transfer $700.00 to savings"
    assert message["text"] == "treasury asks for a decision: Transfer $700.00 to savings"
    fields = [f["text"] for f in blocks["section"]["fields"]]
    assert fields == ["*Amount*\n700.00", "*To account*\nsavings"]
    context = " ".join(e["text"] for b in message["blocks"] if b["type"] == "context" for e in b["elements"])
    assert ":red_circle: High risk" in context and "asked by dave" in context and "Needs approval" in context
    assert "Expires <!date^" in context and "It is denied automatically" in context
    approve, deny, opener = blocks["actions"]["elements"]
    assert (approve["action_id"], approve["style"], deny["action_id"], deny["style"]) == (
        "pausepoint.approve", "primary", "pausepoint.deny", "danger",
    )  # fmt: skip
    assert approve["confirm"]["confirm"]["text"] == "Yes, approve" and deny["confirm"]["deny"]["text"] == "Back"
    link = await served.link_of(session_id, pause["pause_id"])
    assert opener["url"] == link and approve["value"] == deny["value"] == link.split("#link=")[1]

    body, headers = served.slack.callback(message, "approve", user="UALICE")
    reply = await press(served, http, body, headers)
    assert (reply.status_code, reply.json()) == (200, {"ok": True})
    [update] = await responses_after(served, 0)
    write_artifact("slack-approved-message.json", update)
    assert update["replace_original"] is True
    assert not [b for b in update["blocks"] if b["type"] == "actions"]  # decided: no buttons left
    assert "Approved by alice via Slack" in update["blocks"][-1]["text"]["text"]
    assert update["blocks"][0]["text"]["text"] == "Transfer $700.00 to savings"
    small_print = [e["text"] for b in update["blocks"] if b["type"] == "context" for e in b["elements"]]
    assert small_print == [":red_circle: High risk · *treasury* · asked by dave"]  # decided: it waits for nobody
    assert served.ledger == ["transfer 700->savings"]
    entry = (await served.state(http, session_id))[1][-1]
    assert (entry["decision"], entry["principal"], entry["via"]) == ("approve", "alice", "slack")
    audit = await served.state(http, session_id)

    # the same callback again (Slack's retry, a double click, a replay within the five minutes)
    again = await press(served, http, body, headers)
    assert again.status_code == 200 and again.json()["error"]["code"] == "link_used"
    stale, told = await responses_after(served, 1, 2)
    assert "Approved by alice via Slack" in stale["blocks"][-1]["text"]["text"]
    assert told["response_type"] == "ephemeral" and "Nothing was decided" in told["text"]
    # bob presses Deny on the same (now decided) card
    body, headers = served.slack.callback(message, "deny", user="UBOB")
    assert (await press(served, http, body, headers)).json()["error"]["code"] == "link_used"
    assert served.ledger == ["transfer 700->savings"] and await served.state(http, session_id) == audit


async def test_deny_from_slack_tells_the_agent_and_the_card(served, http):
    session_id, _, message = await card(served, http)
    body, headers = served.slack.callback(message, "deny", user="UCAROL")
    assert (await press(served, http, body, headers)).json() == {"ok": True}
    [update] = await responses_after(served, 0)
    assert update["blocks"][-1]["text"]["text"].startswith(":no_entry: *Denied by carol via Slack")
    entry = (await served.state(http, session_id))[1][-1]
    assert (entry["decision"], entry["principal"], entry["via"]) == ("deny", "carol", "slack")
    assert served.ledger == []


async def test_a_card_whose_pause_was_cancelled_is_marked_as_the_one_line_message_marks_a_cancel(served, http):
    """Found by a probe: pressed after a cancel, the card was brought up to date with the
    approval's tick (":white_check_mark: *Cancelled by dave..."), the one-line message marked it
    ":no_entry_sign:"."""
    session_id, _, message = await card(served, http)
    cancelled = await http.post(
        served.session(session_id) + "/cancel",
        json={"reason": "changed my mind"},
        headers={"Authorization": "Bearer dave-token"},
    )
    assert cancelled.status_code == 200, cancelled.text
    body, headers = served.slack.callback(message, "approve", user="UALICE")
    assert (await press(served, http, body, headers)).status_code == 200
    update = next(r for r in await responses_after(served, 0, 2) if r.get("replace_original"))
    assert update["blocks"][-1]["text"]["text"].startswith(":no_entry_sign: *Cancelled by dave")
    assert served.ledger == []


async def test_a_quorum_counts_each_slack_approval_and_runs_once(served, http):
    session_id, _, message = await card(served, http, "Pay $90 to acme")
    body, headers = served.slack.callback(message, "approve", user="UALICE")
    assert (await press(served, http, body, headers)).json() == {"ok": True}
    [first] = await responses_after(served, 0)
    write_artifact("slack-quorum-message.json", first)
    context = " ".join(e["text"] for b in first["blocks"] if b["type"] == "context" for e in b["elements"])
    assert "1 of 2 approvals (alice)" in context
    assert [b for b in first["blocks"] if b["type"] == "actions"], "still open: the buttons stay"
    assert served.ledger == []
    # alice again: her approval is counted already
    assert (await press(served, http, *served.slack.callback(message, "approve", user="UALICE"))).json() == {"ok": True}
    [told] = await responses_after(served, 1)
    assert told["response_type"] == "ephemeral" and "already" in told["text"]
    body, headers = served.slack.callback(message, "approve", user="UBOB")
    assert (await press(served, http, body, headers)).json() == {"ok": True}
    [last] = await responses_after(served, 2)
    assert "Approved by bob via Slack" in last["blocks"][-1]["text"]["text"]
    context = " ".join(e["text"] for b in last["blocks"] if b["type"] == "context" for e in b["elements"])
    assert "approved before by alice" in context and "of 2 approvals" not in context  # not "1 of 2": it ran on 2
    write_artifact("slack-quorum-approved-message.json", last)
    assert served.ledger == ["pay 90->acme"]
    decisions = [(e["decision"], e["principal"], e["via"]) for e in (await served.state(http, session_id))[1][1:]]
    assert decisions == [("approve", "alice", "slack"), ("approve", "bob", "slack")]


async def test_slack_users_who_may_not_decide_are_told_why_and_decide_nothing(served, http):
    session_id, _, message = await card(served, http)
    before = await served.state(http, session_id)
    seen = 0
    for user, code, words in (
        ("UNOBODY", "slack_user_unknown", "not linked to a pausepoint approver"),
        ("UEVE", "slack_not_allowed", "eve may not answer this request"),  # cannot see dave's session
    ):
        reply = await press(served, http, *served.slack.callback(message, "approve", user=user))
        assert (reply.status_code, reply.json()["ok"], reply.json()["error"]["code"]) == (200, False, code)
        [told] = await responses_after(served, seen)
        seen += 1
        assert told == {"response_type": "ephemeral", "replace_original": False, "text": told["text"]}
        assert words in told["text"], told
    # mallory may answer the session but holds no treasury role; dave asked for it (separation of duties)
    for user, words in (("UMALLORY", "mallory"), ("UDAVE", "dave")):
        assert (await press(served, http, *served.slack.callback(message, "approve", user=user))).json() == {"ok": True}
        [told] = await responses_after(served, seen)
        seen += 1
        assert told["response_type"] == "ephemeral" and told["text"].startswith("Nothing was decided"), told
        assert words in told["text"]
    assert served.ledger == [] and await served.state(http, session_id) == before


async def test_forged_replayed_and_cross_tenant_callbacks_are_refused_before_anything_is_read(served, http):
    session_id, _, message = await card(served, http)
    before = await served.state(http, session_id)
    body, headers = served.slack.callback(message, "approve", user="UALICE")
    refusals = {
        "signed with another secret": served.slack.callback(message, "approve", secret="not-the-secret"),
        "replayed six minutes later": served.slack.callback(message, "approve", stamp=int(time.time()) - 360),
        "from the future": served.slack.callback(message, "approve", stamp=int(time.time()) + 360),
        "body altered after signing": (body.replace(b"UALICE", b"UCAROL"), headers),
        "no signature": (body, {k: v for k, v in headers.items() if k != "X-Slack-Signature"}),
        "no timestamp": (body, {k: v for k, v in headers.items() if k != "X-Slack-Request-Timestamp"}),
        "a timestamp that is no number": (body, {**headers, "X-Slack-Request-Timestamp": "1e9"}),
        "a signature of another scheme": (body, {**headers, "X-Slack-Signature": "v1=" + "0" * 64}),
    }
    for why, (forged, forged_headers) in refusals.items():
        reply = await press(served, http, forged, forged_headers)
        assert (reply.status_code, reply.json()["error"]["code"]) == (401, "slack_signature"), why
    # signed by Slack, but from another workspace
    reply = await press(served, http, *served.slack.callback(message, "approve", team="T0OTHER"))
    assert (reply.status_code, reply.json()["error"]["code"]) == (403, "slack_team_refused")
    # signed by Slack, with a button value that is no link this server signed
    token = message["blocks"][-1]["elements"][0]["value"]
    for value in (token[:-4] + "AAAA", "x", ""):
        reply = await press(served, http, *served.slack.callback(message, "approve", value=value))
        assert reply.status_code == 400, value
    assert served.ledger == [] and await served.state(http, session_id) == before
    assert served.slack.responses == []  # nobody was even told anything: nothing was taken


async def test_malformed_callbacks_are_typed_refusals(served, http):
    _, _, message = await card(served, http)
    good_payload = served.slack.callback(message)[0]
    for why, body in {
        "not a form": b"{}",
        "no payload": urlencode({"other": "x"}).encode(),
        "payload not JSON": urlencode({"payload": "{"}).encode(),
        "payload a list": urlencode({"payload": "[]"}).encode(),
        "not block_actions": good_payload.replace(b"block_actions", b"view_submission"),
        "no actions": good_payload.replace(b"%22actions%22", b"%22nothing%22"),
        "another app's button": good_payload.replace(b"pausepoint.approve", b"other.approve"),
        "a response_url that is not Slack's": good_payload.replace(b"http%3A%2F%2F127.0.0.1", b"http%3A%2F%2Fevil"),
        "not UTF-8": b"payload=\xff\xfe",
        "nested too deep to parse": urlencode({"payload": "[" * 5000 + "]" * 5000}).encode(),
        # found by a probe: the last of two users was taken as the one deciding (every other surface
        # refuses a name given twice), and a lone surrogate passed, failing the reply with a traceback
        "a name given twice": edited(good_payload, '{"type"', '{"user": {"id": "UBOB"}, "type"'),
        "a lone surrogate": edited(good_payload, '"id": "UALICE"', '"id": "\\ud800"'),
    }.items():
        reply = await press(served, http, body, slack_headers(body))
        assert reply.status_code in (400, 401), why
        assert reply.json()["error"]["code"] in ("invalid_request", "slack_signature"), why
        if why != "not UTF-8":
            assert (reply.status_code, reply.json()["error"]["code"]) == (400, "invalid_request"), why
    assert served.ledger == []


def edited(body: bytes, old: str, new: str) -> bytes:
    """A callback's form body with ``old`` replaced by ``new`` in its payload's JSON text."""
    [text] = parse_qs(body.decode())["payload"]
    assert old in text
    return urlencode({"payload": text.replace(old, new, 1)}).encode()


async def test_an_expired_link_in_a_button_is_refused_and_the_card_says_so(served, http):
    _, _, message = await card(served, http)
    served.reach.clock.advance(timedelta(minutes=11))
    reply = await press(served, http, *served.slack.callback(message, "approve"))
    assert reply.json()["error"]["code"] == "link_expired"
    update, told = await responses_after(served, 0, 2)
    assert update["replace_original"] is True and "expired" in update["blocks"][-1]["text"]["text"]
    assert told["response_type"] == "ephemeral"
    assert served.ledger == []


async def test_the_open_button_is_acknowledged_and_decides_nothing(served, http):
    session_id, _, message = await card(served, http)
    before = await served.state(http, session_id)
    reply = await press(served, http, *served.slack.callback(message, "open"))
    assert (reply.status_code, reply.json()) == (200, {"ok": True})
    assert served.ledger == [] and await served.state(http, session_id) == before
    assert message["blocks"][-1]["elements"][-1]["url"].startswith(CONSOLE + "/#link=")


async def test_what_a_model_wrote_cannot_mention_anyone_in_slack(served, http):
    _, _, message = await card(served, http, "Transfer $5 to <!channel>")
    fields = [f["text"] for b in message["blocks"] if b["type"] == "section" for f in b.get("fields", [])]
    assert "*To account*\n&lt;!channel&gt;" in fields
    assert "<!channel>" not in str([b for b in message["blocks"] if b["type"] != "header"])


def test_slack_settings_are_checked():
    for bad in (
        lambda: SlackApp("", users={}),
        lambda: SlackApp(SLACK_SECRET, users="alice"),  # type: ignore[arg-type]
        lambda: SlackApp(SLACK_SECRET, users={}, teams="T0"),  # type: ignore[arg-type]
        lambda: SlackApp(SLACK_SECRET, users={}, response_url_prefix="hooks.slack.com"),
        # a principal is "alice", or a tenant's "acme/alice": nothing else names one
        *(lambda v=v: SlackApp(SLACK_SECRET, users={"U1": v}) for v in ("", " alice", "acme/", "/alice", 5, None)),
    ):
        with pytest.raises(DefinitionError):
            bad()
    assert SLACK_SECRET not in repr(SlackApp(SLACK_SECRET, users={"U1": "alice"}))
    assert SlackApp(SLACK_SECRET, users={"U1": "acme/alice", "U2": "alice"}).users == {
        "U1": "acme/alice",
        "U2": "alice",
    }


async def test_a_form_giving_payload_twice_is_refused_in_the_apis_words_and_decides_nothing(served, http):
    """Found by a probe: a signed callback whose form gave ``payload`` twice was refused with
    Python's "too many values to unpack (expected 1)"; which one was meant cannot be known, so it
    is refused as a JSON object's name or a query parameter given twice is."""
    session_id, _, message = await card(served, http)
    before = await served.state(http, session_id)
    approve, deny = served.slack.callback(message, "approve")[0], served.slack.callback(message, "deny")[0]
    for body, said in {
        approve + b"&" + deny: "'payload' is given twice: give it once",
        b"&".join([approve] * 3): "'payload' is given 3 times: give it once",
        urlencode({"other": "x"}).encode(): "it has no 'payload'",
        b"{}": "the body is no form of name=value pairs",
    }.items():
        reply = await press(served, http, body, slack_headers(body))
        error = reply.json()["error"]
        assert (reply.status_code, error["code"]) == (400, "invalid_request"), body[:40]
        assert error["message"].startswith("not a Slack block_actions callback") and said in error["message"]
        assert "unpack" not in error["message"] and "query field" not in error["message"]
    assert served.ledger == [] and await served.state(http, session_id) == before
    assert served.slack.responses == []  # nobody was told anything: nothing was taken
