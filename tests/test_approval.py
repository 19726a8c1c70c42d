"""What "approve" means for the two kinds of pause (used by the console and the terminal chat)."""

import pytest
from pydantic import BaseModel

from examples import banking, shell
from pausepoint import AgentFinishReason, Pausepoint, ToolRestart
from pausepoint.testing import ScriptedModel, tool_call


async def test_approving_an_interrupt_only_tool_answers_yes(store):
    ledger: list[str] = []
    _, agent = banking.build(store, ledger)
    chat = agent.chat()
    res = await chat.send("Transfer $5 to savings.")
    answer = agent.approval(res.interrupts[0])
    assert answer.output == {"approved": True, "feedback": ""}
    assert (await chat.resume(respond=[answer])).text == "Transferred $5 to savings."
    assert ledger == ["5->savings"]


async def test_approving_a_self_pausing_tool_runs_it_with_tool_approved(store):
    executed: list[dict] = []
    _, agent = shell.build(store, executed)
    chat = agent.chat()
    res = await chat.send("Run: rm -rf build/")
    answer = agent.approval(res.interrupts[0])
    assert isinstance(answer, ToolRestart) and answer.resumed_metadata == {"tool_approved": True}
    res = await chat.resume(restart=[answer])
    assert res.finish_reason == AgentFinishReason.STOP and len(executed) == 1


async def test_an_output_schema_without_a_yes_field_cannot_be_approved_blindly():
    class Choice(BaseModel):
        option: str

    class Mixed(BaseModel):
        approved: bool
        amount: int

    ai = Pausepoint()

    class Q(BaseModel):
        q: str

    choose = ai.define_interrupt(name="choose", description="Pick.", input_schema=Q, output_schema=Choice)
    mixed = ai.define_interrupt(name="mixed", description="Pick.", input_schema=Q, output_schema=Mixed)
    free = ai.define_interrupt(name="free", description="Ask.", input_schema=Q)
    model = ScriptedModel(
        [[tool_call("choose", {"q": "a"}), tool_call("mixed", {"q": "b"}), tool_call("free", {"q": "c"})]]
    )
    agent = ai.define_agent(name="asker", model=model, tools=[choose, mixed, free])
    res = await agent.chat().send("go")
    by_name = {i.name: i for i in res.interrupts}
    with pytest.raises(ValueError, match="no yes/no field"):
        agent.approval(by_name["choose"])
    with pytest.raises(ValueError, match="more than a yes"):
        agent.approval(by_name["mixed"])
    assert agent.approval(by_name["free"]).output == {"approved": True}
