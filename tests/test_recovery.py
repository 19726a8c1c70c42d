"""A process that dies while a tool runs: the call is written down before a tool that must not
run twice starts, and a later call settles it without running it again."""

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from pausepoint import AgentFinishReason, Pausepoint, ToolRunContext, TurnStatus
from pausepoint.errors import AlreadyResolved, ResumeInProgress, TurnInProgress
from pausepoint.testing import ScriptedModel, tool_call


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


class Hang:
    """Where a tool's process "dies": the tool arrives, then waits for ever (its task is
    cancelled). ``all_arrived`` is set once ``calls`` tools are hanging there."""

    def __init__(self, calls: int = 1) -> None:
        self.calls = calls
        self.arrived = 0
        self.all_arrived = asyncio.Event()
        self._never = asyncio.Event()

    async def __call__(self) -> None:
        self.arrived += 1
        if self.arrived == self.calls:
            self.all_arrived.set()
        await self._never.wait()


class Mortal:
    """The shared store as one process sees it. Once the process "dies" (``dead``), it writes
    nothing more: a cancelled call in a live process records the calls it cuts short
    (``test_cut_short``), a dead one cannot."""

    def __init__(self, store) -> None:
        self._store = store
        self.dead = False

    def __getattr__(self, name):
        return getattr(self._store, name)

    async def append(self, session_id, expected_version, entries, summary, events=(), *, durable=True):
        if self.dead:
            raise RuntimeError("this process is dead")
        return await self._store.append(session_id, expected_version, entries, summary, events, durable=durable)


def make_agent(store, clock, steps, ledger, *, hang: Hang | None = None, seen_in_store=None):
    ai = Pausepoint(clock=clock)

    @ai.tool()
    async def transfer(amount: int, ctx: ToolRunContext) -> str:
        """Moves money: must never run twice."""
        if seen_in_store is not None:
            seen_in_store.append(await store.read(ctx.session_id))
        ledger.append(f"transfer:{amount}")
        if hang is not None:
            await hang()  # the process "dies" here: its task is cancelled
        return "moved"

    @ai.tool(idempotent=True)
    async def lookup(key: str) -> str:
        """Reads only: safe to run again."""
        ledger.append(f"lookup:{key}")
        if hang is not None:
            await hang()
        return f"value of {key}"

    model = ScriptedModel(steps)
    return ai.define_agent(name="bank", model=model, tools=[transfer, lookup], store=store), model


async def dies(mortal: Mortal) -> None:
    """The process of ``mortal``'s store dies: it writes nothing more, and everything it ran
    (but the test) stops where it was."""
    mortal.dead = True
    running = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in running:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)


async def die_mid_call(agent, text, hang):
    """Send ``text`` and "kill the process" once its tool calls hang (cancel the call of an
    agent on a ``Mortal`` store, dead first)."""
    chat = agent.chat()
    task = asyncio.create_task(chat.send(text))
    await hang.all_arrived.wait()
    agent.store.dead = True
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return chat.session_id


async def test_the_call_is_recorded_before_a_non_idempotent_tool_runs(store):
    clock, ledger, seen = Clock(), [], []
    agent, _ = make_agent(store, clock, [[tool_call("transfer", {"amount": 5})], "done"], ledger, seen_in_store=seen)
    assert (await agent.chat().send("pay")).text == "done"
    [log] = seen
    assert any(e.kind == "message" and b"transfer" in e.data for e in log.entries)


async def test_a_lost_call_is_settled_as_unknown_outcome_never_run_twice(store):
    clock, ledger = Clock(), []
    hang = Hang()
    dying, _ = make_agent(Mortal(store), clock, [[tool_call("transfer", {"amount": 5})]], ledger, hang=hang)
    session_id = await die_mid_call(dying, "pay 5", hang)
    assert ledger == ["transfer:5"]

    later, model = make_agent(store, clock, ["It may not have gone through; let me check."], ledger)
    chat = later.chat(session_id)
    with pytest.raises(TurnInProgress):  # it may still be running in its process
        await chat.resume()
    # what is known: no result recorded, not that the tool still runs (found by a probe: a call
    # that had finished, its result riding with the model's answer, was said to be running)
    with pytest.raises(TurnInProgress, match="have no recorded result yet: another process runs them, or asks"):
        await chat.send("hello?")

    clock.now += timedelta(minutes=16)  # past abandon_after: presumed lost
    res = await chat.resume()
    assert res.finish_reason == AgentFinishReason.STOP
    assert ledger == ["transfer:5"]  # not run again
    [result] = model.requests[-1].messages[-1].tool_responses
    assert result.is_error and result.output["outcome"] == "unknown"


async def test_a_lost_idempotent_call_runs_again_and_send_settles_lost_calls(store):
    clock, ledger = Clock(), []
    hang = Hang(calls=2)
    dying, _ = make_agent(
        Mortal(store),
        clock,
        [[tool_call("transfer", {"amount": 1}), tool_call("lookup", {"key": "k"})]],
        ledger,
        hang=hang,
    )
    session_id = await die_mid_call(dying, "go", hang)
    assert sorted(ledger) == ["lookup:k", "transfer:1"]

    clock.now += timedelta(hours=1)
    later, model = make_agent(store, clock, ["fresh reply"], ledger)
    res = await later.chat(session_id).send("next question")
    assert res.text == "fresh reply"
    assert sorted(ledger) == ["lookup:k", "lookup:k", "transfer:1"]
    roles = [m.role for m in model.requests[-1].messages]
    assert roles == ["user", "model", "tool", "user"]
    outputs = [p.output for p in model.requests[-1].messages[2].tool_responses]
    assert outputs[0]["outcome"] == "unknown" and outputs[1] == "value of k"


def gated_bank(store, clock, steps, ledger, hang=None):
    """A bank whose transfer requires approval, and whose process may "die" in the transfer."""
    ai = Pausepoint(clock=clock)

    @ai.tool(requires_approval=True)
    async def transfer(amount: int) -> str:
        """Moves money: must never run twice."""
        ledger.append(f"transfer:{amount}")
        if hang is not None:
            await hang()  # the process "dies" here
        return "moved"

    return ai.define_agent(name="bank", model=ScriptedModel(steps), tools=[transfer], store=store)


async def test_a_keyed_answers_retry_completes_once_the_process_that_took_it_is_presumed_lost(store):
    """The answer is recorded, its approved tool starts, and the process dies. A retry with the
    same idempotency key — from another process — says the resume is in progress while that
    process may still be running it, and once it is presumed lost goes on as an empty resume
    would: the call recorded as of unknown outcome, never run twice; later retries replay it."""
    clock, ledger, hang = Clock(), [], Hang()
    mortal = Mortal(store)
    chat = gated_bank(mortal, clock, [[tool_call("transfer", {"amount": 5})]], ledger, hang).chat()
    [pause] = (await chat.send("pay 5")).interrupts
    task = asyncio.create_task(chat.approve(pause.ref, idempotency_key="yes-once"))
    await hang.all_arrived.wait()
    mortal.dead = True
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ledger == ["transfer:5"]

    retry = gated_bank(store, clock, ["It may not have gone through."], ledger).chat(chat.session_id)
    with pytest.raises(ResumeInProgress):  # its process may still be running the transfer
        await retry.approve(pause.ref, idempotency_key="yes-once")
    clock.now += timedelta(minutes=16)  # past abandon_after: presumed lost
    res = await retry.approve(pause.ref, idempotency_key="yes-once")
    assert (res.finish_reason, res.text, ledger) == (
        AgentFinishReason.STOP,
        "It may not have gone through.",
        ["transfer:5"],
    )
    assert await retry.approve(pause.ref, idempotency_key="yes-once") == res  # replayed, not run again


async def test_a_message_after_a_keyed_answers_lost_turn_ends_it_first(store):
    """The answer is recorded, its tool runs, and the process dies while the model answers. A
    message from another process waits for that turn until it is presumed lost, then goes on; a
    retry of the answer with its key then gets its own turn's end (lost), not the end of the turn
    the message started (found by a probe)."""
    clock, ledger = Clock(), []
    arrived, never = asyncio.Event(), asyncio.Event()

    async def dying(request):
        if request.messages[-1].role == "user":
            return [tool_call("transfer", {"amount": 5})]
        arrived.set()
        await never.wait()  # the process "dies" while the model answers the approval

    mortal = Mortal(store)
    chat = gated_bank(mortal, clock, dying, ledger).chat()
    [pause] = (await chat.send("pay 5")).interrupts
    task = asyncio.create_task(chat.approve(pause.ref, idempotency_key="yes-once"))
    await arrived.wait()
    mortal.dead = True
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    other = gated_bank(store, clock, ["Hello again."], ledger).chat(chat.session_id)
    with pytest.raises(TurnInProgress):  # its process may still be asking the model
        await other.send("hello")
    clock.now += timedelta(minutes=16)  # past abandon_after: presumed lost
    assert (await other.send("hello")).text == "Hello again."
    retried = await other.approve(pause.ref, idempotency_key="yes-once")
    assert retried.finish_reason == AgentFinishReason.FAILED and retried.error.startswith("lost: ")
    assert retried.text != "Hello again." and ledger == ["transfer:5"]


async def test_a_live_call_presumed_lost_gets_its_own_turns_end_not_the_next_turns(store):
    """The approved tool runs past ``abandon_after`` in a process that lives on; meanwhile
    another process presumes it lost and sends a message. When the tool returns, its caller is
    told how its own turn ended (lost, as its key replays it), not the message's answer (found by
    a probe: the approve returned the other turn's text, and its retry a different outcome)."""
    clock, ledger = Clock(), []
    arrived, release = asyncio.Event(), asyncio.Event()

    class Slow(Hang):
        async def __call__(self) -> None:
            arrived.set()
            await release.wait()

    chat = gated_bank(store, clock, [[tool_call("transfer", {"amount": 5})], "Sent."], ledger, Slow()).chat()
    [pause] = (await chat.send("pay 5")).interrupts
    task = asyncio.create_task(chat.approve(pause.ref, idempotency_key="yes-once"))
    await arrived.wait()

    clock.now += timedelta(minutes=16)  # past abandon_after: presumed lost
    other = gated_bank(store, clock, ["Hello again."], ledger).chat(chat.session_id)
    assert (await other.send("hello")).text == "Hello again."
    release.set()
    approved = await task
    assert approved.finish_reason == AgentFinishReason.FAILED and approved.error.startswith("lost: ")
    assert approved.text != "Hello again." and ledger == ["transfer:5"]
    assert await chat.approve(pause.ref, idempotency_key="yes-once") == approved  # one outcome for the key


async def detached_then_died(store, clock, ledger):
    """A chat whose keyed detached turn ("pay 5", key ``pay-once``) started its transfer, and
    whose process then died."""
    hang = Hang()
    mortal = Mortal(store)
    agent, _ = make_agent(mortal, clock, [[tool_call("transfer", {"amount": 5})]], ledger, hang=hang)
    chat = agent.chat()
    await chat.detach("pay 5", idempotency_key="pay-once")
    await hang.all_arrived.wait()
    await dies(mortal)
    return chat


async def test_a_keyed_detached_turns_retry_goes_on_once_its_process_is_presumed_lost(store):
    """A detached turn's tool starts and its process dies. Its retry with the same idempotency
    key says it is in progress while that process may still be running it; once presumed lost,
    the retry ends it (lost) and goes on as an empty resume would, the tool never run twice
    (found by a probe: the retry said "in progress" for ever)."""
    clock, ledger = Clock(), []
    chat = await detached_then_died(store, clock, ledger)
    assert ledger == ["transfer:5"]

    again, _ = make_agent(store, clock, ["It may not have gone through.", "Hello."], ledger)
    retry = again.chat(chat.session_id)
    with pytest.raises(ResumeInProgress):  # its process may still be running the transfer
        await retry.detach("pay 5", idempotency_key="pay-once")
    clock.now += timedelta(minutes=16)  # past abandon_after: presumed lost
    turn = await retry.detach("pay 5", idempotency_key="pay-once")
    assert await turn.status() == TurnStatus.FAILED
    ended = await turn.wait()
    assert ended.finish_reason == AgentFinishReason.FAILED and (ended.error or "").startswith("lost: ")
    assert ledger == ["transfer:5"]  # never run twice
    history = await retry.history()
    assert history[-1].text == "It may not have gone through."  # the model was told, as after any loss
    assert (await retry.send("hello")).finish_reason == AgentFinishReason.STOP  # the session goes on


async def test_a_message_from_another_process_waits_for_a_turn_asking_its_model(store):
    """An approved tool ran; its process, alive, asks the model for the next step. A message
    sent through another process meanwhile is refused (``TurnInProgress``, as a detached turn's
    would be) instead of cutting in: the approval's turn ends as the model says, not "lost" nor
    with ``ConcurrentUpdate``, and the message goes through once it has (found by a probe:
    through a second server, the owner's message won and the approver got a runtime error)."""
    clock, ledger = Clock(), []
    asking, answer = asyncio.Event(), asyncio.Event()

    async def slow_model(request):
        if request.messages[-1].role == "user":
            return [tool_call("transfer", {"amount": 5})]
        asking.set()
        await answer.wait()  # the model takes its time over the result
        return "Sent."

    chat = gated_bank(store, clock, slow_model, ledger).chat()
    [pause] = (await chat.send("pay 5")).interrupts
    approving = asyncio.create_task(chat.approve(pause.ref))
    await asking.wait()
    other = gated_bank(store, clock, ["Hello again."], ledger).chat(chat.session_id)
    with pytest.raises(TurnInProgress, match="asking its model in another process"):
        await other.send("hello")
    with pytest.raises(TurnInProgress):
        await other.resume()  # nor does an empty resume ask the model a second time
    with pytest.raises(AlreadyResolved):  # an answer to the pause is refused for what it is
        await other.approve(pause.ref)
    answer.set()
    approved = await approving
    assert (approved.finish_reason, approved.text, ledger) == (AgentFinishReason.STOP, "Sent.", ["transfer:5"])
    assert (await other.send("hello")).text == "Hello again."
    assert [m.text for m in await other.history()][-3:] == ["Sent.", "hello", "Hello again."]


async def test_an_abort_of_a_turn_whose_process_died_says_what_it_waits_for_and_ends_it_aborted(store):
    """Found by a probe: the abort answered "pending" and every call then said "wait for it to
    end, or abort it" — the thing just done — for ``abandon_after``."""
    clock, ledger, hang = Clock(), [], Hang()
    mortal = Mortal(store)
    agent, _ = make_agent(mortal, clock, [[tool_call("transfer", {"amount": 5})]], ledger, hang=hang)
    chat = agent.chat()
    started = await chat.detach("pay 5")
    await hang.all_arrived.wait()
    await dies(mortal)

    again, _ = make_agent(store, clock, ["Hello; the transfer may not have gone through."], ledger)
    other = again.chat(chat.session_id)
    assert await other.abort() == TurnStatus.PENDING  # asked to stop: nobody there to stop it yet
    with pytest.raises(TurnInProgress, match=r"an abort was asked at .*: it stops once the process running it") as busy:
        await other.send("hello")
    assert "or abort it" not in str(busy.value)
    clock.now += timedelta(minutes=16)  # presumed lost
    assert (await other.send("hello")).text == "Hello; the transfer may not have gone through."
    assert await started.status() == TurnStatus.ABORTED and ledger == ["transfer:5"]  # ended as asked, run once


async def test_a_call_after_an_abort_that_waited_out_a_running_tool_here_says_the_abort_was_asked(store, monkeypatch):
    """In the process running the detached turn, once an abort waited its time for a tool that
    goes on (found by a probe: the next call still said "wait for it to end, or abort it", the
    thing just done; another process's says an abort was asked)."""
    from pausepoint.runtime import _detach

    monkeypatch.setattr(_detach, "STOP_WAIT", 0.1)
    clock, ledger, hang = Clock(), [], Hang()
    agent, _ = make_agent(store, clock, [[tool_call("transfer", {"amount": 5})], "Stopped."], ledger, hang=hang)
    chat = agent.chat()
    started = await chat.detach("pay 5")
    await hang.all_arrived.wait()
    assert await chat.abort() == TurnStatus.PENDING  # the tool runs on: the turn stops after it
    with pytest.raises(TurnInProgress, match="an abort was asked: it stops once a tool it runs finishes") as busy:
        await chat.send("hello")
    assert "or abort it" not in str(busy.value)
    hang._never.set()
    assert (await started.wait()).finish_reason == AgentFinishReason.ABORTED and ledger == ["transfer:5"]


async def test_every_retry_with_a_lost_detached_turns_key_gets_one_outcome(store):
    """Found by a probe: the first keyed send retrying a detached turn presumed lost went on and
    answered ``stop``; the next retries with that key answered the lost turn's ``failed``."""
    clock, ledger = Clock(), []
    chat = await detached_then_died(store, clock, ledger)

    again, _ = make_agent(store, clock, ["It may not have gone through."], ledger)
    retry = again.chat(chat.session_id)
    clock.now += timedelta(minutes=16)  # past abandon_after: presumed lost
    first = await retry.send("pay 5", idempotency_key="pay-once")
    assert (first.finish_reason, first.text) == (AgentFinishReason.STOP, "It may not have gone through.")
    for _ in range(2):
        assert await retry.send("pay 5", idempotency_key="pay-once") == first
    assert ledger == ["transfer:5"]  # never run twice
