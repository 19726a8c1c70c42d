"""Who a card offers "Respond…" to (found by a probe): a question decided by a role was offered to
an approver holding none of the roles that decide it, who filled the form in and sent it, to be
refused 403 ``approval_forbidden`` by the server — while the card said he did not hold the role.
The pause's view now says who may respond (``may_respond``), and the card offers it only to them,
as it offers Approve and Deny (real headless Chromium, a real server on loopback, a real SQLite
file)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.routing import Mount

from pausepoint import ApprovalPolicy, ModelRequest, Pausepoint, Role
from pausepoint.server import BearerTokens, OwnerPolicy, create_app
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, Step, last_tool_results, tool_call
from tests.console.conftest import Shots
from tests.console.steps import Bank, confirm, open_session
from tests.server.harness import serve_in_thread

TOKENS = {f"{who}-token": who for who in ("alice", "bob", "carol", "dave")}


class Ask(BaseModel):
    payee: str


class Source(BaseModel):
    account: str


def script(request: ModelRequest) -> Step:
    last = request.messages[-1]
    if last.role == "user":
        return tool_call("pickSource", {"payee": last.text})
    return "; ".join(f"{name}: {value}" for name, value in last_tool_results(request).items())


@pytest.fixture
def bank(tmp_path: Path) -> Iterator[Bank]:
    """/picks: ``pickSource`` (a question) is decided by deciders (alice); auditors (dave) may
    only deny it; bob approves (the server lets him answer sessions) but holds no role that decides
    it. carol asks."""

    def factory() -> Starlette:
        ai = Pausepoint()
        pick = ai.define_interrupt(
            name="pickSource", description="Ask which account pays.", input_schema=Ask, output_schema=Source
        )
        policy = ApprovalPolicy(
            roles={
                "deciders": Role(tools=["pickSource"]),
                "auditors": Role(tools=["pickSource"], decisions=["deny"]),
            },
            members={"alice": ["deciders"], "bob": [], "dave": ["auditors"]},
        )
        store = SqliteSessionStore(tmp_path / "sessions.db")
        ai.define_agent(name="bank", model=ScriptedModel(script), tools=[pick], store=store, approval=policy)
        options = {"auth": BearerTokens(TOKENS), "policy": OwnerPolicy({"alice", "bob", "dave"}), "feed_interval": 0.2}
        return Starlette(routes=[Mount("/picks", create_app(ai, **options))])  # type: ignore[arg-type]

    with serve_in_thread(factory) as url:
        yield Bank(url, [])


def test_respond_is_offered_only_to_those_the_view_says_may_respond(bank: Bank, browser, shots: Shots):
    reply = httpx.post(
        f"{bank.url}/picks/v1/agents/bank/sessions",
        json={"message": "ACME"},
        headers={"Authorization": "Bearer carol-token"},
    )
    assert reply.status_code == 200, reply.text
    paused = reply.json()
    [pause] = paused["interrupts"]
    shown = pause["view"]["approval"]
    assert (shown["may_respond"], shown["may_deny"]) == (["alice"], ["alice", "dave"])

    bob = browser.new_page()  # his roles decide nothing of it: no answer at all
    open_session(bob, bank, "picks", "bob", paused["session_id"])
    card = bob.locator(".card")
    expect(card).to_have_attribute("data-state", "open")
    expect(card.locator(".card-effect")).to_contain_text("which you do not hold.")
    expect(card.locator(".card-actions .btn")).to_have_count(0)
    shots(bob, "outsider")
    url = f"{bank.session('picks', paused['session_id'])}/interrupts/{pause['ref']}/respond"
    refused = httpx.post(url, json={"output": {"account": "ops"}}, headers={"Authorization": "Bearer bob-token"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "approval_forbidden", refused.text

    dave = browser.new_page()  # his role may only deny
    open_session(dave, bank, "picks", "dave", paused["session_id"])
    expect(dave.locator(".card .card-actions .btn")).to_have_text(["Deny…"])
    expect(dave.locator(".card .card-effect")).to_have_text(  # auditors is not named as answering it
        "Approving this call takes deciders, which you do not hold (you may still deny)."
    )

    alice = browser.new_page()  # a decider answers it
    open_session(alice, bank, "picks", "alice", paused["session_id"])
    card = alice.locator(".card")
    expect(card.locator(".card-actions .btn")).to_have_text(["Respond…", "Deny…"])
    card.get_by_role("button", name="Respond…").click()
    form = card.locator("form:visible")
    form.get_by_label("Account").fill("ops")
    form.get_by_role("button", name="Send answer").click()
    confirm(alice, card, "send this answer")
    expect(card).to_have_attribute("data-state", "answered")
    expect(alice.locator(".msg-model .msg-body").last).to_have_text("pickSource: {'account': 'ops'}")
