"""A call cut short in a process that lives on — cancelled (Ctrl+C, a server shutting down, a
caller's timeout), or its results refused by a failing store — leaves no tool call "running in
another process": the session goes on at once (not after ``abandon_after``), a keyed retry is
answered, and a result this process knows is recorded as it was, not as of unknown outcome."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pausepoint import Agent, AgentFinishReason, ApprovalPolicy, Pausepoint, ToolRestart
from pausepoint.errors import AlreadyResolved, StoreError
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, tool_call


class Transfers:
    """A tool that must not run twice (not idempotent), whose runs wait at a gate."""

    def __init__(self) -> None:
        self.ledger: list[str] = []
        self.started = asyncio.Event()
        self.gate = asyncio.Event()


def bank(
    store: SqliteSessionStore, transfers: Transfers, steps: list[Any], *, approval: bool = False, quorum: int = 1
) -> Agent:
    ai = Pausepoint()

    @ai.tool(requires_approval=approval)
    async def transfer(amount: int) -> str:
        """Move money."""
        transfers.ledger.append(f"start:{amount}")
        transfers.started.set()
        await transfers.gate.wait()
        transfers.ledger.append(f"done:{amount}")
        return f"moved {amount}"

    policy = ApprovalPolicy(quorum={"transfer": quorum}) if quorum > 1 else None
    return ai.define_agent(name="bank", model=ScriptedModel(steps), tools=[transfer], store=store, approval=policy)


class FailingStore(SqliteSessionStore):
    """A real SQLite store whose n-th append from now fails: before writing, or after (it
    committed) — and then, unless ``reads_back``, the read that follows fails too (the
    connection is down a moment: the writer cannot tell it was written)."""

    def __init__(self, path: Any) -> None:
        super().__init__(path)
        self._countdown, self._how, self._down = 0, "", False

    def fail(self, nth: int, how: str) -> None:
        self._countdown, self._how = nth, how

    async def append(self, *args: Any, **kwargs: Any) -> int:
        failing = self._countdown == 1
        self._countdown = max(0, self._countdown - 1)
        if failing and self._how == "before":
            raise StoreError("the database is unreachable")
        version = await super().append(*args, **kwargs)
        if failing:
            self._down = self._how == "after"  # "read back": the read that follows sees it written
            raise StoreError("the connection dropped after the commit")
        return version

    async def read(self, *args: Any, **kwargs: Any) -> Any:
        if self._down:
            self._down = False
            raise StoreError("the database is unreachable")
        return await super().read(*args, **kwargs)


@pytest.mark.parametrize("call", ["approval", "detached approval", "detached message", "message"])
async def test_an_append_the_store_reported_failed_but_kept_is_read_back_and_the_call_goes_on(tmp_path, call):
    """The store reports a failure after its commit, and the read that follows shows the append
    written: the call goes on as if told so — the caller never sees the failure, the tool runs
    once (found by a probe: a detached turn whose start was kept left the session refusing every
    call as "a detached turn is running", an abort included, with nothing running it)."""
    store, transfers = FailingStore(tmp_path / "s.db"), Transfers()
    transfers.gate.set()
    steps = [[tool_call("transfer", {"amount": 9})], "Moved 9.", "You're welcome."]
    agent = bank(store, transfers, steps, approval=call.endswith("approval"))
    chat = agent.chat()
    if call.endswith("approval"):
        ref = (await chat.send("move 9")).interrupts[0].ref
        store.fail(1, "read back")  # the approval's claim
        detached = call.startswith("detached")
        done = await (chat.detach(restart=[ToolRestart(ref, "transfer")]) if detached else chat.approve(ref))
    else:
        store.fail(1, "read back")  # the message's first append (the detached turn's start)
        done = await (chat.detach("move 9") if call.startswith("detached") else chat.send("move 9"))
    reply = await done.wait() if call.startswith("detached") else done
    assert (reply.finish_reason, reply.text) == (AgentFinishReason.STOP, "Moved 9.")
    assert transfers.ledger == ["start:9", "done:9"]  # once
    assert (await chat.send("thanks")).text == "You're welcome."  # the session takes the next call at once


async def test_a_send_cancelled_while_its_tool_runs_leaves_the_session_free_at_once(tmp_path):
    path, transfers = tmp_path / "s.db", Transfers()
    agent = bank(SqliteSessionStore(path), transfers, [[tool_call("transfer", {"amount": 5})]])
    chat = agent.chat()
    sending = asyncio.ensure_future(chat.send("move 5"))
    await transfers.started.wait()
    sending.cancel()  # Ctrl+C in a chat, a server past its shutdown grace
    with pytest.raises(asyncio.CancelledError):
        await sending
    # Another process goes on at once: the call is settled, of unknown outcome, and the turn ended.
    other = bank(SqliteSessionStore(path), transfers, ["Noted: the transfer may or may not have happened."])
    resumed = other.chat(chat.session_id)
    history = await resumed.history()
    output = history[-1].tool_responses[0].output
    assert output["outcome"] == "unknown" and output["error"].startswith("cancelled: ")
    assert (await resumed.last_response()).finish_reason == AgentFinishReason.ABORTED
    reply = await resumed.send("what happened?")
    assert reply.text == "Noted: the transfer may or may not have happened."
    assert transfers.ledger == ["start:5"]  # it ran once, and was never run again


async def test_a_send_cancelled_while_its_model_answers_the_results_leaves_the_session_free_at_once(tmp_path):
    """The tool ran and its result is recorded; the model is asked what follows, and the call is
    cancelled there. The turn ends ``aborted``: another process (a server started again after a
    shutdown) sends at once rather than wait ``abandon_after`` for a turn nothing runs, and an
    empty resume asks the model again."""
    path, transfers = tmp_path / "s.db", Transfers()
    transfers.gate.set()
    asked = asyncio.Event()

    async def model(request: Any) -> Any:
        if request.messages[-1].role == "user":
            return [tool_call("transfer", {"amount": 5})]
        asked.set()
        await asyncio.Event().wait()  # the provider takes its time: the call is cancelled here

    agent = bank(SqliteSessionStore(path), transfers, model)
    chat = agent.chat()
    sending = asyncio.ensure_future(chat.send("move 5"))
    await asked.wait()
    sending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sending
    other = bank(SqliteSessionStore(path), transfers, ["Moved 5.", "Hello."])
    resumed = other.chat(chat.session_id)
    assert (await resumed.last_response()).finish_reason == AgentFinishReason.ABORTED
    assert [m.role for m in await resumed.history()] == ["user", "model", "tool"]
    assert (await resumed.resume()).text == "Moved 5."  # the model, asked again, sees the result
    assert (await resumed.send("hi")).text == "Hello."
    assert transfers.ledger == ["start:5", "done:5"]


async def test_a_keyed_resume_cancelled_while_the_approved_tool_runs_is_answered_by_its_retry(tmp_path):
    path, transfers = tmp_path / "s.db", Transfers()
    agent = bank(SqliteSessionStore(path), transfers, [[tool_call("transfer", {"amount": 7})]], approval=True)
    paused = await agent.chat().send("move 7")
    ref = paused.interrupts[0].ref
    resuming = asyncio.ensure_future(agent.chat(paused.session_id).approve(ref, idempotency_key="k1"))
    await transfers.started.wait()
    resuming.cancel()
    with pytest.raises(asyncio.CancelledError):
        await resuming
    other = bank(SqliteSessionStore(path), transfers, ["unused"], approval=True)
    retried = await other.chat(paused.session_id).approve(ref, idempotency_key="k1")  # not ResumeInProgress
    assert retried.finish_reason == AgentFinishReason.ABORTED
    assert transfers.ledger == ["start:7"]


@pytest.mark.parametrize("key", ["k1", None])
@pytest.mark.parametrize("failure", ["before", "after"])
async def test_results_the_store_failed_to_write_are_recorded_by_the_next_call_here(tmp_path, failure, key):
    store, transfers = FailingStore(tmp_path / "s.db"), Transfers()
    steps = [[tool_call("transfer", {"amount": 9})], "Moved 9.", "Anything else?"]
    agent = bank(store, transfers, steps, approval=True)
    paused = await agent.chat().send("move 9")
    ref = paused.interrupts[0].ref
    transfers.gate.set()
    # The resume writes the approval (the tool runs after it), then the tool's result: that fails.
    store.fail(2, failure)
    chat = agent.chat(paused.session_id)
    with pytest.raises(StoreError):
        await chat.approve(ref, idempotency_key=key)
    # The retry goes on at once (nothing runs the call anywhere), with the tool's real result;
    # unkeyed too (it was told "already resolved", found by a probe: the result stayed unrecorded).
    retried = await chat.approve(ref, idempotency_key=key)
    assert retried.finish_reason == AgentFinishReason.STOP and retried.text == "Moved 9."
    history = await chat.history()
    assert history[-2].tool_responses[0].output == "moved 9"
    assert transfers.ledger == ["start:9", "done:9"]  # once


@pytest.mark.parametrize("retry", ["keyed", "unkeyed", "empty resume", "a restart with the input shown"])
async def test_an_approval_the_store_kept_though_it_said_it_failed_runs_its_call_on_the_retry(tmp_path, retry):
    """The approval's append is written, then the store reports a failure (a connection dropped
    after the commit): the tool never started. The retry here runs the approved call once, as
    the approval said — not "unknown outcome", nor a wait of ``abandon_after`` (found by a probe:
    the approval was lost and the model told the call may have run; an unkeyed retry was told
    the pause was already resolved)."""
    store, transfers = FailingStore(tmp_path / "s.db"), Transfers()
    steps = [[tool_call("transfer", {"amount": 9})], "Moved 9."]
    agent = bank(store, transfers, steps, approval=True)
    paused = await agent.chat().send("move 9")
    ref = paused.interrupts[0].ref
    transfers.gate.set()
    store.fail(1, "after")  # the approval's own append
    chat = agent.chat(paused.session_id)
    key = "k1" if retry == "keyed" else None
    with pytest.raises(StoreError):
        await chat.approve(ref, idempotency_key=key)
    assert transfers.ledger == []
    if retry == "a restart with the input shown":  # as Genkit's client sends an approval (a probe: refused)
        again = ToolRestart(ref, "transfer", replace_input={"amount": 9}, resumed_metadata={"tool_approved": True})
        retried = await chat.resume(restart=[again])
    else:
        retried = await (chat.resume() if retry == "empty resume" else chat.approve(ref, idempotency_key=key))
    assert (retried.finish_reason, retried.text) == (AgentFinishReason.STOP, "Moved 9.")
    assert transfers.ledger == ["start:9", "done:9"]  # once
    assert (await chat.history())[-2].tool_responses[0].output == "moved 9"


@pytest.mark.parametrize(
    "next_call", ["keyed retry", "unkeyed retry", "empty resume", "the other approved", "the other denied"]
)
async def test_an_approval_the_store_kept_beside_a_pause_still_open_runs_its_call_once(tmp_path, next_call):
    """As above, with another call of the batch still paused (found by a probe: every next call
    recorded the approved one as of unknown outcome, "the process stopped", and it never ran)."""
    store, transfers = FailingStore(tmp_path / "s.db"), Transfers()
    steps = [[tool_call("transfer", {"amount": 1}), tool_call("transfer", {"amount": 2})], "Done."]
    agent = bank(store, transfers, steps, approval=True)
    paused = await agent.chat().send("move 1 and 2")
    first, second = paused.interrupts
    transfers.gate.set()
    store.fail(1, "after")
    chat = agent.chat(paused.session_id)
    key = "k1" if next_call == "keyed retry" else None
    with pytest.raises(StoreError):
        await chat.approve(first.ref, idempotency_key=key)
    if next_call.endswith("retry"):
        reply = await chat.approve(first.ref, idempotency_key=key)
    elif next_call == "empty resume":
        reply = await chat.resume()
    else:
        decided = second.restart() if next_call == "the other approved" else second.deny("no")
        reply = await chat.resume(**{"restart" if next_call == "the other approved" else "respond": [decided]})
    assert transfers.ledger[:2] == ["start:1", "done:1"]  # run, once
    if reply.interrupts:  # the other still paused: answering it ends the turn
        assert [p.ref for p in reply.interrupts] == [second.ref]
        reply = await chat.approve(second.ref)
    assert reply.text == "Done." and transfers.ledger.count("start:1") == 1
    outputs = [r.output for r in (await chat.history())[2].tool_responses]
    assert outputs[0] == "moved 1" and outputs[1] in ("moved 2", {"denied": True, "reason": "no"})


async def test_a_keyed_approval_of_a_quorum_the_store_kept_gets_its_turns_end_on_the_retry(tmp_path):
    """One approval of two, counted (its append written), then the store reports a failure: its
    keyed retry was told ResumeInProgress for good (nothing ran it), and once presumed lost,
    NothingToResume. The retry gets the turn's end, the pause still open, counted once."""
    store, transfers = FailingStore(tmp_path / "s.db"), Transfers()
    agent = bank(store, transfers, [[tool_call("transfer", {"amount": 9})], "Moved 9."], approval=True, quorum=2)
    paused = await agent.chat().send("move 9")
    ref = paused.interrupts[0].ref
    store.fail(1, "after")
    chat = agent.chat(paused.session_id)
    with pytest.raises(StoreError):
        await chat.approve(ref, principal="alice", idempotency_key="a1")
    for _ in range(2):  # and again: the same end
        retried = await chat.approve(ref, principal="alice", idempotency_key="a1")
        assert retried.finish_reason == AgentFinishReason.INTERRUPTED and [p.ref for p in retried.interrupts] == [ref]
    [still] = await chat.interrupts()
    assert still.approval is not None and still.approval.approved_by == ["alice"]
    transfers.gate.set()
    assert (await chat.approve(ref, principal="bob")).text == "Moved 9." and transfers.ledger == ["start:9", "done:9"]


async def test_a_message_after_an_approval_the_store_kept_runs_the_approved_call_first(tmp_path):
    """The next call here is a message, not a retry: the approved call still runs, once, and the
    model reads its result before the message (found by a probe: it was recorded at once as of
    unknown outcome, "the process stopped", though this process knew it never started)."""
    store, transfers = FailingStore(tmp_path / "s.db"), Transfers()
    steps = [[tool_call("transfer", {"amount": 9})], "Moved 9.", "Hello."]
    agent = bank(store, transfers, steps, approval=True)
    paused = await agent.chat().send("move 9")
    transfers.gate.set()
    store.fail(1, "after")
    chat = agent.chat(paused.session_id)
    with pytest.raises(StoreError):
        await chat.approve(paused.interrupts[0].ref)
    reply = await chat.send("hi")
    assert reply.text == "Hello."
    assert transfers.ledger == ["start:9", "done:9"]
    history = await chat.history()
    assert [m.role for m in history] == ["user", "model", "tool", "model", "user", "model"]
    assert history[2].tool_responses[0].output == "moved 9" and history[3].text == "Moved 9."


@pytest.mark.parametrize("failure", ["before", "after"])
async def test_a_message_after_an_approval_whose_result_the_store_refused_lets_its_turn_end_first(tmp_path, failure):
    """The approved call ran; the store refused its result (before its commit, or after with the
    read-back failing too). A message here records it and the approval's turn goes on — its model
    answers the result — before the message (found by a probe: the message ended that turn
    "failed", "lost: the process running this turn stopped", its process alive, and the
    approval's keyed retry said so)."""
    store, transfers = FailingStore(tmp_path / "s.db"), Transfers()
    steps = [[tool_call("transfer", {"amount": 9})], "Moved 9.", "Hello."]
    agent = bank(store, transfers, steps, approval=True)
    paused = await agent.chat().send("move 9")
    transfers.gate.set()
    store.fail(2, failure)  # the approval's claim, then the call's result (the tool ran)
    chat = agent.chat(paused.session_id)
    with pytest.raises(StoreError):
        await chat.approve(paused.interrupts[0].ref, idempotency_key="a1")
    assert (await chat.send("hi")).text == "Hello."
    retried = await chat.approve(paused.interrupts[0].ref, idempotency_key="a1")
    assert (retried.finish_reason, retried.text) == (AgentFinishReason.STOP, "Moved 9.")
    assert transfers.ledger == ["start:9", "done:9"]  # once
    assert [m.role for m in await chat.history()] == ["user", "model", "tool", "model", "user", "model"]


async def test_another_answer_to_a_pause_the_store_kept_answered_is_still_refused(tmp_path):
    """Only the same answer by the same principal is a retry: a denial, or another person's
    approval, after the approval the store kept is told the pause is resolved, and writes nothing."""
    store, transfers = FailingStore(tmp_path / "s.db"), Transfers()
    agent = bank(store, transfers, [[tool_call("transfer", {"amount": 9})], "Moved 9."], approval=True)
    paused = await agent.chat().send("move 9")
    ref = paused.interrupts[0].ref
    store.fail(1, "after")
    chat = agent.chat(paused.session_id)
    with pytest.raises(StoreError):
        await chat.approve(ref, principal="alice")
    version = (await store.read(paused.session_id)).version
    with pytest.raises(AlreadyResolved):
        await chat.resume(respond=[paused.interrupts[0].deny("no")], principal="alice")
    with pytest.raises(AlreadyResolved):
        await chat.approve(ref, principal="bob")
    assert (await store.read(paused.session_id)).version == version and transfers.ledger == []


async def test_a_retry_of_an_approval_whose_turn_ended_though_the_store_said_it_failed_gets_that_end(tmp_path):
    """The store reported a failure of the append that ended the turn, and kept it: the retry
    here gets that end (it was told "already resolved"), and nothing runs again."""
    store, transfers = FailingStore(tmp_path / "s.db"), Transfers()
    agent = bank(store, transfers, [[tool_call("transfer", {"amount": 9})], "Moved 9."], approval=True)
    paused = await agent.chat().send("move 9")
    ref = paused.interrupts[0].ref
    transfers.gate.set()
    store.fail(3, "after")  # the approval, the result, then the model's answer and the turn's end
    chat = agent.chat(paused.session_id)
    with pytest.raises(StoreError):
        await chat.approve(ref)
    retried = await chat.approve(ref)
    assert (retried.finish_reason, retried.text) == (AgentFinishReason.STOP, "Moved 9.")
    assert retried == await chat.last_response()
    assert transfers.ledger == ["start:9", "done:9"]


async def test_a_new_chat_whose_first_send_failed_in_the_store_reads_the_session_next_time(tmp_path):
    """The failed send may have written the session (here: its first append did): the chat's
    next call reads the store rather than writing the session anew (which the store refused as
    a concurrent update, on every later call of that chat)."""
    store, transfers = FailingStore(tmp_path / "s.db"), Transfers()
    steps = [[tool_call("transfer", {"amount": 9})], "Moved 9.", "Moved 9, said again.", "Hello again."]
    agent = bank(store, transfers, steps)
    transfers.gate.set()
    store.fail(2, "before")
    chat = agent.chat()
    with pytest.raises(StoreError):
        await chat.send("move 9")
    reply = await chat.send("hello")  # the call left running is settled with its result, at once
    assert reply.text == "Hello again." and transfers.ledger == ["start:9", "done:9"]
    # its turn went on first: the model read the result (its answer was not kept) before the message
    history = [(m.role, m.text) for m in await chat.history()]
    assert history[-4:] == [
        ("tool", ""), ("model", "Moved 9, said again."), ("user", "hello"), ("model", "Hello again.")
    ]  # fmt: skip


async def test_a_new_chat_whose_first_send_failed_before_writing_still_reads_as_empty(tmp_path):
    """A model that fails before anything was recorded leaves the session as it was: none. The
    chat reads as the empty session it was before (found by a probe: ``SessionNotFound``)."""
    from pausepoint.errors import ModelError

    agent = bank(SqliteSessionStore(tmp_path / "s.db"), Transfers(), [ModelError("down"), "Hello."])
    chat = agent.chat()
    with pytest.raises(ModelError):
        await chat.send("hi")
    assert await chat.history() == [] and await chat.interrupts() == []
    assert await chat.last_response() is None and await chat.audit_trail() == []
    assert (await chat.send("hi")).text == "Hello."
