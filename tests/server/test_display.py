"""How pauses read to a person over REST: the same ``view`` on every surface, audit entries that
say what was decided, a dry-run check of answers, and what the caller may do in a session."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from examples import payments
from pausepoint.server import BearerTokens, OwnerPolicy, create_app
from pausepoint.stores import SessionSummary
from tests.server.conftest import ALICE, BOB
from tests.server.harness import serve_in_thread
from tests.server.test_feed import read_events

TRANSFER_VIEW = {
    "title": "Transfer $700 to savings",
    "summary": "The agent asks before it runs transfer_money.",
    "fields": [
        {"name": "action", "label": "Action", "text": "transfer_money", "description": None},
        {"name": "details", "label": "Details", "text": "Transfer $700 to savings", "description": None},
    ],
    "risk": "high",
    "on_expiry": None,
    "approval": None,  # what an audit entry shows; a pause shows where its approval stands
}


def sse(text: str) -> list[tuple[str, Any]]:
    events, name = [], "message"
    for line in text.splitlines():
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            events.append((name, json.loads(line[5:])))
    return events


async def test_every_surface_shows_a_pause_with_the_same_view(served, http):
    feed: list = []
    connected = asyncio.Event()
    listening = asyncio.create_task(read_events(http, served.bank + "/v1/feed", ALICE, 4, feed, connected))
    await asyncio.wait_for(connected.wait(), 10)
    streamed = await http.post(
        served.bank + "/v1/agents/bankingAgent/sessions",
        json={"message": "Transfer $700 to savings."},
        headers={**ALICE, "Accept": "text/event-stream"},
    )
    events = sse(streamed.text)
    [chunk] = [data for name, data in events if name == "chunk" and data["kind"] == "interrupt"]
    [response] = [data for name, data in events if name == "response"]
    ref, session_id = chunk["interrupt"]["ref"], response["session_id"]
    session = f"{served.bank}/v1/agents/bankingAgent/sessions/{session_id}"
    detail = (await http.get(session, headers=ALICE)).json()
    listed = (await http.get(session + "/interrupts", headers=ALICE)).json()["interrupts"]
    seen = [
        chunk["interrupt"]["view"],
        response["interrupts"][0]["view"],
        detail["interrupts"][0]["view"],
        detail["last_response"]["interrupts"][0]["view"],
        listed[0]["view"],
    ]
    # the yes also approves the transfer it asks about: every surface says so, the same way
    assert [{**view, "approval": None} for view in seen] == [TRANSFER_VIEW] * 5
    assert all(view["approval"] == seen[0]["approval"] for view in seen)
    assert seen[0]["approval"]["offer"] == (
        "A yes also approves one transfer_money call with amount 700.00 and to account savings, within the next "
        "15 minutes."
    )

    approved = await http.post(f"{session}/interrupts/{ref}/approve", headers=ALICE)
    assert approved.status_code == 200, approved.text
    sent, entry, grant, decided = (await http.get(session + "/audit", headers=ALICE)).json()["entries"]
    assert (sent["decision"], sent["principal"], sent["view"]) == ("message", "alice", None)
    assert entry["view"] == TRANSFER_VIEW  # the audit says what was approved, not just "userApproval"
    assert (grant["view"], decided["view"]["title"]) == (None, "Transfer $700.00 to savings")
    assert entry["input"] == {"action": "transfer_money", "details": "Transfer $700 to savings"}
    assert entry["call_ref"] == chunk["call_ref"]  # finds its tool request in the history
    history = (await http.get(session + "/history", headers=ALICE)).json()["messages"]
    assert entry["call_ref"] in [p.get("ref") for m in history for p in m["parts"] if p["kind"] == "tool_request"]

    await asyncio.wait_for(listening, 10)
    assert [name for name, _ in feed] == ["pause", "turn_end", "answer", "grant"]
    assert {**feed[0][1]["interrupt"]["view"], "approval": None} == TRANSFER_VIEW
    assert feed[2][1]["entry"]["view"] == TRANSFER_VIEW


@pytest.fixture
async def pay() -> AsyncIterator[tuple[httpx.AsyncClient, list[dict[str, Any]]]]:
    ledger: list[dict[str, Any]] = []
    ai, _ = payments.build(ledger=ledger)
    app = create_app(ai, auth=BearerTokens({"alice-token": "alice", "bob-token": "bob"}))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        yield http, ledger


PAYMENT = {"amount": "1250.50", "payee": "ACME GmbH", "iban": "DE89370400440532013000", "reference": "INV-117"}
VALIDATE = "/v1/agents/paymentsAgent/tools/pay_invoice/validate"


async def test_validate_checks_a_candidate_input_with_python_regex_patterns_and_reports_each_field(pay):
    http, ledger = pay
    good = await http.post(VALIDATE, json={"input": PAYMENT}, headers=ALICE)
    assert good.status_code == 200
    assert good.json() == {"valid": True, "errors": [], "value": {**PAYMENT, "currency": "EUR"}}

    bad = {**PAYMENT, "iban": "de89 3704", "amount": "-5", "payee": "", "bogus": 1}
    reply = await http.post(VALIDATE, json={"input": bad}, headers=ALICE)
    assert reply.status_code == 200
    body = reply.json()
    assert body["valid"] is False
    by_field = {e["pointer"]: e for e in body["errors"]}
    assert set(by_field) == {"/amount", "/payee", "/iban"}  # extra keys are ignored by the model, as by restart
    assert by_field["/iban"] == {
        "path": ["iban"],
        "pointer": "/iban",
        "message": "This does not have the expected format.",
        "type": "string_pattern_mismatch",
    }
    assert by_field["/amount"]["message"] == "Input should be greater than 0."
    missing = (await http.post(VALIDATE, json={"input": {"amount": 1}}, headers=ALICE)).json()
    assert {e["pointer"]: e["message"] for e in missing["errors"]} == {
        "/payee": "This field is required.",
        "/iban": "This field is required.",
    }
    # not an object: said so, not "a valid dictionary or instance of <a model nobody wrote>" (a probe)
    whole = (await http.post(VALIDATE, json={"input": "x"}, headers=ALICE)).json()
    assert [(e["pointer"], e["message"]) for e in whole["errors"]] == [("", "This should be a JSON object.")]
    assert ledger == []  # a dry run answers nothing


async def test_validate_checks_a_result_against_the_output_type(pay):
    http, _ = pay
    path = "/v1/agents/paymentsAgent/tools/pay_invoice/validate"
    ok = (await http.post(path, json={"output": {"payment_id": "manual-7"}}, headers=ALICE)).json()
    assert ok == {"valid": True, "errors": [], "value": {"payment_id": "manual-7", "status": "sent"}}
    bad = (await http.post(path, json={"output": {"status": "lost"}}, headers=ALICE)).json()
    assert [(e["path"], e["type"]) for e in bad["errors"]] == [
        (["payment_id"], "missing"),
        (["status"], "literal_error"),
    ]


async def test_validate_refuses_what_no_session_keeps_as_an_answer_would(pay):
    """Data a session cannot keep is invalid here too, with its rule as the type and its path;
    the reply is JSON whatever the candidate held (found by a probe: 1e400 came back valid, as
    ``Infinity``, which no JSON parser reads)."""
    http, ledger = pay
    raw = b'{"output": {"payment_id": "m", "note": {"x": 1e400}}}'
    reply = await http.post(VALIDATE, content=raw, headers={**ALICE, "Content-Type": "application/json"})
    assert reply.status_code == 200
    assert reply.json() == {
        "valid": False,
        "errors": [
            {"path": ["note", "x"], "pointer": "/note/x", "message": reply.json()["errors"][0]["message"],
             "type": "finite_number"},
        ],
    }  # fmt: skip
    deep: dict = {"payment_id": "m"}
    for _ in range(100):
        deep = {"d": deep}
    assert (await http.post(VALIDATE, json={"output": deep}, headers=ALICE)).json()["errors"][0]["type"] == "max_depth"
    lone = json.dumps({"input": {**PAYMENT, "reference": "\ud800"}}).encode()  # ASCII: the escape as sent
    alone = (await http.post(VALIDATE, content=lone, headers={**ALICE, "Content-Type": "application/json"})).json()
    assert [(e["path"], e["type"]) for e in alone["errors"]] == [(["reference"], "unpaired_surrogate")]
    assert ledger == []


@pytest.mark.parametrize(
    ("path", "body", "headers", "status", "code"),
    [
        (VALIDATE, {"input": PAYMENT, "output": {}}, ALICE, 400, "invalid_request"),
        (VALIDATE, {}, ALICE, 400, "invalid_request"),
        (VALIDATE, {"inputs": PAYMENT}, ALICE, 400, "invalid_request"),
        (VALIDATE, {"input": PAYMENT}, {}, 401, "unauthenticated"),
        ("/v1/agents/paymentsAgent/tools/nope/validate", {"input": {}}, ALICE, 404, "not_found"),
        ("/v1/agents/nobody/tools/pay_invoice/validate", {"input": {}}, ALICE, 404, "not_found"),
    ],
)
async def test_validate_refusals(pay, path, body, headers, status, code):
    http, _ = pay
    reply = await http.post(path, json=body, headers=headers)
    assert reply.status_code == status and reply.json()["error"]["code"] == code


async def test_what_validate_accepts_an_answer_accepts(pay):
    http, ledger = pay
    body = {"message": "Pay 1250.50 EUR to ACME GmbH (DE00000000000000000000) for INV-117."}
    paused = (await http.post("/v1/agents/paymentsAgent/sessions", json=body, headers=ALICE)).json()
    [pause] = paused["interrupts"]
    assert pause["view"]["title"] == "Pay €1,250.50 to ACME GmbH" and pause["view"]["risk"] == "high"
    assert pause["view"]["on_expiry"].startswith("It is denied automatically")
    assert pause["expires_at"] is not None
    session = f"/v1/agents/paymentsAgent/sessions/{paused['session_id']}"
    wrong = {**PAYMENT, "iban": "DE89-3704"}
    check = (await http.post(VALIDATE, json={"input": wrong}, headers=ALICE)).json()
    refused = await http.post(
        f"{session}/interrupts/{pause['ref']}/approve", json={"replace_input": wrong}, headers=ALICE
    )
    assert check["valid"] is False and refused.status_code == 422
    assert ledger == []
    check = (await http.post(VALIDATE, json={"input": PAYMENT}, headers=ALICE)).json()
    done = await http.post(
        f"{session}/interrupts/{pause['ref']}/approve", json={"replace_input": PAYMENT}, headers=ALICE
    )
    assert check["valid"] is True and done.status_code == 200, done.text
    assert ledger == [{**PAYMENT, "currency": "EUR"}]
    sent, entry = (await http.get(session + "/audit", headers=ALICE)).json()["entries"]
    assert (sent["decision"], sent["principal"], sent["view"]) == ("message", "alice", None)
    assert entry["view"]["title"] == "Pay €1,250.50 to ACME GmbH"  # the pause as it read when answered
    assert entry["input"]["iban"] == "DE00000000000000000000" and entry["replace_input"]["iban"] == PAYMENT["iban"]


class ReadOnlyAuditors(OwnerPolicy):
    """Owners act; ``auditors`` may read every session but act on none."""

    def __init__(self, auditors: set[str]) -> None:
        super().__init__(approvers=auditors)

    def can_answer(self, principal: str, session: SessionSummary) -> bool:
        return session.owner == principal


async def test_a_session_says_what_its_viewer_may_do():
    ai, _ = payments.build()
    app = create_app(
        ai, auth=BearerTokens({"alice-token": "alice", "bob-token": "bob"}), policy=ReadOnlyAuditors({"bob"})
    )
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        body = {"message": "Pay 10 EUR to Bo (DE89370400440532013000)."}
        paused = (await http.post("/v1/agents/paymentsAgent/sessions", json=body, headers=ALICE)).json()
        session = f"/v1/agents/paymentsAgent/sessions/{paused['session_id']}"
        mine = (await http.get(session, headers=ALICE)).json()
        theirs = (await http.get(session, headers=BOB)).json()
        assert (mine["can_send"], mine["can_answer"]) == (True, True)
        assert (theirs["can_send"], theirs["can_answer"]) == (False, False)
        assert theirs["interrupts"][0]["view"]["title"] == "Pay €10.00 to Bo"


async def test_an_approvals_desk_may_answer_but_not_send():
    ai, _ = payments.build()
    app = create_app(ai, auth=BearerTokens({"alice-token": "alice", "bob-token": "bob"}), policy=OwnerPolicy({"bob"}))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        body = {"message": "Pay 10 EUR to Bo (DE89370400440532013000)."}
        paused = (await http.post("/v1/agents/paymentsAgent/sessions", json=body, headers=ALICE)).json()
        session = f"/v1/agents/paymentsAgent/sessions/{paused['session_id']}"
        desk = (await http.get(session, headers=BOB)).json()
        assert (desk["can_send"], desk["can_answer"]) == (False, True)
        refused = await http.post(session + "/messages", json={"message": "Pay 99 EUR to Bob."}, headers=BOB)
        assert refused.status_code == 403


async def test_a_cancel_over_http_is_recorded_as_such_with_what_it_cancelled(pay):
    http, ledger = pay
    body = {"message": "Pay 10 EUR to Bo (DE89370400440532013000)."}
    paused = (await http.post("/v1/agents/paymentsAgent/sessions", json=body, headers=ALICE)).json()
    session = f"/v1/agents/paymentsAgent/sessions/{paused['session_id']}"
    cancelled = await http.post(session + "/cancel", json={"reason": "wrong payee"}, headers=ALICE)
    assert cancelled.status_code == 200 and cancelled.json()["finish_reason"] == "aborted"
    sent, entry = (await http.get(session + "/audit", headers=ALICE)).json()["entries"]
    assert (sent["decision"], sent["principal"], sent["view"]) == ("message", "alice", None)
    assert (entry["decision"], entry["principal"], entry["via"], entry["reason"]) == (
        "cancel",
        "alice",
        "http",
        "wrong payee",
    )
    assert entry["view"]["title"] == "Pay €10.00 to Bo" and ledger == []


async def test_an_answers_audit_entry_says_when_its_pause_paused_as_the_pause_did(pay):
    """The console rebuilds an answered card from the audit trail: the entry carries the pause's
    time, the one REST showed while it waited (found by a probe: a reloaded card guessed the
    time of the message before it)."""
    http, _ = pay
    body = {"message": "Pay 1250.50 EUR to ACME GmbH (DE00000000000000000000) for INV-117."}
    paused = (await http.post("/v1/agents/paymentsAgent/sessions", json=body, headers=ALICE)).json()
    [pause] = paused["interrupts"]
    session = f"/v1/agents/paymentsAgent/sessions/{paused['session_id']}"
    denied = await http.post(f"{session}/interrupts/{pause['ref']}/deny", json={"reason": "no"}, headers=ALICE)
    assert denied.status_code == 200, denied.text
    sent, entry = (await http.get(session + "/audit", headers=ALICE)).json()["entries"]
    assert entry["paused_at"] == pause["paused_at"] and sent["paused_at"] is None


async def test_a_tool_name_holding_a_slash_is_refused_and_the_portable_one_is_validated():
    """An MCP server's tool may be named with a slash (found by a probe: no route reached it, a
    404). No provider takes such a name, so none is defined any more (``DefinitionError``; an MCP
    tool's is made portable: ``bank/transfer`` → ``bank_transfer``), and the name it gets is one
    the validate route reaches; a path with a slash in it names no tool (404)."""
    import httpx
    from pydantic import BaseModel

    from pausepoint import Pausepoint, Tool
    from pausepoint.errors import DefinitionError
    from pausepoint.server import BearerTokens, create_app
    from pausepoint.testing import ScriptedModel

    class Amount(BaseModel):
        amount: int

    with pytest.raises(DefinitionError, match="is not one every provider takes"):
        Tool(lambda given: given.amount, name="bank/transfer", input_model=Amount)

    def build():
        ai = Pausepoint()
        tool = Tool(lambda given: given.amount, name="bank_transfer", input_model=Amount)
        ai.define_agent(name="odd", model=ScriptedModel([]), tools=[tool])
        return create_app(ai, auth=BearerTokens({"t0k3n": "dev"}))

    with serve_in_thread(build) as url:
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": "Bearer t0k3n"}) as http:
            ok = await http.post("/v1/agents/odd/tools/bank_transfer/validate", json={"input": {"amount": 5}})
            bad = await http.post("/v1/agents/odd/tools/bank_transfer/validate", json={"input": {"amount": "x"}})
            assert ok.status_code == bad.status_code == 200, (ok.text, bad.text)
            assert ok.json()["valid"] is True and bad.json()["valid"] is False
            nope = await http.post("/v1/agents/odd/tools/bank/transfer/validate", json={"input": {}})
    assert nope.status_code == 404 and nope.json()["error"]["code"] == "not_found"


async def test_an_answers_audit_entry_says_its_pause_had_a_ttl_on_every_surface():
    """The entry's view says what would have happened had nobody answered in time, as the pause's
    view did while it waited (found by a probe: ``on_expiry`` was null, which says "no TTL", in
    the trail and in the feed's and webhooks' answer events)."""

    def build() -> Any:
        return create_app(payments.build(ledger=[])[0], auth=BearerTokens({"alice-token": "alice"}))

    body = {"message": "Pay 1250.50 EUR to ACME GmbH (DE00000000000000000000) for INV-117."}
    with serve_in_thread(build) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            feed: list[tuple[str, Any]] = []
            connected = asyncio.Event()
            listening = asyncio.create_task(read_events(http, url + "/v1/feed", ALICE, 3, feed, connected))
            await asyncio.wait_for(connected.wait(), 10)
            paused = (await http.post("/v1/agents/paymentsAgent/sessions", json=body, headers=ALICE)).json()
            [pause] = paused["interrupts"]
            assert pause["expires_at"] and pause["view"]["on_expiry"].startswith("It is denied automatically")
            session = f"/v1/agents/paymentsAgent/sessions/{paused['session_id']}"
            denied = await http.post(f"{session}/interrupts/{pause['ref']}/deny", json={"reason": "no"}, headers=ALICE)
            assert denied.status_code == 200, denied.text
            _, entry = (await http.get(session + "/audit", headers=ALICE)).json()["entries"]
            await asyncio.wait_for(listening, 10)
    assert (entry["expires_at"], entry["view"]["on_expiry"]) == (pause["expires_at"], pause["view"]["on_expiry"])
    [answered] = [data["entry"] for name, data in feed if name == "answer"]
    assert answered == entry  # the feed's event holds the trail's entry, view and all
