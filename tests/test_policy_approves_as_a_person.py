"""An approval by the policy — a rule's, a grant's — is what a person's Approve is for the call
(found by a probe): a tool that pauses itself until approved (``raise Interrupt`` unless
``tool_approved``, the README's pattern) runs with ``tool_approved`` instead of pausing again
under an audit entry saying the rule approved it; a grant of such a tool approves its later
calls (it was accepted, listed active, and approved nothing); an interrupt-only tool a rule
approves is answered with its yes. Public API only, on the in-memory store and a real SQLite file."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from pydantic import BaseModel

from pausepoint import (
    AgentFinishReason,
    ApprovalPolicy,
    Grant,
    Interrupt,
    ModelRequest,
    Pausepoint,
    Role,
    Rule,
    ToolRunContext,
)
from pausepoint.errors import InvalidGrant
from pausepoint.testing import ScriptedModel, Step, tool_call

PAY = re.compile(r"pay (\d+(?:\.\d+)?)")
ASK = re.compile(r"ask (\w+)")


class Invoice(BaseModel):
    amount: Decimal


class Question(BaseModel):
    question: str


class Confirmed(BaseModel):
    approved: bool


def script(request: ModelRequest) -> Step:
    last = request.messages[-1]
    if last.role == "user":
        calls = [tool_call("pay_invoice", {"amount": a}) for a in PAY.findall(last.text)]
        calls += [tool_call("confirm", {"question": q}) for q in ASK.findall(last.text)]
        return calls or "ok"
    return "; ".join(str(p.output) for p in last.tool_responses)


def app(policy: ApprovalPolicy, store, paid: list[str]):
    ai = Pausepoint()

    @ai.tool()
    async def pay_invoice(input: Invoice, ctx: ToolRunContext) -> str:
        """Pay an invoice once a person approved it."""
        if not (ctx.resumed_metadata or {}).get("tool_approved"):
            raise Interrupt({"why": "a person approves payments"})
        paid.append(str(input.amount))
        return f"paid {input.amount}"

    confirm = ai.define_interrupt(
        name="confirm", description="Ask a yes/no question.", input_schema=Question, output_schema=Confirmed
    )
    return ai.define_agent(
        name="payer", model=ScriptedModel(script), tools=[pay_invoice, confirm], store=store, approval=policy
    )


TREASURY = {"roles": {"treasury": Role(tools=["pay_invoice"])}, "members": {"dana": ["treasury"]}}


async def test_a_rule_approves_a_tool_that_pauses_itself_as_a_person_would(store):
    paid: list[str] = []
    small = Rule.approve("small payments", ["pay_invoice"], when=lambda p: p.amount <= 10)
    agent = app(ApprovalPolicy(rules=[small], **TREASURY), store, paid)
    chat = agent.chat(principal="alice")
    res = await chat.send("pay 5")
    assert (res.finish_reason, res.interrupts, paid) == (AgentFinishReason.STOP, [], ["5"])
    [entry] = [e for e in await chat.audit_trail() if e.decision != "message"]
    assert (entry.decision, entry.via, entry.rule) == ("approve", "policy", "small payments")

    res = await chat.send("pay 50")  # beyond the rule: the tool pauses itself, a person decides
    [pause] = res.interrupts
    await chat.approve(pause.ref, principal="dana")
    assert paid == ["5", "50"]
    decided = [(e.decision, e.principal, e.via) for e in await chat.audit_trail() if e.ref == pause.ref]
    assert decided == [("approve", "dana", "python")]  # one approval of the one call


async def test_a_rule_answers_an_interrupt_only_tool_with_its_yes(store):
    agent = app(ApprovalPolicy(rules=[Rule.approve("always yes", ["confirm"])]), store, [])
    chat = agent.chat()
    res = await chat.send("ask deploy")
    assert res.finish_reason == AgentFinishReason.STOP and res.interrupts == []
    assert res.text == "{'approved': True}"  # the model was told the yes
    [entry] = [e for e in await chat.audit_trail() if e.decision != "message"]
    assert (entry.decision, entry.via, entry.rule) == ("approve", "policy", "always yes")


async def test_a_grant_of_a_tool_that_pauses_itself_approves_its_later_calls(store):
    paid: list[str] = []
    agent = app(ApprovalPolicy(grantable=["pay_invoice"], **TREASURY), store, paid)
    chat = agent.chat(principal="alice")
    [pause] = (await chat.send("pay 5")).interrupts
    assert agent.view(pause).approval.grantable  # the view says what an approval may give
    await chat.approve(pause.ref, principal="dana", grant=Grant(bounds={"amount": {"max": 10}}, uses=1))
    [grant] = await chat.grants()
    assert (paid, grant.used) == (["5"], 0)  # the approval that gave it was dana's, not the grant's

    res = await chat.send("pay 6")
    assert (res.finish_reason, paid) == (AgentFinishReason.STOP, ["5", "6"])
    [grant] = await chat.grants()
    assert (grant.status, grant.used) == ("used", 1)
    trail = [(e.decision, e.principal, e.via, e.grant) for e in await chat.audit_trail() if e.decision != "message"]
    assert trail == [
        ("approve", "dana", "python", None),
        ("grant", "dana", "python", grant.id),
        ("approve", "dana", "policy", grant.id),
    ]
    res = await chat.send("pay 7")  # used up: the tool pauses itself again
    assert res.finish_reason == AgentFinishReason.INTERRUPTED and paid == ["5", "6"]


async def test_an_interrupt_only_tool_is_granted_nothing(store):
    agent = app(ApprovalPolicy(grantable=["confirm"]), store, [])
    chat = agent.chat()
    [pause] = (await chat.send("ask deploy")).interrupts
    assert not agent.view(pause).approval or not agent.view(pause).approval.grantable
    with pytest.raises(InvalidGrant, match="only asks a question"):
        await chat.resume(respond=[pause.respond({"approved": True}, grant=Grant())])
    assert [p.ref for p in await chat.interrupts()] == [pause.ref]  # nothing answered


async def test_a_policy_that_only_makes_a_tool_grantable_offers_and_honours_its_grants(store):
    """No roles, no rules: the pause still says a grant may go with its approval, on every surface
    (found by a probe: the pause had no approval status, so neither the console nor the terminal
    offered a grant the server took), and the grant approves the next call."""
    paid: list[str] = []
    agent = app(ApprovalPolicy(grantable=["pay_invoice"]), store, paid)
    chat = agent.chat(principal="alice")
    [pause] = (await chat.send("pay 5")).interrupts
    assert pause.approval is not None and pause.approval.grantable and not pause.approval.gated
    assert agent.view(pause).approval.grant_note
    await chat.approve(pause.ref, grant=Grant())
    res = await chat.send("pay 6")
    assert (res.finish_reason, paid) == (AgentFinishReason.STOP, ["5", "6"])
    [grant] = await chat.grants()
    assert grant.used == 1


async def test_a_grant_goes_only_with_an_answer_that_approves_the_call(store):
    """Found by a probe: a plain restart (no ``tool_approved``) of a tool that paused itself ran it
    again to pause again, approving nothing, yet its grant was stored and approved the requester's
    next call; a grant naming the tool ``""`` was read as the paused tool."""
    paid: list[str] = []
    agent = app(ApprovalPolicy(grantable=["pay_invoice"], **TREASURY), store, paid)
    chat = agent.chat(principal="alice")
    [pause] = (await chat.send("pay 5")).interrupts
    before = await chat.audit_trail()
    with pytest.raises(InvalidGrant, match="a grant goes with an approval"):
        await chat.resume(restart=[pause.restart(grant=Grant())], principal="dana")
    with pytest.raises(InvalidGrant, match="names '', which is no tool"):
        await chat.approve(pause.ref, principal="dana", grant=Grant(tool=""))
    assert await chat.grants() == [] and await chat.audit_trail() == before and paid == []
    assert [p.ref for p in await chat.interrupts()] == [pause.ref]  # nothing answered


async def test_a_call_that_requires_approval_approved_by_the_policy_runs_as_a_first_run(store):
    """SPEC: ``resumed_metadata`` is None on a first run. A call the runtime gates never ran, so
    a rule's or a grant's approval runs it with None, as before it was approved by the policy;
    only a tool that pauses itself needs ``tool_approved`` to run."""
    seen: list[object] = []
    ai = Pausepoint()

    @ai.tool(requires_approval=True)
    async def wire(amount: int, ctx: ToolRunContext) -> str:
        """Wire money once approved."""
        seen.append(ctx.resumed_metadata)
        return f"wired {amount}"

    def model(request: ModelRequest) -> Step:
        last = request.messages[-1]
        return [tool_call("wire", {"amount": int(a)}) for a in PAY.findall(last.text)] if last.role == "user" else "ok"

    small = Rule.approve("small wires", ["wire"], when=lambda w: w.amount <= 10)
    agent = ai.define_agent(
        name="wirer", model=ScriptedModel(model), tools=[wire], store=store,
        approval=ApprovalPolicy(rules=[small], grantable=["wire"]),
    )  # fmt: skip
    chat = agent.chat()
    assert (await chat.send("pay 5")).finish_reason == AgentFinishReason.STOP  # by the rule
    [pause] = (await chat.send("pay 50")).interrupts
    await chat.approve(pause.ref, grant=Grant())  # a person's approval: a restart, tool_approved
    assert (await chat.send("pay 60")).finish_reason == AgentFinishReason.STOP  # by the grant
    assert seen == [None, {"tool_approved": True}, None]


async def test_a_restart_without_tool_approved_counts_no_approval(store):
    # The tool runs again, pauses again: nothing was approved, and the trail's count says so
    # (found by a probe: it read 1 of 1 beside the decision "restart"); the approval that follows
    # counts one.
    paid: list[str] = []
    agent = app(ApprovalPolicy(**TREASURY), store, paid)
    chat = agent.chat(principal="alice")
    [pause] = (await chat.send("pay 5")).interrupts
    [again] = (await chat.resume(restart=[pause.restart()], principal="dana")).interrupts
    await chat.approve(again.ref, pause_id=again.pause_id, principal="dana")
    assert paid == ["5"]
    trail = [(e.decision, e.approvals, e.required) for e in await chat.audit_trail() if e.decision != "message"]
    assert trail == [("restart", 0, 1), ("approve", 1, 1)]
