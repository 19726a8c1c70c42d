"""A process dies while a tool runs beside a call paused in the same batch (found by a probe):
the answer to the pause waited for ever for a turn nobody was finishing, a keyed retry of the
message said there was nothing to resume, and a cancellation said nothing was paused while
another process ran the turn."""

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from pausepoint import AgentFinishReason, ApprovalPolicy, Pausepoint
from pausepoint.errors import NothingToResume, PendingInterrupts, TurnInProgress
from pausepoint.testing import ScriptedModel, tool_call
from tests.test_recovery import Clock, Hang, Mortal, dies


class Question(BaseModel):
    question: str


BATCH = [tool_call("pay", {"amount": 4}), tool_call("transfer", {"amount": 5})]


def transfer_tool(ai: Pausepoint, ledger: list[str], hang: Hang | None) -> Any:
    @ai.tool()
    async def transfer(amount: int) -> str:
        """Moves money: must never run twice."""
        ledger.append(f"transfer:{amount}")
        if hang is not None:
            await hang()  # the process "dies" here
        return "moved"

    return transfer


def make_agent(store, clock, steps, ledger, hang: Hang | None = None, approval: ApprovalPolicy | None = None):
    """``pay`` pauses for approval; ``transfer`` runs at once (and never twice)."""
    ai = Pausepoint(clock=clock)

    @ai.tool(requires_approval=True)
    async def pay(amount: int) -> str:
        """Pays, once approved."""
        ledger.append(f"pay:{amount}")
        return "paid"

    transfer = transfer_tool(ai, ledger, hang)
    model = ScriptedModel(steps)
    return ai.define_agent(name="bank", model=model, tools=[pay, transfer], store=store, approval=approval)


async def dies_beside_a_pause(store, clock, ledger, key: str | None = None) -> str:
    """A session whose ``pay`` is paused and whose ``transfer`` was running when its process died."""
    hang, mortal = Hang(), Mortal(store)
    chat = make_agent(mortal, clock, [BATCH], ledger, hang).chat()
    sending = asyncio.create_task(chat.send("pay 4, move 5", idempotency_key=key))
    await hang.all_arrived.wait()
    await dies(mortal)
    assert sending.cancelled()
    assert ledger == ["transfer:5"]
    return chat.session_id


async def test_answering_the_pause_settles_the_call_that_died_beside_it(store):
    clock, ledger = Clock(), []
    session_id = await dies_beside_a_pause(store, clock, ledger)
    chat = make_agent(store, clock, ["Paid; the transfer may not have gone through."], ledger).chat(session_id)
    [pause] = await chat.interrupts()
    clock.now += timedelta(minutes=16)  # past abandon_after: the process is presumed lost
    res = await asyncio.wait_for(chat.approve(pause.ref), 10)
    assert (res.finish_reason, res.text) == (AgentFinishReason.STOP, "Paid; the transfer may not have gone through.")
    assert ledger == ["transfer:5", "pay:4"]  # the lost transfer not run again
    results = {p.name: p for p in (await chat.history())[-2].tool_responses}
    assert results["pay"].output == "paid"
    assert results["transfer"].is_error and results["transfer"].output["outcome"] == "unknown"


async def test_a_detached_answer_settles_the_call_that_died_beside_it_too(store):
    clock, ledger = Clock(), []
    session_id = await dies_beside_a_pause(store, clock, ledger)
    chat = make_agent(store, clock, ["Paid."], ledger).chat(session_id)
    [pause] = await chat.interrupts()
    clock.now += timedelta(minutes=16)
    turn = await chat.detach(restart=[pause.restart()])  # approving it, in the background
    res = await asyncio.wait_for(turn.wait(), 10)
    assert (res.finish_reason, res.text, ledger) == (AgentFinishReason.STOP, "Paid.", ["transfer:5", "pay:4"])
    [transfer] = [p for p in (await chat.history())[-2].tool_responses if p.name == "transfer"]
    assert transfer.is_error and transfer.output["outcome"] == "unknown"


async def test_a_keyed_retry_of_the_message_gets_its_turns_end_once_the_process_is_presumed_lost(store):
    clock, ledger = Clock(), []
    session_id = await dies_beside_a_pause(store, clock, ledger, key="m-1")
    chat = make_agent(store, clock, [], ledger).chat(session_id)
    clock.now += timedelta(minutes=16)
    res = await chat.send("pay 4, move 5", idempotency_key="m-1")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    assert [p.name for p in res.interrupts] == ["pay"] and ledger == ["transfer:5"]
    assert await chat.send("pay 4, move 5", idempotency_key="m-1") == res  # replayed from now on
    with pytest.raises(PendingInterrupts):  # the pause still waits for its answer
        await chat.send("hello?")


async def test_cancelling_while_another_process_runs_the_turn_says_so(store):
    clock, ledger, hang, mortal = Clock(), [], Hang(), Mortal(store)
    chat = make_agent(mortal, clock, [[tool_call("transfer", {"amount": 5})]], ledger, hang).chat()
    sending = asyncio.create_task(chat.send("move 5"))
    await hang.all_arrived.wait()
    other = make_agent(store, clock, [], ledger).chat(chat.session_id)
    with pytest.raises(TurnInProgress):  # not "nothing is paused": a turn runs there
        await other.cancel_pending("stop")
    await dies(mortal)
    assert sending.cancelled()
    clock.now += timedelta(minutes=16)
    with pytest.raises(NothingToResume):  # presumed lost, and nothing was paused
        await other.cancel_pending("stop")


async def test_an_answer_waiting_for_the_writer_of_a_call_that_died_beside_it_settles_it_once_presumed_lost(store):
    """Answered before ``abandon_after``, the approval runs its call and waits for the writer
    running the other call of its batch (found by a probe: it waited ``wait_timeout``, two
    minutes, then said ResumeInProgress, nothing settled though that process was presumed lost
    meanwhile). Once that call started ``abandon_after`` ago, the waiter settles it and goes on."""
    clock, ledger = Clock(), []
    session_id = await dies_beside_a_pause(store, clock, ledger)
    chat = make_agent(store, clock, ["Paid; the transfer may not have gone through."], ledger).chat(session_id)
    [pause] = await chat.interrupts()
    answering = asyncio.create_task(chat.approve(pause.ref))
    for _ in range(500):
        if "pay:4" in ledger:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    assert not answering.done()  # the transfer's writer may still be running it: waited for
    clock.now += timedelta(minutes=16)
    res = await asyncio.wait_for(answering, 10)
    assert (res.finish_reason, res.text) == (AgentFinishReason.STOP, "Paid; the transfer may not have gone through.")
    assert ledger == ["transfer:5", "pay:4"]  # the lost transfer not run again
    [transfer] = [p for p in (await chat.history())[-2].tool_responses if p.name == "transfer"]
    assert transfer.is_error and transfer.output["outcome"] == "unknown"


async def test_the_expiry_sweep_waits_for_no_writer_and_goes_on_to_the_other_sessions(store):
    """An expired pause beside a call another process runs (found by a probe: the sweep waited
    two minutes on that session, then raised, and no other session's expiry was settled)."""
    clock, ledger = Clock(), []
    policy = ApprovalPolicy(ttl={"pay": timedelta(minutes=5)})
    hang, mortal = Hang(), Mortal(store)
    running = make_agent(mortal, clock, [BATCH], ledger, hang, approval=policy).chat()
    sending = asyncio.create_task(running.send("pay 4, move 5"))
    await hang.all_arrived.wait()  # its transfer runs (in "another process")
    agent = make_agent(store, clock, [[tool_call("pay", {"amount": 1})], "Not paid."], ledger, approval=policy)
    ordinary = agent.chat()
    await ordinary.send("pay 1")
    clock.now += timedelta(minutes=6)  # both pauses expired; the transfer started 6 minutes ago
    settled = await asyncio.wait_for(agent.settle_expired(), 10)
    assert [r.text for r in settled] == ["Not paid."]  # the busy session's turn is its writer's to end
    assert [e.decision for e in await agent.chat(running.session_id).audit_trail()][-1] == "expire"
    sending.cancel()


async def test_cancelling_beside_a_call_another_process_runs_answers_with_the_turns_real_end(store):
    """Found by a probe: ``cancel_pending`` said the turn ended ``aborted`` while another process
    ran a call of its batch — and that process then ended the same turn ``stop``, its model
    reading the cancellation. The cancellation waits for that writer's end, as an answer does."""
    clock, ledger, hang, mortal = Clock(), [], Hang(), Mortal(store)
    running = make_agent(mortal, clock, [BATCH, "Moved 5; the payment was cancelled."], ledger, hang).chat()
    sending = asyncio.create_task(running.send("pay 4, move 5"))
    await hang.all_arrived.wait()
    other = make_agent(store, clock, [], ledger).chat(running.session_id)
    cancelling = asyncio.create_task(other.cancel_pending("not now"))
    await asyncio.sleep(0.2)
    assert not cancelling.done()  # the transfer still runs there
    hang._never.set()  # it finishes, and its process ends the turn
    cancelled, sent = await asyncio.wait_for(asyncio.gather(cancelling, sending), 10)
    assert cancelled.finish_reason == sent.finish_reason == AgentFinishReason.STOP
    assert cancelled.text == sent.text == "Moved 5; the payment was cancelled."
    assert ledger == ["transfer:5"]


def asking_agent(store, clock, steps, ledger, hang: Hang | None = None):
    """``ask`` is an interrupt (its pause is written with its batch's results); ``transfer`` runs."""
    ai = Pausepoint(clock=clock)
    ask = ai.define_interrupt(name="ask", description="Ask a person.", input_schema=Question, output_schema=str)

    transfer = transfer_tool(ai, ledger, hang)
    return ai.define_agent(name="bank", model=ScriptedModel(steps), tools=[ask, transfer], store=store)


@pytest.mark.parametrize("next_call", ["empty resume", "message"])
async def test_an_interrupt_beside_a_call_that_died_asks_again_once_the_process_is_presumed_lost(store, next_call):
    """Found by a probe: the interrupt's pause, written with its batch, died with the process;
    once presumed lost, an empty resume failed on an assertion (a 500 over REST), and a message
    went through, the model asked with two calls unanswered, the question then unanswerable."""
    clock, ledger, hang, mortal = Clock(), [], Hang(), Mortal(store)
    batch = [tool_call("ask", {"question": "Sure?"}), tool_call("transfer", {"amount": 5})]
    chat = asking_agent(mortal, clock, [batch], ledger, hang).chat()
    sending = asyncio.create_task(chat.send("ask, move 5"))
    await hang.all_arrived.wait()
    await dies(mortal)
    clock.now += timedelta(minutes=16)  # presumed lost
    other = asking_agent(store, clock, ["Moved, maybe; you said yes."], ledger).chat(chat.session_id)
    if next_call == "message":
        with pytest.raises(PendingInterrupts):  # the question is asked again, before any message
            await other.send("hello?")
        [asked] = await other.interrupts()
    else:
        res = await other.resume()
        assert res.finish_reason == AgentFinishReason.INTERRUPTED
        [asked] = res.interrupts
    assert asked.name == "ask" and ledger == ["transfer:5"]  # the lost transfer not run again
    done = await other.resume(respond=[asked.respond("yes")])
    assert done.text == "Moved, maybe; you said yes."
    results = {r.name: r.output for r in (await other.history())[2].tool_responses}
    assert results["ask"] == "yes" and results["transfer"]["outcome"] == "unknown"
    assert sending.cancelled()


async def test_cancelling_beside_a_call_whose_process_died_ends_the_turn_once_it_is_presumed_lost(store):
    """Waiting for the writer of a call that died, the cancellation settles that call once
    presumed lost and ends the turn ``aborted`` (found by a probe: it asked the model, which ran
    a new tool, in the cancelling process)."""
    clock, ledger = Clock(), []
    session_id = await dies_beside_a_pause(store, clock, ledger)
    other = make_agent(store, clock, [], ledger).chat(session_id)  # a model call would fail: none is made
    cancelling = asyncio.create_task(other.cancel_pending("not now"))
    await asyncio.sleep(0.2)
    assert not cancelling.done()  # the transfer's process may still be running it
    clock.now += timedelta(minutes=16)
    res = await asyncio.wait_for(cancelling, 10)
    assert res.finish_reason == AgentFinishReason.ABORTED and ledger == ["transfer:5"]
    results = {r.name: r.output for r in (await other.history())[-1].tool_responses}
    assert results["pay"] == {"cancelled": True, "reason": "not now"} and results["transfer"]["outcome"] == "unknown"


async def test_cancelling_once_the_call_beside_it_is_presumed_lost_settles_it_before_the_turn_ends(store):
    """Found by a probe: cancelled after ``abandon_after`` had run out, the turn ended ``aborted``
    with the lost call unsettled and the cancellation not in the history (its batch had no tool
    message); a process that did not presume the call lost yet then refused the next message
    with ``TurnInProgress`` for a turn that had ended."""
    clock, ledger = Clock(), []
    session_id = await dies_beside_a_pause(store, clock, ledger)
    clock.now += timedelta(minutes=16)  # presumed lost before anyone looks
    other = make_agent(store, clock, ["Noted."], ledger).chat(session_id)  # no model call for the cancel
    res = await other.cancel_pending("not now")
    assert res.finish_reason == AgentFinishReason.ABORTED and ledger == ["transfer:5"]
    results = {r.name: r.output for r in (await other.history())[-1].tool_responses}
    assert results["pay"] == {"cancelled": True, "reason": "not now"} and results["transfer"]["outcome"] == "unknown"
    clock.now -= timedelta(minutes=16)  # a process whose clock would not presume it lost yet: nothing runs
    assert (await other.send("hello")).text == "Noted." and ledger == ["transfer:5"]
