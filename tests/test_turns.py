"""Partial answers (several resumes, the model continues after the last), restarts that pause again
(a new pause, not an error), no silent abandonment (send while paused is refused; cancel_pending),
tool errors that never corrupt a session; plus max_turns and model failures."""

import asyncio

import pytest

from pausepoint import AgentFinishReason, ToolResponse
from pausepoint.errors import ConcurrentUpdate, ModelError, NothingToResume, PendingInterrupts
from pausepoint.testing import tool_call

from .helpers import approvals_agent, version

THREE_ASKS = [
    [tool_call("ask", {"question": "a"}), tool_call("ask", {"question": "b"}), tool_call("ask", {"question": "c"})],
    "all answered",
]


async def test_partial_answers_across_several_resumes(store):
    agent, model = approvals_agent(store, THREE_ASKS)
    chat = agent.chat()
    res = await chat.send("go")
    a, b, c = res.interrupts

    res = await chat.resume(respond=[b.respond({"approved": True})], principal="bob")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    assert [i.ref for i in res.interrupts] == [a.ref, c.ref]
    assert len(model.requests) == 1  # the model waits for every answer

    # a different process / approver picks up the rest from the store
    other_agent, other_model = approvals_agent(store, ["unused"])
    other_model_steps = other_model.remaining
    other = other_agent.chat(chat.session_id)
    assert [i.ref for i in await other.interrupts()] == [a.ref, c.ref]
    res = await other.resume(respond=[c.respond({"approved": False})], principal="carol")
    assert [i.ref for i in res.interrupts] == [a.ref]
    assert other_model.remaining == other_model_steps

    res = await chat.resume(respond=[a.respond({"approved": True})], principal="alice")
    assert res.finish_reason == AgentFinishReason.STOP
    assert res.text == "all answered"
    outputs = [p.output for p in model.requests[-1].messages[-1].tool_responses]
    assert outputs == [{"approved": True}, {"approved": True}, {"approved": False}]
    assert [(e.ref, e.principal) for e in await chat.audit_trail()] == [
        ("", None),  # the user message (sent without a principal)
        (b.ref, "bob"),
        (c.ref, "carol"),
        (a.ref, "alice"),
    ]


async def test_restart_and_respond_in_one_resume(store):
    ledger: list[str] = []
    agent, _ = approvals_agent(
        store,
        [[tool_call("guarded", {"action": "x"}), tool_call("ask", {"question": "?"})], "both done"],
        ledger=ledger,
    )
    chat = agent.chat()
    res = await chat.send("go")
    guarded, ask = res.interrupts
    res = await chat.resume(respond=[ask.respond({"approved": True})], restart=[guarded.restart()])
    assert res.finish_reason == AgentFinishReason.INTERRUPTED  # guarded paused again
    [again] = res.interrupts
    assert again.name == "guarded" and again.ref == guarded.ref  # one ref per call...
    assert again.pause_id != guarded.pause_id  # ...and a new pause of it
    res = await chat.resume(restart=[again.restart(resumed_metadata={"ok": True})])
    assert res.text == "both done"
    assert ledger == ["guarded:x"]


async def test_send_while_paused_is_refused_and_changes_nothing(store):
    agent, _ = approvals_agent(store, THREE_ASKS)
    chat = agent.chat()
    res = await chat.send("go")
    before = await version(store, chat.session_id)
    with pytest.raises(PendingInterrupts) as info:
        await chat.send("something else")
    assert info.value.details["refs"] == [i.ref for i in res.interrupts]
    assert await version(store, chat.session_id) == before
    assert len(await chat.interrupts()) == 3


async def test_pending_interrupts_names_the_pauses_in_the_order_the_model_asked_for_them(store):
    """As every listing does (found by a probe: a call paused by its approval gate, asked second,
    came first in the refusal's refs, as it paused first)."""
    from pausepoint import Pausepoint
    from pausepoint.testing import ScriptedModel

    from .helpers import Ask

    ai = Pausepoint()
    ask = ai.define_interrupt(name="ask", description="Ask a person.", input_schema=Ask)

    @ai.tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        return f"paid {amount}"

    model = ScriptedModel([[tool_call("ask", {"question": "?"}), tool_call("pay", {"amount": 5})]])
    chat = ai.define_agent(name="a", model=model, tools=[ask, pay], store=store).chat()
    res = await chat.send("go")
    assert [i.name for i in res.interrupts] == ["ask", "pay"]
    with pytest.raises(PendingInterrupts) as info:
        await chat.send("something else")
    assert info.value.details["refs"] == [i.ref for i in res.interrupts]


async def test_cancel_pending_leaves_a_history_the_model_accepts(store):
    agent, model = approvals_agent(store, [*THREE_ASKS[:1], "fresh start"])
    chat = agent.chat()
    res = await chat.send("go")
    await chat.resume(respond=[res.interrupts[0].respond({"approved": True})])
    cancelled = await chat.cancel_pending("user changed their mind")
    assert cancelled.finish_reason == AgentFinishReason.ABORTED
    assert cancelled.interrupts == []
    with pytest.raises(NothingToResume):
        await chat.cancel_pending("again")
    res = await chat.send("new topic")
    assert res.text == "fresh start"
    roles = [m.role for m in model.requests[-1].messages]
    assert roles == ["user", "model", "tool", "user"]
    outputs = [p.output for p in model.requests[-1].messages[2].tool_responses]
    assert outputs == [
        {"approved": True},
        {"cancelled": True, "reason": "user changed their mind"},
        {"cancelled": True, "reason": "user changed their mind"},
    ]
    assert [e.decision for e in await chat.audit_trail()] == ["message", "respond", "cancel", "cancel", "message"]


async def test_tool_error_is_handed_to_the_model_by_default(store):
    agent, model = approvals_agent(store, [[tool_call("boom", {"reason": "disk full"})], "recovered"])
    chat = agent.chat()
    res = await chat.send("go")
    assert res.finish_reason == AgentFinishReason.STOP
    assert res.text == "recovered"
    [result] = model.requests[-1].messages[-1].tool_responses
    assert result.is_error and result.output == {"error": "RuntimeError: disk full"}
    assert (await chat.history())[-2].tool_responses[0].is_error


async def test_tool_error_fails_the_turn_when_asked_and_the_session_stays_usable(store):
    ledger: list[str] = []
    agent, model = approvals_agent(
        store,
        [[tool_call("boom", {"reason": "disk full"}), tool_call("lookup", {"key": "k"})], "after failure"],
        ledger=ledger,
        tool_errors="fail",
    )
    chat = agent.chat()
    res = await chat.send("go")
    assert res.finish_reason == AgentFinishReason.FAILED
    assert "disk full" in (res.error or "")
    assert len(model.requests) == 1
    res = await chat.send("try something else")
    assert res.text == "after failure"
    assert [m.role for m in model.requests[-1].messages] == ["user", "model", "tool", "user"]
    assert sorted(ledger) == ["boom", "lookup:k"]


async def test_invalid_tool_input_from_the_model_is_reported_to_it(store):
    agent, model = approvals_agent(store, [[tool_call("pay", {"amount": "lots"})], [tool_call("nope", {})], "ok"])
    res = await agent.chat().send("go")
    assert res.text == "ok"
    bad_input = model.requests[1].messages[-1].tool_responses[0]
    assert bad_input.is_error and "invalid input" in bad_input.output["error"]
    unknown = model.requests[2].messages[-1].tool_responses[0]
    assert unknown.is_error and "unknown tool" in unknown.output["error"]


async def test_max_turns_ends_the_turn_with_a_valid_history(store):
    agent, _ = approvals_agent(store, [[tool_call("lookup", {"key": str(i)})] for i in range(3)] + ["x"], max_turns=2)
    chat = agent.chat()
    res = await chat.send("loop")
    assert res.finish_reason == AgentFinishReason.MAX_TURNS
    assert [m.role for m in await chat.history()] == ["user", "model", "tool", "model", "tool"]


async def test_model_failure_leaves_the_session_as_before_the_turn(store):
    agent, _ = approvals_agent(store, ["first", ModelError("provider down"), "second"])
    chat = agent.chat()
    await chat.send("one")
    before = await version(store, chat.session_id)
    with pytest.raises(ModelError):
        await chat.send("two")
    assert await version(store, chat.session_id) == before  # nothing of the turn was recorded
    assert [m.text for m in await chat.history()] == ["one", "first"]
    assert (await chat.send("three")).text == "second"


async def test_a_model_failure_after_a_tool_ran_keeps_its_result_and_ends_the_turn_failed(store):
    """The tool ran, so its result stays; the turn those records belong to then ends ``failed``,
    as a tool's failure does — a response, not an error inviting the same send again, which would
    run the tool again (a failure before anything was recorded is the model's error: see above)."""
    from pausepoint.errors import ModelRateLimited

    late = ModelRateLimited("slow down", retry_after=7)
    agent, _ = approvals_agent(store, ["first", [tool_call("lookup", {"key": "a"})], late, "again"])
    chat = agent.chat()
    await chat.send("one")
    failed = await chat.send("two")
    assert failed.finish_reason == AgentFinishReason.FAILED
    assert failed.error == "ModelRateLimited: slow down"
    assert [m.role for m in await chat.history()] == ["user", "model", "user", "model", "tool"]
    last = await chat.last_response()
    assert (last.finish_reason, last.error) == (AgentFinishReason.FAILED, "ModelRateLimited: slow down")
    assert (await chat.send("three")).text == "again"


async def test_a_model_that_raises_an_exception_of_its_own_fails_typed_as_a_model_error(store):
    bug = RuntimeError("token sk-123 rejected by /srv/internal/models.py")
    agent, _ = approvals_agent(store, ["first", bug, "second"])
    chat = agent.chat()
    await chat.send("one")
    before = await version(store, chat.session_id)
    with pytest.raises(ModelError) as raised:
        await chat.send("two")
    assert raised.value.code == "model_error" and raised.value.__cause__ is bug
    assert "RuntimeError" in raised.value.message and "sk-123" not in raised.value.message  # its text stays in the log
    assert await version(store, chat.session_id) == before
    assert (await chat.send("three")).text == "second"


async def test_a_message_of_no_parts_is_refused_and_nothing_is_recorded(store):
    from pausepoint import Message
    from pausepoint.errors import InvalidMessage

    agent, _ = approvals_agent(store, ["first"])
    chat = agent.chat()
    for empty in ([], Message("user", [])):
        with pytest.raises(InvalidMessage, match="at least one part"):
            await chat.send(empty)
    assert await store.get_summary(chat.session_id) is None
    assert (await chat.send("")).text == "first"  # an empty text is still a part


async def test_a_crashed_continuation_is_resumed_by_an_empty_resume(store):
    agent, _ = approvals_agent(store, [[tool_call("ask", {"question": "?"})], ModelError("down"), "continued"])
    chat = agent.chat()
    res = await chat.send("go")
    failed = await chat.resume(respond=[res.interrupts[0].respond({"approved": True})])
    assert (failed.finish_reason, failed.error) == (AgentFinishReason.FAILED, "ModelError: down")
    assert await chat.interrupts() == []  # the answer was recorded before the model failed
    res = await chat.resume()
    assert res.text == "continued"
    with pytest.raises(NothingToResume):
        await chat.resume()


async def test_unknown_session_reads_are_refused_and_a_send_creates_it_under_the_callers_id(store):
    from pausepoint.errors import InvalidSessionId, SessionNotFound

    agent, _ = approvals_agent(store, ["created", "continued"])
    with pytest.raises(SessionNotFound):
        await agent.chat("missing").interrupts()
    # A new chat (its id its own) reads as empty until its first send makes the session, as
    # Genkit's chat.messages is [] (found by a probe: an inbox polling a new chat crashed).
    fresh = agent.chat()
    reads = (fresh.history(), fresh.interrupts(), fresh.audit_trail(), fresh.grants(), fresh.last_response())
    assert [await read for read in reads] == [[], [], [], [], None]
    assert await store.get_summary(fresh.session_id) is None  # reading made nothing
    with pytest.raises(SessionNotFound):
        await agent.chat("missing").resume(respond=[ToolResponse("r", "ask", {"approved": True})])
    assert (await agent.chat("my-conv-1", principal="alice").send("hi")).text == "created"
    assert (await agent.chat("my-conv-1").send("again")).text == "continued"  # the same session
    [summary] = await agent.list_sessions()
    assert (summary.session_id, summary.owner, summary.turn) == ("my-conv-1", "alice", 2)
    for bad in ("", "-rf", ".hidden", "a b", "x" * 129, "sess\x00", "naïve", "a/b"):
        with pytest.raises(InvalidSessionId):
            await agent.chat(bad).send("hi")
    assert [s.session_id for s in await agent.list_sessions()] == ["my-conv-1"]  # nothing else written


async def test_a_create_only_chat_never_continues_a_session_it_did_not_create(store):
    from pausepoint import Chat
    from pausepoint.errors import SessionNotFound

    agent, model = approvals_agent(store, ["first", "second", "third"])
    await agent.chat("taken", principal="alice").send("hi")  # cached in this process, too
    with pytest.raises(SessionNotFound):
        await Chat(agent, "taken", "bob", new=True).send("let me in")
    assert model.remaining == 2  # refused before the model was called
    racers = [Chat(agent, "race", who, new=True).send("mine") for who in ("alice", "bob")]
    outcomes = await asyncio.gather(*racers, return_exceptions=True)
    assert sorted(type(o).__name__ for o in outcomes) == ["AgentResponse", "SessionNotFound"]
    assert [m.text for m in await agent.chat("taken").history()] == ["hi", "first"]
    # Two first sends of one caller (a double click, a retry): the loser is told to send again,
    # not that its own session does not exist (found by a probe, through two server processes).
    twins = [Chat(agent, "twins", "carol", new=True).send("mine") for _ in range(2)]
    outcomes = await asyncio.gather(*twins, return_exceptions=True)
    assert sorted(type(o).__name__ for o in outcomes) == ["AgentResponse", "ConcurrentUpdate"]
    [lost] = [o for o in outcomes if isinstance(o, Exception)]
    assert lost.code == "concurrent_update" and "send again" in str(lost)


async def test_a_keyed_first_send_sent_again_while_its_turn_runs_gets_the_first_outcome(store):
    """Found by a probe: the retry of a session's first message under its key, while that turn
    ran, waited for it and then got ConcurrentUpdate; a later message's retry got the outcome."""
    from pausepoint import Chat

    agent, model = approvals_agent(store, ["first", "never"])
    twins = [Chat(agent, "keyed", "carol", new=True).send("mine", idempotency_key="k1") for _ in range(2)]
    first, again = await asyncio.gather(*twins)
    assert first == again and first.text == "first"
    assert model.remaining == 1  # the model was asked once
    assert [m.text for m in await agent.chat("keyed").history()] == ["mine", "first"]


async def test_a_keyed_first_send_taken_by_another_process_meanwhile_gets_its_outcome(tmp_path):
    """The same across processes: the one whose append finds the session made (by the same
    caller, under the same key) replays that outcome instead of ConcurrentUpdate."""
    from pausepoint import Chat
    from pausepoint.stores import SqliteSessionStore

    from .test_detach import SlowModel, slow_agent

    held, quick = SlowModel(["wait"]), SlowModel(["made elsewhere"])
    here = slow_agent(SqliteSessionStore(tmp_path / "s.db"), held, [])
    there = slow_agent(SqliteSessionStore(tmp_path / "s.db"), quick, [])
    waiting = asyncio.create_task(Chat(here, "keyed", "carol", new=True).send("mine", idempotency_key="k1"))
    await held.started.wait()  # its model is asked, nothing written yet
    made = await Chat(there, "keyed", "carol", new=True).send("mine", idempotency_key="k1")
    held.gate.set()
    assert await waiting == made and made.text == "made elsewhere"
    assert [m.text for m in await there.chat("keyed").history()] == ["mine", "made elsewhere"]
    # Unkeyed, or another caller's: refused as before.
    other = asyncio.create_task(Chat(here, "twice", "carol", new=True).send("one"))
    held.steps.append("wait")
    held.gate.clear()
    quick.steps.append("two")
    await Chat(there, "twice", "carol", new=True).send("two")
    held.gate.set()
    with pytest.raises(ConcurrentUpdate, match="send again"):
        await other


async def test_a_keyed_first_send_finding_its_turn_running_elsewhere_waits_for_it(tmp_path):
    """The other process made the session and runs the turn still (a tool of it): the retry is
    told it has not finished (ResumeInProgress), never runs the turn itself; once it ends, the
    retry gets its outcome."""
    from pausepoint import Chat
    from pausepoint.errors import ResumeInProgress
    from pausepoint.stores import SqliteSessionStore

    from .test_detach import SlowModel, slow_agent

    ledger: list[str] = []
    tool_gate, tool_started = asyncio.Event(), asyncio.Event()
    held, quick = SlowModel(["wait"]), SlowModel([[tool_call("record", {"n": 1})], "recorded"])
    here = slow_agent(SqliteSessionStore(tmp_path / "s.db"), held, ledger)
    there = slow_agent(SqliteSessionStore(tmp_path / "s.db"), quick, ledger, tool_gate=tool_gate,
                       tool_started=tool_started)  # fmt: skip
    waiting = asyncio.create_task(Chat(here, "keyed", "carol", new=True).send("mine", idempotency_key="k1"))
    await held.started.wait()  # asked its model: nothing written yet
    running = asyncio.create_task(Chat(there, "keyed", "carol", new=True).send("mine", idempotency_key="k1"))
    await tool_started.wait()  # the session is written there, its tool runs
    held.gate.set()
    with pytest.raises(ResumeInProgress):
        await waiting
    tool_gate.set()
    made = await running
    assert made.text == "recorded" and ledger == ["start:1", "done:1"]
    assert await Chat(here, "keyed", "carol").send("mine", idempotency_key="k1") == made
    assert ledger == ["start:1", "done:1"]


async def test_the_tool_requests_of_one_model_turn_run_concurrently(store):
    import asyncio

    from pausepoint import Pausepoint
    from pausepoint.testing import ScriptedModel

    ai = Pausepoint()
    both_running = asyncio.Barrier(2)

    @ai.tool()
    async def meet(name: str) -> str:
        """Returns only once both calls are running at the same time."""
        await asyncio.wait_for(both_running.wait(), timeout=5)
        return f"met {name}"

    model = ScriptedModel([[tool_call("meet", {"name": "a"}), tool_call("meet", {"name": "b"})], "together"])
    agent = ai.define_agent(name="c", model=model, tools=[meet], store=store)
    assert (await agent.chat().send("go")).text == "together"
    assert [p.output for p in model.requests[-1].messages[-1].tool_responses] == ["met a", "met b"]


async def test_a_turn_appends_only_what_it_adds(store):
    """Earlier records are never rewritten, and a turn adds the same number of records
    whatever the history's length."""
    agent, _ = approvals_agent(store, [f"reply {i}" for i in range(30)])
    chat = agent.chat()
    await chat.send("first")
    first = await store.read(chat.session_id)
    sizes = []
    for i in range(29):
        before = await version(store, chat.session_id)
        await chat.send(f"message {i}")
        sizes.append(await version(store, chat.session_id) - before)
    assert set(sizes) == {3}  # user message, model message, turn end
    later = await store.read(chat.session_id)
    assert later.entries[: len(first.entries)] == first.entries


async def test_fail_mode_keeps_paused_siblings_open_and_answering_them_continues(store):
    """A failed tool ends the turn as FAILED, but its paused sibling is not abandoned: it stays
    listed and answerable, and answering it lets the model see both results."""
    agent, model = approvals_agent(
        store,
        [[tool_call("boom", {"reason": "disk full"}), tool_call("ask", {"question": "?"})], "saw both"],
        tool_errors="fail",
    )
    chat = agent.chat()
    res = await chat.send("go")
    assert res.finish_reason == AgentFinishReason.FAILED and "disk full" in (res.error or "")
    [pause] = res.interrupts
    assert pause.name == "ask"
    res = await chat.resume(respond=[pause.respond({"approved": True})])
    assert res.text == "saw both"
    outputs = [(p.is_error, p.output) for p in model.requests[-1].messages[-1].tool_responses]
    assert outputs == [(True, {"error": "RuntimeError: disk full"}), (False, {"approved": True})]
