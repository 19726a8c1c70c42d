"""Exactly once: a paused call is answered at most once — across tasks, agents and processes; a
retry with the same idempotency key gets the first outcome."""

import asyncio
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from examples import banking
from pausepoint import Agent, AgentFinishReason, Pausepoint
from pausepoint.errors import AlreadyResolved, IdempotencyKeyReused, NothingToResume, PausepointError
from pausepoint.stores import InMemorySessionStore, SqliteSessionStore
from pausepoint.testing import ScriptedModel, tool_call

from .helpers import Ask, approvals_agent


class Clock:
    """A clock that says what it is told (``minutes`` past a fixed start)."""

    def __init__(self, minutes: int = 0) -> None:
        self.now = datetime(2026, 3, 1, tzinfo=UTC) + timedelta(minutes=minutes)

    def __call__(self) -> datetime:
        return self.now

ROOT = Path(__file__).resolve().parent.parent


async def test_many_tasks_on_one_agent_answer_once(store):
    ledger: list[str] = []
    _, agent = banking.build(store, ledger)
    res = await agent.chat().send("Transfer $500 to savings.")
    pause = res.interrupts[0]

    async def answer():
        try:
            return await agent.chat(res.session_id).resume(respond=[pause.respond({"approved": True})])
        except PausepointError as exc:
            return exc

    outcomes = await asyncio.gather(*(answer() for _ in range(20)))
    winners = [o for o in outcomes if not isinstance(o, Exception)]
    assert len(winners) == 1 and winners[0].text == "Transferred $500 to savings."
    assert all(isinstance(o, AlreadyResolved) for o in outcomes if o not in winners)
    assert ledger == ["500->savings"]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_many_agents_sharing_a_store_answer_once(backend, tmp_path):
    """Separate agents (as in separate processes) share nothing but the store: the store's
    conditional append alone must make the answer exactly-once."""
    shared = InMemorySessionStore()

    def make_store():
        return shared if backend == "memory" else SqliteSessionStore(tmp_path / "race.db")

    ledger: list[str] = []
    agents = [banking.build(make_store(), ledger)[1] for _ in range(8)]
    res = await agents[0].chat().send("Transfer $500 to savings.")
    pause = res.interrupts[0]

    async def answer(agent):
        try:
            return await agent.chat(res.session_id).resume(respond=[pause.respond({"approved": True})])
        except PausepointError as exc:
            return exc

    outcomes = await asyncio.gather(*(answer(a) for a in agents))
    assert sum(not isinstance(o, Exception) for o in outcomes) == 1
    assert sum(isinstance(o, AlreadyResolved) for o in outcomes) == len(agents) - 1
    assert ledger == ["500->savings"]
    history = await agents[3].chat(res.session_id).history()
    assert [m.role for m in history] == ["user", "model", "tool", "model", "tool", "model"]


def test_processes_racing_on_one_sqlite_file_answer_once(tmp_path):
    db, ledger, go = tmp_path / "s.db", tmp_path / "ledger.txt", tmp_path / "go"
    worker = [sys.executable, "-m", "tests.proc_worker"]
    paused = subprocess.run([*worker, "pause", db, ledger], cwd=ROOT, capture_output=True, text=True, check=True)
    started = json.loads(paused.stdout)
    procs = [
        subprocess.Popen(
            [*worker, "answer", db, ledger, started["session_id"], started["ref"], go],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    go.touch()
    outcomes = [json.loads(p.communicate(timeout=60)[0])["outcome"] for p in procs]
    assert sorted(outcomes) == ["already_resolved"] * 3 + ["ok"]
    assert len(ledger.read_text().splitlines()) == 1


async def test_retry_with_the_same_idempotency_key_returns_the_first_outcome(store):
    ledger: list[str] = []
    _, agent = banking.build(store, ledger)
    chat = agent.chat()
    res = await chat.send("Transfer $500 to savings.")
    answer = res.interrupts[0].respond({"approved": True})
    first = await chat.resume(respond=[answer], idempotency_key="k-1")
    again = await chat.resume(respond=[answer], idempotency_key="k-1")
    assert again == first
    # also from a fresh agent (another process would see the same store)
    _, fresh = banking.build(store, ledger)
    assert await fresh.chat(chat.session_id).resume(respond=[answer], idempotency_key="k-1") == first
    assert ledger == ["500->savings"]
    with pytest.raises(IdempotencyKeyReused):
        await chat.resume(respond=[res.interrupts[0].respond({"approved": False})], idempotency_key="k-1")
    with pytest.raises(AlreadyResolved):
        await chat.resume(respond=[answer], idempotency_key="k-2")


async def test_idempotent_partial_answer_replays_its_own_outcome(store):
    agent, _ = approvals_agent(
        store, [[tool_call("ask", {"question": "a"}), tool_call("ask", {"question": "b"})], "ok"]
    )
    chat = agent.chat()
    res = await chat.send("go")
    a, b = res.interrupts
    partial = await chat.resume(respond=[a.respond({"approved": True})], idempotency_key="first")
    assert partial.finish_reason == AgentFinishReason.INTERRUPTED
    assert [i.ref for i in partial.interrupts] == [b.ref]
    final = await chat.resume(respond=[b.respond({"approved": True})], idempotency_key="second")
    assert final.text == "ok"
    assert await chat.resume(respond=[a.respond({"approved": True})], idempotency_key="first") == partial


async def test_completed_siblings_never_run_again(store):
    ledger: list[str] = []
    agent, model = approvals_agent(
        store,
        [
            [tool_call("lookup", {"key": "a"}), tool_call("ask", {"question": "?"}), tool_call("pay", {"amount": 1})],
            "done",
        ],
        ledger=ledger,
    )
    chat = agent.chat()
    res = await chat.send("go")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    assert sorted(ledger) == ["lookup:a", "pay:1"]
    final = await chat.resume(respond=[res.interrupts[0].respond({"approved": True})])
    assert final.text == "done"
    assert sorted(ledger) == ["lookup:a", "pay:1"]
    tool_message = model.requests[-1].messages[-1]
    assert [(p.name, p.output) for p in tool_message.tool_responses] == [
        ("lookup", "value of a"),
        ("ask", {"approved": True}),
        ("pay", "paid 1"),
    ]


async def test_partial_answers_racing_with_a_restart_elsewhere_end_in_one_turn(store):
    """Two agents (as two processes): A restarts a call whose tool is still running when B
    answers the last open pause. A's result completes the batch, so A continues the model;
    B waits for that turn to end and returns its outcome. The model runs once."""
    from pausepoint import Interrupt, Pausepoint, ToolRunContext
    from pausepoint.testing import ScriptedModel

    release = asyncio.Event()
    started = asyncio.Event()
    runs: list[str] = []

    def make_agent(steps):
        ai = Pausepoint()

        @ai.tool()
        async def slow(label: str, ctx: ToolRunContext) -> str:
            """Pauses first; once restarted, waits for the test to release it."""
            if not ctx.is_resumed:
                raise Interrupt()
            started.set()
            await release.wait()
            runs.append(label)
            return f"slow {label}"

        model = ScriptedModel(steps)
        return ai.define_agent(name="race", model=model, tools=[slow], store=store), model

    agent_a, model_a = make_agent([[tool_call("slow", {"label": "1"}), tool_call("slow", {"label": "2"})], "finished"])
    agent_b, model_b = make_agent([])
    res = await agent_a.chat().send("go")
    first, second = res.interrupts

    a = asyncio.create_task(agent_a.chat(res.session_id).resume(restart=[first.restart()]))
    await started.wait()
    recorded = await store.last_event()
    b = asyncio.create_task(agent_b.chat(res.session_id).resume(respond=[second.respond("answered by B")]))
    answer = await asyncio.wait_for(next_event(store, recorded, "answer"), 10)
    assert answer.session_id == res.session_id
    for _ in range(100):  # B goes as far as it can while A's tool holds the turn
        await asyncio.sleep(0)
    assert not b.done()  # B's answer is recorded, but the turn is A's to finish
    release.set()
    res_a, res_b = await asyncio.gather(a, b)
    assert res_a.text == res_b.text == "finished"
    assert res_a.finish_reason == res_b.finish_reason == AgentFinishReason.STOP
    assert runs == ["1"]
    assert len(model_a.requests) == 2 and model_b.requests == []


async def next_event(store, after: int, kind: str):
    """The first ``kind`` event written after position ``after``, waiting for it."""
    while True:
        events = await store.read_events(after)
        for event in events:
            if event.kind == kind:
                return event
            after = event.seq
        if not events:
            await store.wait_for_events(after, 5.0)


class InterleavingStore(InMemorySessionStore):
    """A real in-memory store that lets another writer in just before the next append."""

    def __init__(self) -> None:
        super().__init__()
        self.before_next_append = None

    async def append(self, session_id, expected_version, entries, summary):
        hook, self.before_next_append = self.before_next_append, None
        if hook is not None:
            await hook()
        return await super().append(session_id, expected_version, entries, summary)


async def test_a_cancel_that_loses_the_race_to_an_answer_leaves_the_answer_alone():
    store = InterleavingStore()
    agent_a, _ = approvals_agent(store, [[tool_call("ask", {"question": "a"}), tool_call("ask", {"question": "b"})]])
    agent_b, _ = approvals_agent(store, ["unused"])
    res = await agent_a.chat().send("go")
    first, second = res.interrupts

    async def answer_first_elsewhere():
        await agent_b.chat(res.session_id).resume(respond=[first.respond({"approved": True})], principal="bob")

    store.before_next_append = answer_first_elsewhere
    cancelled = await agent_a.chat(res.session_id).cancel_pending("changed my mind", principal="alice")
    assert cancelled.finish_reason == AgentFinishReason.ABORTED
    trail = await agent_a.chat(res.session_id).audit_trail()
    assert [(e.ref, e.decision, e.principal) for e in trail] == [
        ("", "message", None),
        (first.ref, "respond", "bob"),
        (second.ref, "cancel", "alice"),
    ]
    history = await agent_b.chat(res.session_id).history()
    assert [p.output for p in history[-1].tool_responses] == [
        {"approved": True},
        {"cancelled": True, "reason": "changed my mind"},
    ]


async def test_a_cancel_that_loses_the_race_for_the_last_pause_cancels_nothing_and_ends_no_turn():
    """Found by a probe: a cancel racing an answer from another process said "aborted" while the
    answer's turn went on (its tool ran), and wrote a turn end of its own into that turn. The
    loser of the race is told nothing was paused, and writes nothing."""
    store = InterleavingStore()
    agent_a, _ = approvals_agent(store, [[tool_call("ask", {"question": "a"})]])
    agent_b, _ = approvals_agent(store, ["Thanks."])
    res = await agent_a.chat().send("go")
    pause = res.interrupts[0]
    answered = []

    async def answer_elsewhere():
        chat = agent_b.chat(res.session_id)
        answered.append(await chat.resume(respond=[pause.respond({"approved": True})], principal="bob"))

    store.before_next_append = answer_elsewhere
    with pytest.raises(NothingToResume):
        await agent_a.chat(res.session_id).cancel_pending("changed my mind", principal="alice")
    assert answered[0].finish_reason == AgentFinishReason.STOP
    trail = await agent_a.chat(res.session_id).audit_trail()
    assert [(e.decision, e.principal) for e in trail] == [("message", None), ("respond", "bob")]
    found = await store.read(res.session_id)
    ends = [json.loads(e.data)["finish_reason"] for e in found.entries if e.kind == "turn_ended"]
    assert ends == ["interrupted", "stop"]  # the send's and the answer's: none of the cancel's


async def test_an_expiry_sweep_that_loses_the_race_to_an_answer_leaves_the_turn_to_the_answer():
    """The sweep read the pause as expired; an answer from another process (whose clock had it
    live) got in first, and its process went on to the model. The sweep used to drop its claim
    and call the model too, for a turn that was not its own; now it looks again and does
    nothing."""
    store = InterleavingStore()
    model_calls: dict[str, list[str]] = {"answerer": [], "sweeper": []}
    release, at_model = asyncio.Event(), asyncio.Event()

    def agent(name: str, clock: Clock) -> Agent:
        ai = Pausepoint(clock=clock)
        ask = ai.define_interrupt(name="ask", description="Ask.", input_schema=Ask, ttl=timedelta(minutes=5))

        async def model(request):
            model_calls[name].append(request.messages[-1].role)
            if request.messages[-1].role == "user":
                return [tool_call("ask", {"question": "ok?"})]
            at_model.set()
            await release.wait()
            return "Done."

        return ai.define_agent(name="expiring", model=ScriptedModel(model), tools=[ask], store=store)

    answerer, sweeper = agent("answerer", Clock()), agent("sweeper", Clock(minutes=10))
    res = await answerer.chat().send("go")
    [pause] = res.interrupts
    answered = []

    async def answer_first():  # the answer's claim is in; its process is at the model
        chat = answerer.chat(res.session_id)
        answered.append(asyncio.create_task(chat.resume(respond=[pause.respond({"approved": True})])))
        await at_model.wait()

    store.before_next_append = answer_first
    assert await asyncio.wait_for(sweeper.chat(res.session_id).settle_expired(), 10) is None
    release.set()
    assert (await answered[0]).text == "Done."
    assert model_calls == {"answerer": ["user", "tool"], "sweeper": []}
    trail = await answerer.chat(res.session_id).audit_trail()
    assert [e.decision for e in trail] == ["message", "respond"]


async def test_a_pause_answered_elsewhere_while_its_siblings_run_here_ends_in_one_turn(store):
    """The model asks for two calls: one runs here (slowly), the other pauses for approval and is
    approved by another process meanwhile, which runs it. The process whose result completes the
    batch asks the model, and both callers get that turn's end (found by a probe: each waited
    for the other to finish the turn, both hung, and the session was stuck)."""
    started, release, paid, ran = asyncio.Event(), asyncio.Event(), asyncio.Event(), []

    def bank() -> Agent:
        ai = Pausepoint()

        @ai.tool()
        async def look_up(account: str) -> str:
            """Reads a balance, slowly."""
            ran.append("look_up")
            started.set()
            await release.wait()
            return "100"

        @ai.tool(requires_approval=True)
        async def pay(amount: int) -> str:
            """Pays."""
            ran.append("pay")
            paid.set()
            return "paid"

        def script(request):
            if request.messages[-1].text == "check and pay":
                return [tool_call("look_up", {"account": "a"}), tool_call("pay", {"amount": 5})]
            return "Paid 5; the balance was 100." if request.messages[-1].role == "tool" else "You are welcome."

        return ai.define_agent(name="bank", model=ScriptedModel(script), tools=[look_up, pay], store=store)

    here, elsewhere = bank(), bank()
    chat = here.chat()
    sending = asyncio.ensure_future(chat.send("check and pay"))
    await started.wait()
    other = elsewhere.chat(chat.session_id)
    [pause] = await other.interrupts()  # the pause is written before the slow call runs
    approving = asyncio.ensure_future(other.approve(pause.ref))
    await paid.wait()  # approved and run there while the slow call still runs here
    release.set()
    sent, approved = await asyncio.wait_for(asyncio.gather(sending, approving), 30)
    assert sent.text == approved.text == "Paid 5; the balance was 100."
    assert ran == ["look_up", "pay"]
    assert [m.role for m in await chat.history()] == ["user", "model", "tool", "model"]
    assert (await chat.send("thanks")).finish_reason == AgentFinishReason.STOP  # nothing stuck


async def test_keyed_answers_racing_in_two_processes_each_replay_the_turn_they_ended_in(store):
    """Two calls of one batch pause for approval; two processes approve one each, at once, each
    under its key. The turn ends once, and a retry of either key gets that end — as its live
    call did (found by a probe: the key whose process waited for the other's end said "not
    finished yet" for ever)."""
    started, release, ran = asyncio.Event(), asyncio.Event(), []

    def bank() -> Agent:
        ai = Pausepoint()

        @ai.tool(requires_approval=True)
        async def pay(to: str) -> str:
            """Pays, the first one slowly."""
            ran.append(to)
            if to == "a":
                started.set()
                await release.wait()
            return f"paid {to}"

        def script(request):
            if request.messages[-1].text == "pay both":
                return [tool_call("pay", {"to": "a"}), tool_call("pay", {"to": "b"})]
            return "Paid both."

        return ai.define_agent(name="bank", model=ScriptedModel(script), tools=[pay], store=store)

    here, elsewhere = bank(), bank()
    chat = here.chat()
    first, second = (await chat.send("pay both")).interrupts
    other = elsewhere.chat(chat.session_id)
    approving_a = asyncio.ensure_future(chat.approve(first.ref, idempotency_key="k-a"))
    await started.wait()  # a runs here, slowly
    approving_b = asyncio.ensure_future(other.approve(second.ref, idempotency_key="k-b"))
    await asyncio.sleep(0.05)
    release.set()
    live_a, live_b = await asyncio.wait_for(asyncio.gather(approving_a, approving_b), 30)
    assert sorted(ran) == ["a", "b"] and live_a.text == live_b.text == "Paid both."
    assert await here.chat(chat.session_id).approve(first.ref, idempotency_key="k-a") == live_a
    assert await elsewhere.chat(chat.session_id).approve(second.ref, idempotency_key="k-b") == live_b
    assert sorted(ran) == ["a", "b"]
