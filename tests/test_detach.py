"""Detached turns: run in the background, visible as running, their result lands in the session
like any turn's; an abort really stops them (the model call is cancelled, no tool starts after
it, a tool already running is recorded). Across processes, and a process that dies mid-turn:
``test_detach_processes``. And Genkit's turn surface on ``TurnStream`` (``.stream``,
``.response``, ``.abort()``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pausepoint import (
    AgentFinishReason,
    DetachedTurn,
    Message,
    ModelRequest,
    ModelResponse,
    Pausepoint,
    TextPart,
    TurnStatus,
)
from pausepoint.errors import InvalidMessage, InvalidRequest, PendingInterrupts, TurnInProgress
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import tool_call

from .helpers import approvals_agent


class SlowModel:
    """A model whose calls wait at a gate; it notes each call's start and whether it was cancelled."""

    def __init__(self, steps: list[Any]) -> None:
        self.name = "slow"
        self.steps = steps
        self.gate = asyncio.Event()
        self.started = asyncio.Event()
        self.calls = 0
        self.cancelled = 0

    async def generate(self, request: ModelRequest, on_chunk: Any = None) -> ModelResponse:
        step = self.steps[self.calls]
        self.calls += 1
        self.started.set()
        if step == "wait":
            try:
                await self.gate.wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            step = "released"
        parts = step if isinstance(step, list) else [TextPart(step)]
        return ModelResponse(Message("model", parts))


def slow_agent(
    store,
    model: SlowModel,
    ledger: list[str],
    *,
    tool_gate: asyncio.Event | None = None,
    tool_started: asyncio.Event | None = None,
):
    ai = Pausepoint()

    @ai.tool()
    async def record(n: int) -> str:
        """Writes a line to the ledger (after the gate, when there is one)."""
        ledger.append(f"start:{n}")
        if tool_started is not None:
            tool_started.set()
        if tool_gate is not None:
            await tool_gate.wait()
        ledger.append(f"done:{n}")
        return f"recorded {n}"

    return ai.define_agent(name="slow", model=model, tools=[record], store=store, abort_poll=0.02)


async def test_a_detached_turn_runs_in_the_background_and_lands_like_any_turn(store):
    model, ledger = SlowModel(["wait"]), []
    agent = slow_agent(store, model, ledger)
    chat = agent.chat(principal="alice")
    turn = await chat.detach("summarise the logs")
    await model.started.wait()
    assert await turn.status() == TurnStatus.PENDING
    assert await chat.history() == []  # reads do not wait for it: nothing is recorded yet but its start
    with pytest.raises(TurnInProgress):  # the session is its own while it runs
        await chat.send("something else")
    with pytest.raises(TurnInProgress):
        await agent.chat(chat.session_id).detach("and another")
    model.gate.set()
    response = await turn.wait()
    assert response.finish_reason == AgentFinishReason.STOP and response.text == "released"
    assert await turn.status() == TurnStatus.COMPLETED
    assert [m.text for m in await chat.history()] == ["summarise the logs", "released"]
    assert (await chat.last_response()) == response
    assert await chat.abort() == TurnStatus.COMPLETED  # nothing runs: the last turn's status, unchanged


async def test_a_handle_with_a_turn_id_or_a_poll_it_cannot_use_is_refused_at_once(store):
    """Found by a probe: ``DetachedTurn(chat, "2")`` said "no detached turn 2" of a turn that
    runs; ``wait(poll="x")`` raised asyncio's TypeError; ``poll=-1`` or NaN read the store
    without pause (12,000 reads a second)."""
    model, ledger = SlowModel(["released"]), []
    chat = slow_agent(store, model, ledger).chat(principal="alice")
    turn = await chat.detach("summarise the logs")
    for turn_id in ("2", 2.0, True, 0, -1, None):
        with pytest.raises(InvalidRequest, match="turn_id must be a whole number"):
            DetachedTurn(chat, turn_id)  # type: ignore[arg-type]
    other = DetachedTurn(chat.agent.chat(chat.session_id), turn.turn_id)  # type: ignore[attr-defined]
    for poll in ("x", -1, 0, float("nan"), float("inf"), True):
        with pytest.raises(InvalidRequest, match="poll must be a positive number"):
            await other.wait(poll=poll)  # type: ignore[arg-type]
    assert (await other.wait(poll=0.01)).text == "released"


async def test_abort_cancels_the_model_call_and_the_prompt_never_enters_the_history(store):
    model, ledger = SlowModel(["wait", "after the abort"]), []
    agent = slow_agent(store, model, ledger)
    chat = agent.chat()
    turn = await chat.detach("take your time")
    await model.started.wait()
    assert await turn.abort(principal="ops") == TurnStatus.PENDING  # it was running: this call stops it
    # Once the abort returns, the turn has stopped (it ran here): its status says so, and the
    # session takes the next call at once (as Genkit's, whose next send works after an abort).
    assert await turn.status() == TurnStatus.ABORTED
    assert model.cancelled == 1  # the model call itself was cancelled
    assert await chat.history() == []
    assert (await chat.send("hello")).text == "after the abort"  # the session goes on
    response = await turn.wait()
    assert response.finish_reason == AgentFinishReason.ABORTED
    assert await turn.abort() == TurnStatus.ABORTED  # already over: nothing changes


async def test_an_aborted_message_answers_with_no_text_of_an_earlier_turn(store):
    """The model never answered the aborted message: its response has no model message (found by
    a probe: it carried the previous turn's answer, as if it replied to the aborted message)."""
    model, ledger = SlowModel(["first answer", "wait"]), []
    chat = slow_agent(store, model, ledger).chat()
    assert (await chat.send("hello")).text == "first answer"
    model.started.clear()
    turn = await chat.detach("take your time")
    await model.started.wait()
    await turn.abort()
    response = await turn.wait()
    assert (response.finish_reason, response.message, response.text) == (AgentFinishReason.ABORTED, None, "")
    assert await chat.last_response() == response
    assert [m.text for m in await chat.history()] == ["hello", "first answer"]


async def test_abort_while_a_tool_runs_records_it_and_starts_nothing_more(store):
    tool_gate, tool_started = asyncio.Event(), asyncio.Event()
    model = SlowModel([[tool_call("record", {"n": 1})], [tool_call("record", {"n": 2})], "never"])
    ledger: list[str] = []
    agent = slow_agent(store, model, ledger, tool_gate=tool_gate, tool_started=tool_started)
    chat = agent.chat()
    turn = await chat.detach("go")
    await tool_started.wait()  # the tool is running
    aborting = asyncio.ensure_future(chat.abort())  # it waits for the turn to stop: the tool finishes first
    await asyncio.sleep(0.05)
    assert not aborting.done() and await turn.status() == TurnStatus.PENDING
    tool_gate.set()  # the running tool finishes: its side effect is not cut in half
    assert await aborting == TurnStatus.PENDING
    assert await turn.status() == TurnStatus.ABORTED
    response = await turn.wait()
    assert response.finish_reason == AgentFinishReason.ABORTED
    assert ledger == ["start:1", "done:1"] and model.calls == 1  # no model call, no tool, after the abort
    history = await chat.history()
    assert [m.role for m in history] == ["user", "model", "tool"]
    assert history[2].tool_responses[0].output == "recorded 1"
    model.steps[1] = "carry on"
    assert (await chat.send("next")).text == "carry on"


async def test_an_abort_from_another_process_is_seen_through_the_store(tmp_path):
    path = tmp_path / "shared.db"
    here, there = SqliteSessionStore(path), SqliteSessionStore(path)
    model, ledger = SlowModel(["wait"]), []
    runner = slow_agent(here, model, ledger)
    other = slow_agent(there, SlowModel([]), [])  # the same agent, defined in "another process"
    turn = await runner.chat().detach("go")
    await model.started.wait()
    far = other.chat(turn.session_id)
    assert await far.abort() == TurnStatus.PENDING  # written to the log; the runner polls for it
    response = await turn.wait()
    assert response.finish_reason == AgentFinishReason.ABORTED and model.cancelled == 1
    assert (await far.last_response()) == response
    await here.close()
    await there.close()


async def test_a_detached_resume(store):
    ledger: list[str] = []
    steps = [[tool_call("ask", {"question": "ok?"})], [tool_call("pay", {"amount": 3})], "paid"]
    agent, _ = approvals_agent(store, steps, ledger=ledger)
    chat = agent.chat()
    pause = (await chat.send("pay 3")).interrupts[0]
    with pytest.raises(PendingInterrupts):  # refusals are raised by detach itself, nothing written
        await chat.detach("something else")
    with pytest.raises(InvalidMessage) as odd:
        await chat.detach(5)  # type: ignore[arg-type]
    assert str(odd.value) == "a message sent is a string, a Message or a list of parts, not int"  # fits every verb
    turn = await chat.detach(respond=[pause.respond({"approved": True})], idempotency_key="k")
    response = await turn.wait()
    assert response.text == "paid" and ledger == ["pay:3"]
    assert await chat.resume(respond=[pause.respond({"approved": True})], idempotency_key="k") == response


async def test_turn_stream_has_genkits_surface(store):
    agent, _ = approvals_agent(store, ["One two three four five."])
    turn = agent.chat().send_stream("hi")
    seen = []
    async for chunk in turn.stream:
        seen.append(chunk)
        await turn.abort()  # stop listening: the chunks end here...
    assert len(seen) == 1
    assert (await turn.response).text == "One two three four five."  # ...the turn went on


async def test_a_keyed_detach_sent_again_while_its_turn_runs_is_told_so_then_gets_that_turn(tmp_path):
    """From this process and from another: ``ResumeInProgress`` (a retry of the call that started
    the turn), not ``TurnInProgress`` inviting the caller to abort its own turn (found by a
    probe over the Genkit wire); once it ended, the retry gets the same turn."""
    from pausepoint.errors import IdempotencyKeyReused, ResumeInProgress

    model, ledger = SlowModel(["wait"]), []
    here = slow_agent(SqliteSessionStore(tmp_path / "s.db"), model, ledger)
    elsewhere = slow_agent(SqliteSessionStore(tmp_path / "s.db"), SlowModel([]), ledger)
    chat = here.chat(principal="alice")
    turn = await chat.detach("summarise the logs", idempotency_key="d1")
    await model.started.wait()
    for agent in (here, elsewhere):
        with pytest.raises(ResumeInProgress):
            await agent.chat(chat.session_id, principal="alice").detach("summarise the logs", idempotency_key="d1")
        with pytest.raises(TurnInProgress):  # another call: the session is the turn's while it runs
            await agent.chat(chat.session_id, principal="alice").detach("another", idempotency_key="d2")
        # its key with another message: refused as reused, here as elsewhere (found by a probe:
        # here, ResumeInProgress, which invites the retry that can never succeed)
        with pytest.raises(IdempotencyKeyReused):
            await agent.chat(chat.session_id, principal="alice").send("something else", idempotency_key="d1")
    model.gate.set()
    response = await turn.wait()
    assert response.text == "released" and model.calls == 1
    again = await elsewhere.chat(chat.session_id, principal="alice").detach("summarise the logs", idempotency_key="d1")
    assert again.turn_id == turn.turn_id and await again.wait() == response
    assert model.calls == 1
