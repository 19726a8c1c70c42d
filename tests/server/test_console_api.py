"""The REST additions the console relies on: agent descriptions, approve-by-ref, the console mount."""

from __future__ import annotations

import httpx
from pydantic import BaseModel

from examples import banking
from pausepoint import Pausepoint, demo
from pausepoint.server import BearerTokens, create_app
from pausepoint.testing import ScriptedModel, tool_call
from tests.server.conftest import ALICE, BOB


async def paused(served, http, base: str, agent: str, message: str) -> tuple[str, str]:
    reply = await http.post(f"{base}/v1/agents/{agent}/sessions", json={"message": message}, headers=ALICE)
    body = reply.json()
    return f"{base}/v1/agents/{agent}/sessions/{body['session_id']}", body["interrupts"][0]["ref"]


async def test_agents_name_the_caller_and_describe_their_tools(served, http):
    listing = await http.get(served.bank + "/v1/agents", headers=ALICE)
    assert listing.json() == {"agents": ["bankingAgent"], "principal": "alice"}
    reply = await http.get(served.shell + "/v1/agents/shellAgent", headers=ALICE)
    assert reply.status_code == 200
    info = reply.json()
    assert info["name"] == "shellAgent"
    assert info["description"] == "Runs shell commands; the risky ones wait for your approval."
    assert "Use run_shell" not in reply.text  # the system prompt is the model's, never a client's
    [tool] = info["tools"]
    assert tool["name"] == "run_shell" and tool["allow_input_edits"] is True and tool["pauses_only"] is False
    assert tool["input_schema"]["required"] == ["command"]
    assert tool["approval"] == {"kind": "restart", "resumed_metadata": {"tool_approved": True}}
    bank_reply = await http.get(served.bank + "/v1/agents/bankingAgent", headers=ALICE)
    bank = bank_reply.json()
    assert bank["description"] == demo.DESCRIPTION and demo.SYSTEM not in bank_reply.text
    approval = next(t for t in bank["tools"] if t["name"] == "userApproval")
    assert approval["pauses_only"] is True and approval["allow_input_edits"] is False
    assert approval["output_schema"]["properties"]["approved"]["type"] == "boolean"
    assert approval["approval"] == {"kind": "respond", "output": {"approved": True, "feedback": ""}}
    assert (await http.get(served.bank + "/v1/agents/nobody", headers=ALICE)).status_code == 404
    assert (await http.get(served.bank + "/v1/agents/bankingAgent")).status_code == 401


async def test_approve_answers_an_interrupt_only_tool_with_a_yes(served, http):
    session, ref = await paused(served, http, served.bank, "bankingAgent", "Transfer $12 to ann.")
    reply = await http.post(f"{session}/interrupts/{ref}/approve", headers={**ALICE, "Idempotency-Key": "k1"})
    assert reply.status_code == 200, reply.text
    assert reply.json()["finish_reason"] == "stop" and served.ledger == ["12->ann"]
    sent, entry, grant, decided = (await http.get(session + "/audit", headers=ALICE)).json()["entries"]
    assert (sent["decision"], sent["principal"], sent["via"]) == ("message", "alice", "http")
    assert sent["message"]["parts"][0]["text"] == "Transfer $12 to ann."
    assert (grant["decision"], decided["decision"], decided["grant"]) == ("grant", "approve", grant["grant"])
    assert (entry["decision"], entry["output"], entry["principal"]) == (
        "respond",
        {"approved": True, "feedback": ""},
        "alice",
    )
    again = await http.post(f"{session}/interrupts/{ref}/approve", headers={**ALICE, "Idempotency-Key": "k2"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_resolved"
    replay = await http.post(f"{session}/interrupts/{ref}/approve", headers={**ALICE, "Idempotency-Key": "k1"})
    assert replay.status_code == 200 and served.ledger == ["12->ann"]  # the first outcome, not a second run


async def test_approve_restarts_a_self_pausing_tool_and_may_edit_its_input(served, http):
    session, ref = await paused(served, http, served.shell, "shellAgent", "Run: rm -rf build/")
    reply = await http.post(f"{session}/interrupts/{ref}/approve", json={}, headers=ALICE)
    assert reply.status_code == 200, reply.text
    assert served.executed == [{"command": "rm -rf build/", "resumed_metadata": {"tool_approved": True}}]
    session, ref = await paused(served, http, served.shell, "shellAgent", "Run: rm -rf dist/")
    bad = await http.post(f"{session}/interrupts/{ref}/approve", json={"replace_input": {"cmd": 1}}, headers=ALICE)
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_answer"
    edited = {"replace_input": {"command": "rm -rf dist/tmp"}, "metadata": {"note": "narrower"}}
    reply = await http.post(f"{session}/interrupts/{ref}/approve", json=edited, headers=ALICE)
    assert reply.status_code == 200, reply.text
    assert served.executed[-1]["command"] == "rm -rf dist/tmp"
    assert served.executed[-1]["original_input"] == {"command": "rm -rf dist/"}
    entry = (await http.get(session + "/audit", headers=ALICE)).json()["entries"][-1]
    assert entry["decision"] == "approve" and entry["metadata"] == {"note": "narrower"}


async def test_approve_refusals(served, http):
    session, ref = await paused(served, http, served.bank, "bankingAgent", "Transfer $3 to zed.")
    edit = await http.post(f"{session}/interrupts/{ref}/approve", json={"replace_input": {}}, headers=ALICE)
    assert edit.status_code == 422 and edit.json()["error"]["code"] == "input_edit_not_allowed"
    unknown = await http.post(f"{session}/interrupts/nope/approve", headers=ALICE)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_interrupt"
    other = await http.post(f"{session}/interrupts/{ref}/approve", headers=BOB)
    assert other.status_code == 404
    extra = await http.post(f"{session}/interrupts/{ref}/approve", json={"output": 1}, headers=ALICE)
    assert extra.status_code == 400
    assert served.ledger == []  # nothing ran


async def test_approve_refuses_a_tool_a_yes_cannot_answer():
    class Choice(BaseModel):
        color: str

    ai = Pausepoint()
    pick = ai.define_interrupt(
        name="pickColor", description="Ask for a color.", input_schema=Choice, output_schema=Choice
    )
    ai.define_agent(name="painter", model=ScriptedModel([tool_call("pickColor", {"color": "any"})]), tools=[pick])
    app = create_app(ai, auth=BearerTokens({"t": "alice"}))
    headers = {"Authorization": "Bearer t"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        body = (await http.post("/v1/agents/painter/sessions", json={"message": "paint"}, headers=headers)).json()
        ref = body["interrupts"][0]["ref"]
        reply = await http.post(
            f"/v1/agents/painter/sessions/{body['session_id']}/interrupts/{ref}/approve", headers=headers
        )
        assert reply.status_code == 422
        assert reply.json()["error"]["code"] == "invalid_answer" and "pickColor" in reply.json()["error"]["message"]


async def test_the_console_is_served_and_can_be_left_out(served, http):
    home = await http.get(served.bank + "/", follow_redirects=False)
    assert home.status_code in (302, 307) and home.headers["location"].endswith("/bank/console/")
    page = await http.get(served.bank + "/console/")
    assert page.status_code == 200 and "pausepoint console" in page.text
    assert "script-src" not in page.headers["content-security-policy"]  # default-src 'self' covers it
    assert "default-src 'self'" in page.headers["content-security-policy"]
    script = await http.get(served.bank + "/console/app.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]

    ai, _ = banking.build()
    app = create_app(ai, auth=BearerTokens({"t": "alice"}), console=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as bare:
        assert (await bare.get("/console/")).status_code == 404
        assert (await bare.get("/")).status_code == 404
