"""Approval links end to end: a pause announced with a signed link, the link read by a signed-in
approver, the decision made on the card with the link — once — and every bad link refused with
nothing decided and nothing written."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from pausepoint.errors import DefinitionError
from pausepoint.server import BearerTokens, create_app
from pausepoint.webhooks import ApprovalLinks, SlackApp
from tests.server.reach_harness import CONSOLE, LINK_SECRET, Served, auth, serve_reach, token_of

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


@pytest.fixture
def served(tmp_path: Any) -> Iterator[Served]:
    with serve_reach(tmp_path) as served:
        yield served


@pytest.fixture
async def http() -> Any:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


async def paused(served: Served, http: httpx.AsyncClient, text: str = "Transfer $700 to savings") -> tuple:
    """A new session paused on ``text``: its id, its pause (as the REST API lists it) and the
    token of the link it was announced with."""
    body = await served.ask(http, text)
    [pause] = body["interrupts"]
    return body["session_id"], pause, token_of(await served.link_of(body["session_id"], pause["pause_id"]))


def answer_url(served: Served, session_id: str, pause: dict, action: str = "approve") -> str:
    return f"{served.session(session_id)}/interrupts/{pause['ref']}/{action}"


async def test_a_link_shows_its_card_and_a_confirmed_decision_through_it_is_made_once(served, http):
    session_id, pause, token = await paused(served, http)
    [listed], trail = await served.state(http, session_id)

    read = await http.get(f"{served.base}/v1/links/{token}", headers=auth("alice"))
    assert read.status_code == 200, read.text
    shown = read.json()
    assert (shown["state"], shown["agent"], shown["session_id"]) == ("open", "treasury", session_id)
    assert shown["pause"] == listed  # exactly as GET .../interrupts lists it, with its view
    assert shown["pause"]["view"]["title"] == "Transfer $700.00 to savings"
    assert "waits for a decision" in shown["message"] and "treasury" in shown["message"]
    # Reading it (as often as a mail scanner likes) decides nothing and writes nothing.
    for _ in range(3):
        assert (await http.get(f"{served.base}/v1/links/{token}", headers=auth("alice"))).status_code == 200
    assert served.ledger == [] and await served.state(http, session_id) == ([listed], trail)

    decided = await http.post(
        answer_url(served, session_id, pause),
        json={"pause_id": pause["pause_id"], "link": token},
        headers=auth("alice"),
    )
    assert decided.status_code == 200, decided.text
    assert decided.json()["finish_reason"] == "stop"
    assert served.ledger == ["transfer 700->savings"]
    entry = (await served.state(http, session_id))[1][-1]
    assert (entry["decision"], entry["principal"], entry["via"]) == ("approve", "alice", "link")
    assert entry["pause_id"] == pause["pause_id"] and entry["view"]["title"] == "Transfer $700.00 to savings"

    again = await http.get(f"{served.base}/v1/links/{token}", headers=auth("bob"))
    assert again.json()["state"] == "used"
    assert "Approved by alice via an approval link" in again.json()["message"]
    before = await served.state(http, session_id)
    for who, action in (("bob", "approve"), ("alice", "deny")):
        refused = await http.post(
            answer_url(served, session_id, pause, action), json={"link": token}, headers=auth(who)
        )
        assert (refused.status_code, refused.json()["error"]["code"]) == (409, "link_used")
    assert served.ledger == ["transfer 700->savings"] and await served.state(http, session_id) == before


async def test_reading_a_link_needs_credentials_and_the_right_to_answer_its_session(served, http):
    session_id, _, token = await paused(served, http)
    assert (await http.get(f"{served.base}/v1/links/{token}")).status_code == 401
    # eve cannot see dave's session: the link is the 404 of a session she cannot see
    as_eve = await http.get(f"{served.base}/v1/links/{token}", headers=auth("eve"))
    unseen = await http.get(served.session(session_id), headers=auth("eve"))
    assert as_eve.status_code == unseen.status_code == 404
    assert as_eve.json()["error"]["code"] == unseen.json()["error"]["code"] == "session_not_found"
    # the owner may answer their own session (and separation of duties refuses the approval itself)
    assert (await http.get(f"{served.base}/v1/links/{token}", headers=auth("dave"))).json()["state"] == "open"


async def test_forged_altered_and_malformed_links_are_refused_and_decide_nothing(served, http):
    session_id, pause, token = await paused(served, http)
    before = await served.state(http, session_id)
    payload, mac = token.split(".")
    fields = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    fields[-1] += 10**6  # a later expiry, signed by nobody
    longer = base64.urlsafe_b64encode(json.dumps(fields, separators=(",", ":")).encode()).rstrip(b"=").decode()
    assert fields[:5] == ["v1", "treasury", session_id, pause["ref"], pause["pause_id"]]
    assert signed(LINK_SECRET, payload) == mac  # the format docs/operating.md gives
    bad = {
        "altered payload": f"{longer}.{mac}",
        "altered signature": f"{payload}.{mac[:-2]}{'AA' if mac[-2:] != 'AA' else 'BB'}",
        "another server's secret": f"{longer}.{signed('another-secret-0123456789', longer)}",
        "the signature's last bytes spelled another way": f"{payload}.{mac[:-1]}{_respelled(mac[-1])}",
        "cut short": token[:-5],
        "a slash added, as a mail client may": f"{token}/",
        "a slash inside": f"{payload}/{mac}",
        "no signature": payload,
        "not base64": "%%%.%%%",
        "too long": "A" * 3000 + ".B",
    }
    for why, forged in bad.items():
        read = await http.get(f"{served.base}/v1/links/{forged}", headers=auth("alice"))
        # an invalid link, whatever it holds (found by a probe: a "/" in it was "no such route")
        assert (read.status_code, read.json()["error"]["code"]) == (400, "invalid_link"), why
        used = await http.post(answer_url(served, session_id, pause), json={"link": forged}, headers=auth("alice"))
        assert (used.status_code, used.json()["error"]["code"]) == (400, "invalid_link"), why
    for not_a_string in (5, ["x"], {"t": token}):
        used = await http.post(
            answer_url(served, session_id, pause), json={"link": not_a_string}, headers=auth("alice")
        )
        assert (used.status_code, used.json()["error"]["code"]) == (400, "invalid_request"), not_a_string
    assert served.ledger == [] and await served.state(http, session_id) == before
    # signed with the server's secret, the same altered payload is a link (a later expiry): the
    # signature is all that stood in the way
    read = await http.get(f"{served.base}/v1/links/{longer}.{signed(LINK_SECRET, longer)}", headers=auth("alice"))
    assert read.json()["state"] == "open"
    # signed, but holding what no pausepoint writes: refused as unreadable, never a 500 (found by
    # a probe: an expiry before year 1 raised OverflowError) nor blamed on "a newer version"
    for odd in (-(10**20), 10**20, 1.5, None):
        strange = base64.urlsafe_b64encode(json.dumps([*fields[:5], odd]).encode()).rstrip(b"=").decode()
        link = f"{strange}.{signed(LINK_SECRET, strange)}"
        for request in (
            http.get(f"{served.base}/v1/links/{link}", headers=auth("alice")),
            http.post(answer_url(served, session_id, pause), json={"link": link}, headers=auth("alice")),
        ):
            refused = await request
            assert (refused.status_code, refused.json()["error"]["code"]) == (400, "invalid_link"), odd
            assert "does not write (another version's, or damaged)" in refused.text
    assert served.ledger == [] and await served.state(http, session_id) == before


_BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _respelled(last: str) -> str:
    """Another character that base64url decodes to the same bytes as ``last``, the last of a
    32-byte MAC's 43 characters (its two low bits are padding)."""
    return _BASE64URL[_BASE64URL.index(last) ^ 1]


async def test_a_retried_link_answer_with_its_idempotency_key_gets_its_first_outcome(served, http):
    session_id, pause, token = await paused(served, http)
    url, body = answer_url(served, session_id, pause), {"pause_id": pause["pause_id"], "link": token}
    keyed = {**auth("alice"), "Idempotency-Key": "decide-once-1"}
    first = await http.post(url, json=body, headers=keyed)
    assert first.status_code == 200, first.text
    before = await served.state(http, session_id)
    again = await http.post(url, json=body, headers=keyed)  # the response was lost: the person retries
    assert again.status_code == 200, again.text
    assert again.json() == first.json()
    # the key replays only that request: without it, or for another person, the link is used
    plain = await http.post(url, json=body, headers=auth("alice"))
    assert (plain.status_code, plain.json()["error"]["code"]) == (409, "link_used")
    other = await http.post(url, json=body, headers={**auth("bob"), "Idempotency-Key": "decide-once-1"})
    assert other.status_code == 409, other.text
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert served.ledger == ["transfer 700->savings"] and await served.state(http, session_id) == before


def signed(secret: str, payload: str) -> str:
    """A link's signature: base64url(HMAC-SHA256(secret, "pausepoint-link." + payload))."""
    mac = hmac.new(secret.encode(), b"pausepoint-link." + payload.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


async def test_a_link_decides_only_its_own_pause(served, http):
    first, first_pause, first_token = await paused(served, http, "Transfer $700 to savings")
    second, second_pause, second_token = await paused(served, http, "Transfer $20 to bob")
    before = (await served.state(http, first), await served.state(http, second))
    # the link of session 1 carried into an answer in session 2 (cross-session), and the reverse
    for session_id, pause, token in ((second, second_pause, first_token), (first, first_pause, second_token)):
        for action in ("approve", "deny", "respond", "restart"):
            refused = await http.post(
                answer_url(served, session_id, pause, action), json={"link": token}, headers=auth("alice")
            )
            assert (refused.status_code, refused.json()["error"]["code"]) == (400, "invalid_link"), action
    # its own session, but a pause_id that is not the link's
    refused = await http.post(
        answer_url(served, first, first_pause), json={"link": first_token, "pause_id": "0" * 24}, headers=auth("alice")
    )
    assert (refused.status_code, refused.json()["error"]["code"]) == (400, "invalid_link")
    assert served.ledger == [] and (await served.state(http, first), await served.state(http, second)) == before
    # the link still works for its own pause: nothing was used up by the refusals
    ok = await http.post(
        answer_url(served, second, second_pause, "deny"), json={"link": second_token}, headers=auth("bob")
    )
    assert ok.status_code == 200 and served.ledger == []
    entry = (await served.state(http, second))[1][-1]
    assert (entry["decision"], entry["principal"], entry["via"]) == ("deny", "bob", "link")


async def test_an_expired_link_says_so_and_decides_nothing_while_the_pause_is_still_answerable(served, http):
    session_id, pause, token = await paused(served, http)
    before = await served.state(http, session_id)
    served.reach.clock.advance(timedelta(minutes=11))  # links last ten minutes, the pause an hour
    read = (await http.get(f"{served.base}/v1/links/{token}", headers=auth("alice"))).json()
    assert read["state"] == "expired" and "This link to “Transfer $700.00 to savings” expired" in read["message"]
    refused = await http.post(answer_url(served, session_id, pause), json={"link": token}, headers=auth("alice"))
    assert (refused.status_code, refused.json()["error"]["code"]) == (409, "link_expired")
    assert served.ledger == [] and await served.state(http, session_id) == before
    # without the link, from the inbox, the pause is still decided as usual
    ok = await http.post(
        answer_url(served, session_id, pause), json={"pause_id": pause["pause_id"]}, headers=auth("carol")
    )
    assert ok.status_code == 200 and served.ledger == ["transfer 700->savings"]


async def test_a_link_to_a_pause_its_expiry_policy_answered_says_so(served, http):
    session_id, pause, token = await paused(served, http)
    served.reach.clock.advance(timedelta(minutes=61))  # past the pause's hour: the server's sweep denies it
    entries: list = []
    for _ in range(300):
        entries = (await served.state(http, session_id))[1]
        if entries[-1]["decision"] == "expire":
            break
        await asyncio.sleep(0.05)
    assert entries[-1]["decision"] == "expire"
    read = (await http.get(f"{served.base}/v1/links/{token}", headers=auth("alice"))).json()
    assert read["state"] == "expired" and "expired unanswered at" in read["message"]
    before = await served.state(http, session_id)
    refused = await http.post(answer_url(served, session_id, pause), json={"link": token}, headers=auth("alice"))
    assert (refused.status_code, refused.json()["error"]["code"]) == (409, "link_expired")
    assert served.ledger == [] and await served.state(http, session_id) == before


async def test_a_link_to_a_call_that_paused_again_is_superseded(served, http):
    session_id, pause, token = await paused(served, http, "Deploy web")
    restarted = await http.post(
        answer_url(served, session_id, pause, "restart"),
        json={"pause_id": pause["pause_id"], "resumed_metadata": {}},
        headers=auth("bob"),
    )
    assert restarted.status_code == 200 and restarted.json()["finish_reason"] == "interrupted"
    [again] = restarted.json()["interrupts"]
    assert again["ref"] == pause["ref"] and again["pause_id"] != pause["pause_id"]
    read = (await http.get(f"{served.base}/v1/links/{token}", headers=auth("alice"))).json()
    assert read["state"] == "superseded" and read["pause"]["pause_id"] == pause["pause_id"]
    assert "Run again by bob via the API" in read["message"] and "asked again" in read["message"]
    assert read["message"].endswith("The new request is in your inbox; nothing was decided here.")
    before = await served.state(http, session_id)
    refused = await http.post(answer_url(served, session_id, pause), json={"link": token}, headers=auth("alice"))
    assert (refused.status_code, refused.json()["error"]["code"]) == (409, "link_superseded")
    assert served.ledger == [] and await served.state(http, session_id) == before
    # the new pause has a link of its own, and it works
    fresh = token_of(await served.link_of(session_id, again["pause_id"]))
    assert fresh != token
    ok = await http.post(answer_url(served, session_id, again), json={"link": fresh}, headers=auth("alice"))
    assert ok.status_code == 200 and served.ledger == ["deploy web"]


async def test_a_link_whose_own_answer_made_the_call_ask_again_does_not_say_nothing_was_decided(served, http):
    """Found by a probe: after a person's answer through the link made the call pause again, the
    link's page (and GET /v1/links) told them "nothing was decided here"."""
    session_id, pause, token = await paused(served, http, "Deploy web")
    restarted = await http.post(
        answer_url(served, session_id, pause, "restart"),
        json={"pause_id": pause["pause_id"], "resumed_metadata": {}, "link": token},
        headers=auth("alice"),
    )
    assert restarted.status_code == 200 and restarted.json()["finish_reason"] == "interrupted", restarted.text
    read = (await http.get(f"{served.base}/v1/links/{token}", headers=auth("alice"))).json()
    assert read["state"] == "superseded"
    assert "Run again by alice via an approval link" in read["message"]
    assert read["message"].endswith("the agent asked again. The new request is in your inbox.")


async def test_a_link_answered_elsewhere_says_who_decided_through_what(served, http):
    session_id, pause, token = await paused(served, http)
    ok = await http.post(answer_url(served, session_id, pause, "deny"), json={"reason": "no"}, headers=auth("carol"))
    assert ok.status_code == 200
    read = (await http.get(f"{served.base}/v1/links/{token}", headers=auth("alice"))).json()
    assert read["state"] == "used" and "Denied by carol via the API" in read["message"]


async def test_a_link_to_a_pause_a_quorum_decided_names_every_approver(served, http):
    """Found by a probe: it named the last approver alone ("Approved by bob via an approval link")."""
    session_id, pause, token = await paused(served, http, "Pay $90 to acme")
    for who in ("alice", "bob"):
        ok = await http.post(answer_url(served, session_id, pause), json={"link": token}, headers=auth(who))
        assert ok.status_code == 200, ok.text
    read = (await http.get(f"{served.base}/v1/links/{token}", headers=auth("carol"))).json()
    assert read["state"] == "used" and served.ledger == ["pay 90->acme"]
    assert "Approved by bob via an approval link" in read["message"] and "(2 approvals: alice, bob)" in read["message"]
    # the pause it shows tells the same story (found by a probe: "1 of 2 approvals", alice alone)
    assert read["pause"]["approval"]["approved_by"] == ["alice", "bob"]
    assert read["pause"]["view"]["approval"]["progress"].startswith("2 of 2 approvals")


async def test_the_approval_rules_hold_through_a_link(served, http):
    session_id, pause, token = await paused(served, http)
    before = await served.state(http, session_id)
    # dave asked for the transfer (separation of duties); mallory may answer the session but is not in treasury
    for who in ("dave", "mallory"):
        refused = await http.post(answer_url(served, session_id, pause), json={"link": token}, headers=auth(who))
        assert (refused.status_code, refused.json()["error"]["code"]) == (403, "approval_forbidden"), who
    assert served.ledger == [] and await served.state(http, session_id) == before


async def test_links_are_in_the_json_payload_and_identical_on_every_attempt(served, http):
    session_id, _, token = await paused(served, http)
    [received] = [r for r in await served.hooks.wait_for(1) if r.json["session_id"] == session_id]
    assert received.json["link"] == f"{CONSOLE}/#link={token}"
    assert LINK_SECRET not in received.body.decode()  # the token is all a URL carries


def test_link_settings_are_checked_when_the_app_is_made():
    from examples import payments

    tokens = BearerTokens({"t": "alice"})
    for bad in (
        lambda: ApprovalLinks("short", CONSOLE),
        lambda: ApprovalLinks(LINK_SECRET, "ftp://example.com"),
        lambda: ApprovalLinks(LINK_SECRET, CONSOLE + "?token=x"),
        lambda: ApprovalLinks(LINK_SECRET, CONSOLE, ttl=timedelta(0)),
        lambda: create_app(payments.ai, auth=tokens, links="secret"),  # type: ignore[arg-type]
        lambda: create_app(payments.ai, auth=tokens, slack=SlackApp("s", users={})),  # buttons need links
    ):
        with pytest.raises(DefinitionError):
            bad()
    assert "secret" not in repr(ApprovalLinks(LINK_SECRET, CONSOLE)).replace("ApprovalLinks", "")
    assert LINK_SECRET not in repr(ApprovalLinks(LINK_SECRET, CONSOLE))
