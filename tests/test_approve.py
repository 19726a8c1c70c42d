"""``Chat.approve``: a pause approved in one call by its ref, as the console's Approve answers it,
looked up under the session's lock (on the in-memory store and a real SQLite file)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from examples import banking, shell
from pausepoint import (
    AgentFinishReason,
    Grant,
    Interrupt,
    Pausepoint,
    ToolResultChunk,
    ToolRunContext,
    TurnEndChunk,
)
from pausepoint.errors import (
    AlreadyApproved,
    AlreadyResolved,
    IdempotencyKeyReused,
    InputEditNotAllowed,
    InvalidAnswer,
    NotPaused,
    PausepointError,
    UnknownInterrupt,
)
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, tool_call

from .approval_apps import build, treasury
from .helpers import version


async def test_approve_answers_an_interrupt_only_tool_with_a_yes(store):
    ledger: list[str] = []
    _, agent = banking.build(store, ledger)
    chat = agent.chat(principal="alice")
    [pause] = (await chat.send("Transfer $12 to ann.")).interrupts
    res = await chat.approve(pause.ref)
    assert (res.finish_reason, res.text, ledger) == (AgentFinishReason.STOP, "Transferred $12 to ann.", ["12->ann"])
    _, entry, grant, decided = await chat.audit_trail()
    assert (entry.ref, entry.decision, entry.output, entry.principal, entry.via) == (
        pause.ref,
        "respond",
        {"approved": True, "feedback": ""},  # the yes, fitted to the output schema
        "alice",
        "python",
    )
    assert entry.pause_id == pause.pause_id
    # the same as agent.approval: the yes grants the transfer it asked about, which then runs
    assert (grant.decision, decided.decision, decided.grant) == ("grant", "approve", grant.grant)
    with pytest.raises(AlreadyResolved):
        await chat.approve(pause.ref)
    assert ledger == ["12->ann"]


async def test_approve_restarts_a_self_pausing_tool_and_may_approve_an_edited_input(store):
    executed: list[dict] = []
    _, agent = shell.build(store, executed)
    chat = agent.chat()
    [pause] = (await chat.send("Run: rm -rf build/")).interrupts
    res = await chat.approve(pause.ref, principal="alice", via="console")
    assert res.finish_reason == AgentFinishReason.STOP
    assert executed == [{"command": "rm -rf build/", "resumed_metadata": {"tool_approved": True}}]

    [pause] = (await chat.send("Run: rm -rf dist/")).interrupts
    before = await version(store, chat.session_id)
    with pytest.raises(InvalidAnswer):  # the edited input is checked against the tool's schema
        await chat.approve(pause.ref, replace_input={"cmd": 1})
    assert await version(store, chat.session_id) == before and len(executed) == 1
    res = await chat.approve(pause.ref, replace_input={"command": "rm -rf dist/tmp"}, metadata={"note": "narrower"})
    assert res.finish_reason == AgentFinishReason.STOP
    assert executed[-1]["command"] == "rm -rf dist/tmp"
    assert executed[-1]["original_input"] == {"command": "rm -rf dist/"}
    entry = (await chat.audit_trail())[-1]
    assert (entry.decision, entry.replace_input, entry.metadata) == (
        "approve",
        {"command": "rm -rf dist/tmp"},
        {"note": "narrower"},
    )
    assert [e.via for e in await chat.audit_trail() if e.decision == "approve"] == ["console", "python"]
    with pytest.raises(AlreadyResolved) as again:  # named as the audit trail names it
        await chat.approve(pause.ref)
    assert again.value.details["decision"] == "approve" and "(approve " in again.value.message

    # Edited in one restart (the tool pauses again, on the new input), approved in the next: the
    # tool that runs the edited input still knows what the model asked for (found by a probe).
    [pause] = (await chat.send("Run: rm -rf out/")).interrupts
    edited = await chat.resume(restart=[pause.restart(replace_input={"command": "rm -rf out/tmp"})])
    [again_paused] = edited.interrupts
    assert again_paused.input == {"command": "rm -rf out/tmp"}
    await chat.approve(again_paused.ref, pause_id=again_paused.pause_id)  # the live pause, which changed
    assert executed[-1]["command"] == "rm -rf out/tmp"
    assert executed[-1]["original_input"] == {"command": "rm -rf out/"}


class Order(BaseModel):
    item: str
    qty: int = 1


async def test_original_input_is_set_only_when_a_restart_replaced_the_input(store):
    # The model leaves out a field with a default: the pause shows the input as the tool read it
    # ({"qty": 1} filled in), and a restart that replaces nothing is no edit (found by a probe:
    # ctx.original_input held the model's input, as Genkit's never does then).
    seen: list[tuple[str, Any, Any]] = []
    ai = Pausepoint()

    @ai.tool(allow_input_edits=True)
    async def order_self(input: Order, ctx: ToolRunContext) -> str:
        """Order, asking first."""
        if not (ctx.resumed_metadata or {}).get("tool_approved"):
            raise Interrupt()
        seen.append(("self", input.model_dump(), ctx.original_input))
        return "ordered"

    @ai.tool(requires_approval=True, allow_input_edits=True)
    async def order_gated(input: Order, ctx: ToolRunContext) -> str:
        """Order, gated."""
        seen.append(("gated", input.model_dump(), ctx.original_input))
        return "ordered"

    def script(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            return "done"
        return [tool_call(name, {"item": "pen"}) for name in ("order_self", "order_gated")]

    agent = ai.define_agent(name="shop", model=ScriptedModel(script), tools=[order_self, order_gated], store=store)
    chat = agent.chat()
    paused = (await chat.send("order")).interrupts
    assert [p.input for p in paused] == [{"item": "pen", "qty": 1}] * 2
    await chat.resume(restart=[p.restart(resumed_metadata={"tool_approved": True}) for p in paused])
    assert sorted(seen) == [("gated", {"item": "pen", "qty": 1}, None), ("self", {"item": "pen", "qty": 1}, None)]

    # replaced in one restart (the tool pauses again), approved in the next: the model's input
    seen.clear()
    self_paused, gated = (await chat.send("order again")).interrupts
    edited = await chat.resume(restart=[self_paused.restart(replace_input={"item": "pen", "qty": 3})])
    [again] = [p for p in edited.interrupts if p.ref == self_paused.ref]
    await chat.approve(again.ref, pause_id=again.pause_id)
    await chat.approve(gated.ref, replace_input={"item": "ink"})
    assert sorted(seen) == [
        ("gated", {"item": "ink", "qty": 1}, {"item": "pen"}),
        ("self", {"item": "pen", "qty": 3}, {"item": "pen"}),
    ]


async def test_an_edit_of_a_question_is_refused_and_nothing_is_written(store):
    ledger: list[str] = []
    _, agent = banking.build(store, ledger)
    chat = agent.chat()
    [pause] = (await chat.send("Transfer $3 to zed.")).interrupts
    before = await version(store, chat.session_id)
    for edit in ({}, None):  # an edit given, even None, is an edit
        with pytest.raises(InputEditNotAllowed, match="only asks a question"):
            await chat.approve(pause.ref, replace_input=edit)
    assert await version(store, chat.session_id) == before
    assert (await chat.interrupts()) == [pause] and ledger == []


async def test_what_is_not_open_gets_the_cores_own_refusal(store):
    ledger: list[str] = []
    _, agent = banking.build(store, ledger)
    chat = agent.chat()
    [pause] = (await chat.send("Transfer $5 to savings.")).interrupts
    before = await version(store, chat.session_id)
    with pytest.raises(UnknownInterrupt):
        await chat.approve("nope")
    with pytest.raises(UnknownInterrupt):  # a pause the call never had
        await chat.approve(pause.ref, pause_id="not-a-pause")
    with pytest.raises(InvalidAnswer, match="pause_id"):
        await chat.approve(pause.ref, pause_id=7)  # type: ignore[arg-type]
    assert await version(store, chat.session_id) == before

    await chat.approve(pause.ref, pause_id=pause.pause_id)
    transfer = next(p.ref for m in await chat.history() for p in m.tool_requests if p.name == "transfer_money")
    with pytest.raises(NotPaused):  # a call that ran without pausing (the grant approved it)
        await chat.approve(transfer)
    with pytest.raises(AlreadyResolved):
        await chat.approve(pause.ref)
    assert ledger == ["5->savings"]


async def test_a_yes_cannot_answer_a_question_that_needs_more():
    class Choice(BaseModel):
        color: str

    ai = Pausepoint()
    pick = ai.define_interrupt(
        name="pickColor", description="Ask for a color.", input_schema=Choice, output_schema=Choice
    )
    agent = ai.define_agent(
        name="painter", model=ScriptedModel([tool_call("pickColor", {"color": "any"})]), tools=[pick]
    )
    chat = agent.chat()
    [pause] = (await chat.send("paint")).interrupts
    with pytest.raises(InvalidAnswer, match="pickColor"):
        await chat.approve(pause.ref)
    assert await chat.interrupts() == [pause]


async def test_a_retry_with_the_same_key_gets_the_first_outcome(store):
    ledger: list[str] = []
    _, agent = banking.build(store, ledger)
    chat = agent.chat()
    [pause] = (await chat.send("Transfer $7 to bob.")).interrupts
    first = await chat.approve(pause.ref, idempotency_key="k1")
    again = await agent.chat(chat.session_id).approve(pause.ref, idempotency_key="k1")
    assert again == first and first.text == "Transferred $7 to bob." and ledger == ["7->bob"]
    with pytest.raises(IdempotencyKeyReused):
        await chat.approve(pause.ref, idempotency_key="k1", metadata={"note": "another request"})
    with pytest.raises(AlreadyResolved):
        await chat.approve(pause.ref, idempotency_key="k2")
    assert ledger == ["7->bob"]


async def test_approve_counts_towards_a_quorum_and_grants(store):
    agent, _model, ledger = build(store, treasury(quorum={"transfer_money": 2}))
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    res = await chat.approve(pause.ref, principal="alice")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED and ledger == []
    assert res.interrupts[0].approval.approved_by == ["alice"]
    with pytest.raises(AlreadyApproved):
        await chat.approve(pause.ref, principal="alice")
    res = await chat.approve(pause.ref, principal="bob")
    assert (res.finish_reason, ledger) == (AgentFinishReason.STOP, ["500->savings"])
    with pytest.raises(AlreadyResolved):
        await chat.approve(pause.ref, principal="carol")
    trail = [e for e in await chat.audit_trail() if e.decision != "message"]
    assert [(e.decision, e.principal, e.approvals, e.required) for e in trail] == [
        ("approve", "alice", 1, 2),
        ("approve", "bob", 2, 2),
    ]

    agent, _model, ledger = build(store, treasury(grantable=["transfer_money"]))
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 5 to a")).interrupts
    await chat.approve(pause.ref, grant=Grant(uses=1), principal="alice")
    res = await chat.send("pay 6 to a")  # the grant approves it: no pause
    assert (res.finish_reason, ledger) == (AgentFinishReason.STOP, ["5->a", "6->a"])
    [grant] = await chat.grants()
    assert (grant.principal, grant.ref, grant.uses, grant.status) == ("alice", pause.ref, 1, "used")


async def test_two_approvers_on_one_sqlite_file_exactly_one_wins(tmp_path):
    """Two agents (as two processes) on one SQLite file approve the same pause at once: the
    pause is looked up again under each one's lock, so the loser is refused, nothing runs twice."""
    path = tmp_path / "race.db"
    ledger: list[str] = []
    agents = [banking.build(SqliteSessionStore(path), ledger)[1] for _ in range(2)]
    chat = agents[0].chat(principal="alice")
    [pause] = (await chat.send("Transfer $500 to savings.")).interrupts
    for agent in agents:
        assert await agent.chat(chat.session_id).interrupts() == [pause]  # both have read it open

    async def approve(agent, who):
        try:
            return await agent.chat(chat.session_id).approve(pause.ref, principal=who)
        except PausepointError as exc:
            return exc

    outcomes = await asyncio.gather(approve(agents[0], "alice"), approve(agents[1], "bob"))
    won = [o for o in outcomes if not isinstance(o, Exception)]
    assert len(won) == 1 and won[0].text == "Transferred $500 to savings."
    assert [type(o) for o in outcomes if isinstance(o, Exception)] == [AlreadyResolved]
    assert ledger == ["500->savings"]
    answered = [e for e in await agents[1].chat(chat.session_id).audit_trail() if e.decision == "respond"]
    assert len(answered) == 1


async def test_approve_streamed(store):
    executed: list[dict] = []
    _, agent = shell.build(store, executed)
    chat = agent.chat()
    [pause] = (await chat.send("Run: rm -rf build/")).interrupts
    stream = chat.approve_stream(pause.ref)
    chunks = [chunk async for chunk in stream]
    res = await stream.response
    assert res.finish_reason == AgentFinishReason.STOP and len(executed) == 1
    assert [c.ref for c in chunks if isinstance(c, ToolResultChunk)] == [pause.ref]
    assert isinstance(chunks[-1], TurnEndChunk) and chunks[-1].response == res
    with pytest.raises(AlreadyResolved):  # a refusal is raised from the stream
        async for _ in chat.approve_stream(pause.ref):
            pass


def test_approve_without_await(tmp_path):
    ledger: list[str] = []
    _, agent = banking.build(SqliteSessionStore(tmp_path / "s.db"), ledger)
    chat = agent.chat(principal="alice").sync
    [pause] = chat.send("Transfer $9 to kim.").interrupts
    with pytest.raises(InputEditNotAllowed):
        chat.approve(pause.ref, replace_input={"details": "Transfer $90 to kim"})
    res = chat.approve(pause.ref, idempotency_key="k")
    assert (res.text, ledger) == ("Transferred $9 to kim.", ["9->kim"])
    assert chat.approve(pause.ref, idempotency_key="k") == res

    executed: list[dict] = []
    _, agent = shell.build(SqliteSessionStore(tmp_path / "shell.db"), executed)
    chat = agent.chat().sync
    [pause] = chat.send("Run: rm -rf build/").interrupts
    stream = chat.approve_stream(pause.ref, principal="bob")
    assert isinstance(list(stream)[-1], TurnEndChunk)
    assert stream.response().finish_reason == AgentFinishReason.STOP and len(executed) == 1
    assert chat.audit_trail()[-1].principal == "bob"
