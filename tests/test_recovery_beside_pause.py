"""A process dies while a tool runs beside a call paused in the same batch (found by a probe):
the answer to the pause waited for ever for a turn nobody was finishing, a keyed retry of the
message said there was nothing to resume, and a cancellation said nothing was paused while
another process ran the turn."""

import asyncio
from datetime import timedelta

import pytest

from pausepoint import AgentFinishReason, Pausepoint
from pausepoint.errors import NothingToResume, PendingInterrupts, TurnInProgress
from pausepoint.testing import ScriptedModel, tool_call
from tests.test_recovery import Clock, Hang, Mortal, dies

BATCH = [tool_call("pay", {"amount": 4}), tool_call("transfer", {"amount": 5})]


def make_agent(store, clock, steps, ledger, hang: Hang | None = None):
    """``pay`` pauses for approval; ``transfer`` runs at once (and never twice)."""
    ai = Pausepoint(clock=clock)

    @ai.tool(requires_approval=True)
    async def pay(amount: int) -> str:
        """Pays, once approved."""
        ledger.append(f"pay:{amount}")
        return "paid"

    @ai.tool()
    async def transfer(amount: int) -> str:
        """Moves money: must never run twice."""
        ledger.append(f"transfer:{amount}")
        if hang is not None:
            await hang()  # the process "dies" here
        return "moved"

    return ai.define_agent(name="bank", model=ScriptedModel(steps), tools=[pay, transfer], store=store)


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
