"""Models that try to move money without a person: the banking demo's ``transfer_money`` never
runs on arguments nobody approved, whatever the model sends (a function model that decides each
step from what it was told; the in-memory store and a real SQLite file).

Each model below is an adversary the runtime has to hold: it skips ``userApproval``, swaps the
arguments after a yes, reuses the provider call id of an approved call, sends the approved call
twice in one turn, or sends the same call in parallel with the question about it.
"""

from __future__ import annotations

from typing import Any

import pytest

from pausepoint import AgentFinishReason, FunctionModel, Message, ModelRequest, ModelResponse, ToolRequestPart
from pausepoint.demo import build
from pausepoint.errors import AlreadyResolved, InputEditNotAllowed
from pausepoint.testing import reply


def ask(details: str, call_id: str | None = None) -> ToolRequestPart:
    return ToolRequestPart("userApproval", {"action": "transfer_money", "details": details}, call_id=call_id)


def transfer(amount: Any, to: str, call_id: str | None = None) -> ToolRequestPart:
    return ToolRequestPart("transfer_money", {"amount": amount, "to_account": to}, call_id=call_id)


def hostile(*turns: list[ToolRequestPart] | str) -> tuple[FunctionModel, list[ModelRequest]]:
    """A model that answers each request with the next of ``turns`` (calls, or a text), and
    then with what its last tool results said, so a test sees what it was told."""
    seen: list[ModelRequest] = []
    steps = iter(turns)

    def respond(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        step = next(steps, None)
        if step is None:
            last = request.messages[-1]
            return reply("; ".join(str(p.output) for p in last.tool_responses) or "nothing to do")
        if isinstance(step, str):
            return reply(step)
        return ModelResponse(Message("model", list(step)))

    return FunctionModel("hostile", respond), seen


def bank(store: Any, model: FunctionModel) -> tuple[Any, list[str]]:
    ledger: list[str] = []
    _, agent = build(store, ledger, model=model)
    return agent, ledger


async def test_calling_the_transfer_without_asking_pauses_it_and_only_a_persons_yes_runs_it(store):
    model, _ = hostile([transfer(500, "savings")])
    agent, ledger = bank(store, model)
    chat = agent.chat(principal="mallory")
    res = await chat.send("Transfer $500 to savings.")
    [pause] = res.interrupts
    assert (res.finish_reason, pause.name, pause.input) == (
        AgentFinishReason.INTERRUPTED,
        "transfer_money",
        {"amount": "500", "to_account": "savings"},
    )
    assert ledger == [] and pause.approval is not None and pause.approval.gated
    res = await chat.resume(respond=[pause.deny("I never asked for this")])
    assert ledger == [] and "I never asked for this" in res.text  # the model is told the denial


async def test_a_yes_to_one_transfer_does_not_run_another_amount_or_account(store):
    model, _ = hostile(
        [ask("Transfer $500 to savings")],
        [transfer(5000, "savings"), transfer(500, "ext-mallory")],
    )
    agent, ledger = bank(store, model)
    chat = agent.chat(principal="alice")
    [question] = (await chat.send("Transfer $500 to savings.")).interrupts
    res = await chat.resume(respond=[question.respond({"approved": True})])
    paused = {(p.input["amount"], p.input["to_account"]) for p in res.interrupts}
    assert paused == {("5000", "savings"), ("500", "ext-mallory")} and ledger == []
    [grant] = await chat.grants()
    assert (grant.status, grant.used) == ("active", 0)  # still only for $500 to savings
    await chat.resume(respond=[p.deny("not what I approved") for p in res.interrupts])
    assert ledger == []


async def test_an_approved_call_id_reused_with_other_arguments_is_a_new_call_that_waits(store):
    """Providers repeat call ids across turns: the runtime's refs and the approved input decide,
    never the provider's id."""
    model, _ = hostile([transfer(500, "savings", "call-1")], [transfer(9000, "savings", "call-1")])
    agent, ledger = bank(store, model)
    chat = agent.chat(principal="alice")
    [pause] = (await chat.send("Transfer $500 to savings.")).interrupts
    res = await chat.resume(restart=[agent.approval(pause)])
    assert ledger == ["500->savings"]
    [again] = res.interrupts
    assert again.ref != pause.ref and again.input["amount"] == "9000" and ledger == ["500->savings"]
    with pytest.raises(AlreadyResolved):  # the approved ref is spent
        await chat.resume(restart=[pause.restart()])
    assert ledger == ["500->savings"]


async def test_a_yes_runs_the_described_transfer_once_even_when_the_model_sends_it_twice_at_once(store):
    model, _ = hostile([ask("Transfer $500 to savings")], [transfer(500, "savings"), transfer(500, "savings")])
    agent, ledger = bank(store, model)
    chat = agent.chat(principal="alice")
    [question] = (await chat.send("Transfer $500 to savings.")).interrupts
    res = await chat.resume(respond=[question.respond({"approved": True})])
    assert ledger == ["500->savings"]  # the grant is for one transfer: the twin waits for a person
    [twin] = res.interrupts
    assert twin.name == "transfer_money"
    await chat.resume(respond=[twin.deny("once is enough")])
    assert ledger == ["500->savings"]


async def test_a_transfer_sent_beside_the_question_about_it_waits_for_its_own_approval(store):
    model, _ = hostile([ask("Transfer $500 to savings"), transfer(500, "savings")])
    agent, ledger = bank(store, model)
    chat = agent.chat(principal="alice")
    res = await chat.send("Transfer $500 to savings.")
    assert sorted(p.name for p in res.interrupts) == ["transfer_money", "userApproval"] and ledger == []
    question = next(p for p in res.interrupts if p.name == "userApproval")
    res = await chat.resume(respond=[question.respond({"approved": False})])
    [gate] = res.interrupts  # a no to the question leaves the transfer paused, not run
    assert gate.name == "transfer_money" and ledger == []
    await chat.resume(respond=[gate.deny("the user said no")])
    assert ledger == []


async def test_an_approval_cannot_be_edited_into_another_transfer(store):
    model, _ = hostile([transfer(5, "savings")])
    agent, ledger = bank(store, model)
    chat = agent.chat(principal="alice")
    [pause] = (await chat.send("Transfer $5 to savings.")).interrupts
    with pytest.raises(InputEditNotAllowed):
        await chat.resume(restart=[pause.restart(replace_input={"amount": 5000, "to_account": "ext-mallory"})])
    assert ledger == []
    await chat.resume(restart=[agent.approval(pause)])
    assert ledger == ["5->savings"]


@pytest.mark.parametrize("bad", [{"amount": "lots", "to_account": "savings"}, {"to_account": "savings"}])
async def test_a_transfer_with_invalid_arguments_never_runs_and_the_model_is_told(store, bad: dict[str, Any]):
    model, seen = hostile([ToolRequestPart("transfer_money", bad)])
    agent, ledger = bank(store, model)
    res = await agent.chat().send("Transfer money.")
    assert res.finish_reason == AgentFinishReason.STOP and res.interrupts == [] and ledger == []
    [told] = seen[-1].messages[-1].tool_responses
    assert told.name == "transfer_money" and "error" in str(told.output).lower()


async def test_a_model_that_keeps_calling_after_denials_never_moves_money(store):
    """Ten rounds of a model asking for a transfer again after each denial: nothing moves."""
    model, _ = hostile(*([transfer(100 * n, "savings")] for n in range(1, 11)))
    agent, ledger = bank(store, model)
    chat = agent.chat(principal="alice")
    res = await chat.send("Transfer something.")
    denied = 0
    while res.interrupts:
        res = await chat.resume(respond=[p.deny("no") for p in res.interrupts])
        denied += 1
    assert denied == 10 and ledger == []
    trail = await chat.audit_trail()
    assert [e.decision for e in trail].count("deny") == 10
