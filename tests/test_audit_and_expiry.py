"""Every answer is audited (who, when, through what, what was decided); an expired pause cannot be
answered and is resolved by the agent's expiry policy."""

import functools
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel

from pausepoint import AgentFinishReason, Interrupt, Pausepoint, ToolResponse
from pausepoint.errors import DefinitionError, InterruptExpired, PendingInterrupts
from pausepoint.testing import ScriptedModel, tool_call


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


class Question(BaseModel):
    question: str


def expiring_agent(store, steps, clock, **options):
    ai = Pausepoint(clock=clock)
    ask = ai.define_interrupt(name="ask", description="Ask a person.", input_schema=Question, ttl=timedelta(minutes=5))

    @ai.tool()
    async def deploy(target: str) -> str:
        """Deploys after approval, for at most an hour."""
        raise Interrupt({"target": target}, ttl=3600)

    model = ScriptedModel(steps)
    return ai.define_agent(name="expiring", model=model, tools=[ask, deploy], store=store, **options), model


async def test_audit_trail_records_who_when_through_what_and_what(store):
    clock = FakeClock()
    agent, _ = expiring_agent(
        store, [[tool_call("ask", {"question": "a"}), tool_call("deploy", {"target": "prod"})], "done"], clock
    )
    chat = agent.chat(principal="owner")
    res = await chat.send("go")
    ask, deploy = res.interrupts
    clock.advance(minutes=1)
    await chat.resume(
        respond=[ask.respond("yes", metadata={"note": "fine"})],
        principal="alice",
        via="console",
        metadata={"ticket": 7},
    )
    clock.advance(minutes=1)
    await chat.resume(respond=[deploy.deny("not on a Friday")], principal="bob", idempotency_key="k")
    sent, first, second = await chat.audit_trail()
    assert (sent.decision, sent.principal, sent.via, sent.ref, sent.name) == ("message", "owner", "python", "", "")
    assert sent.message is not None and sent.message.text == "go"
    assert sent.at == datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
    assert (first.ref, first.name, first.decision, first.principal, first.via) == (
        ask.ref,
        "ask",
        "respond",
        "alice",
        "console",
    )
    assert first.at == datetime(2026, 1, 1, 9, 1, tzinfo=UTC)
    assert first.output == "yes" and first.metadata == {"ticket": 7, "note": "fine"}
    assert (second.decision, second.principal, second.reason, second.idempotency_key) == (
        "deny",
        "bob",
        "not on a Friday",
        "k",
    )
    assert second.output == {"denied": True, "reason": "not on a Friday"}
    assert second.at == datetime(2026, 1, 1, 9, 2, tzinfo=UTC)


async def test_a_denial_without_a_reason_is_recorded_one_way_however_it_was_given(store):
    """Found by a probe: REST's /resume deny without a reason was audited with reason None, its
    /deny route (and the Genkit wire, MCP, ``PendingInterrupt.deny()``) with "" — one decision
    read back two ways."""
    clock = FakeClock()
    calls = [tool_call("deploy", {"target": "a"}), tool_call("deploy", {"target": "b"})]
    agent, _ = expiring_agent(store, [calls, "done"], clock)
    chat = agent.chat()
    first, second = (await chat.send("go")).interrupts
    await chat.resume(respond=[first.deny(), ToolResponse(second.ref, second.name, decision="deny")])
    denials = [entry for entry in await chat.audit_trail() if entry.decision == "deny"]
    assert [(e.reason, e.output) for e in denials] == [("", {"denied": True, "reason": ""})] * 2


async def test_pauses_carry_their_expiry(store):
    clock = FakeClock()
    agent, _ = expiring_agent(
        store, [[tool_call("ask", {"question": "a"}), tool_call("deploy", {"target": "x"})]], clock
    )
    res = await agent.chat().send("go")
    ask, deploy = res.interrupts
    assert ask.expires_at == clock.now + timedelta(minutes=5)
    assert deploy.expires_at == clock.now + timedelta(hours=1)
    [summary] = await agent.list_sessions(has_pending=True)
    assert summary.pending == 2 and summary.next_expiry == ask.expires_at


async def test_an_expired_pause_cannot_be_answered_and_the_model_sees_a_denial(store):
    clock = FakeClock()
    agent, model = expiring_agent(store, [[tool_call("ask", {"question": "a"})], "understood, cancelled"], clock)
    chat = agent.chat()
    res = await chat.send("go")
    clock.advance(minutes=6)
    with pytest.raises(InterruptExpired):
        await chat.resume(respond=[res.interrupts[0].respond("too late")])
    assert [e.decision for e in await chat.audit_trail()] == ["message"]  # the refusal recorded nothing
    assert await agent.list_sessions(expiring_before=clock.now) != []

    [settled] = await agent.settle_expired()
    assert settled.finish_reason == AgentFinishReason.STOP
    assert settled.text == "understood, cancelled"
    [result] = model.requests[-1].messages[-1].tool_responses
    assert result.output["denied"] is True and "expired" in result.output["reason"]
    _, entry = await chat.audit_trail()
    assert (entry.decision, entry.via) == ("expire", "expiry")
    assert await agent.settle_expired() == []


async def test_send_after_every_pause_expired_resolves_them_by_policy(store):
    clock = FakeClock()
    policy_seen = []

    def on_expiry(interrupt):
        policy_seen.append(interrupt.name)
        return {"status": "timed out"}

    agent, model = expiring_agent(
        store, [[tool_call("ask", {"question": "a"})], "new answer"], clock, on_expiry=on_expiry
    )
    chat = agent.chat()
    await chat.send("go")
    with pytest.raises(PendingInterrupts):
        await chat.send("too early")
    clock.advance(minutes=10)
    res = await chat.send("moving on")
    assert res.text == "new answer"
    assert policy_seen == ["ask"]
    assert model.requests[-1].messages[2].tool_responses[0].output == {"status": "timed out"}


async def test_a_resume_settles_expired_siblings_it_does_not_answer(store):
    clock = FakeClock()
    agent, model = expiring_agent(
        store, [[tool_call("ask", {"question": "a"}), tool_call("deploy", {"target": "x"})], "done"], clock
    )
    chat = agent.chat()
    res = await chat.send("go")
    _, deploy = res.interrupts
    clock.advance(minutes=30)  # ask (5 min) expired, deploy (1 h) is live
    res = await chat.resume(respond=[deploy.respond("deployed by hand")])
    assert res.text == "done"
    outputs = [p.output for p in model.requests[-1].messages[-1].tool_responses]
    assert outputs[0]["denied"] is True and outputs[1] == "deployed by hand"


async def test_cancelling_settles_an_expired_pause_by_the_expiry_policy_and_cancels_the_live_ones(store):
    """Found by a probe: cancel_pending recorded an expired pause as cancelled, where the SPEC says
    an expired one is resolved by the agent's expiry policy (as every answer to it is refused)."""
    clock = FakeClock()
    agent, _ = expiring_agent(
        store, [[tool_call("ask", {"question": "a"}), tool_call("deploy", {"target": "x"})]], clock,
        on_expiry=lambda interrupt: {"status": "timed out"},
    )  # fmt: skip
    chat = agent.chat()
    await chat.send("go")
    clock.advance(minutes=30)  # ask (5 min) expired, deploy (1 h) is live
    res = await chat.cancel_pending("no longer needed")
    assert res.finish_reason == AgentFinishReason.ABORTED
    decisions = {e.name: (e.decision, e.via) for e in await chat.audit_trail() if e.decision != "message"}
    assert decisions == {"ask": ("expire", "expiry"), "deploy": ("cancel", "python")}
    outputs = [p.output for p in (await chat.history())[-1].tool_responses]
    assert outputs == [{"status": "timed out"}, {"cancelled": True, "reason": "no longer needed"}]


async def test_an_expiry_policy_that_raises_leaves_no_session_stuck(store):
    """A policy that raises tells the model the pause expired and why no output came, as one
    whose output cannot be recorded does: the sweep settles the pause, and the session goes on
    (found by a probe: every call on the session failed, and one agent's broken policy stopped
    the server's sweep for every agent)."""
    clock = FakeClock()

    def broken(interrupt):
        raise RuntimeError("the policy's lookup is down")

    steps = [[tool_call("ask", {"question": "a"})], "the question expired", "hello"]
    agent, model = expiring_agent(store, steps, clock, on_expiry=broken)
    chat = agent.chat()
    await chat.send("go")
    clock.advance(minutes=6)
    [settled] = await agent.settle_expired()
    assert settled.text == "the question expired"
    [result] = model.requests[-1].messages[-1].tool_responses
    told = "the expiry policy failed: RuntimeError: the policy's lookup is down"
    assert result.output == {"expired": True, "error": told}
    assert (await chat.send("hi")).text == "hello"


@pytest.mark.parametrize("answer", ["respond", "restart"])
async def test_an_expiry_policy_returning_an_answer_is_told_as_a_mistake_not_taken_for_the_output(store, answer):
    """Found by a probe: ``lambda p: p.respond(...)`` (or ``p.restart()``) recorded the answer
    object's fields as the tool's output, and the model read them as what the tool returned."""
    clock = FakeClock()
    policy = {"respond": lambda p: p.respond({"approved": False}), "restart": lambda p: p.restart()}[answer]
    steps = [[tool_call("ask", {"question": "a"})], "the question expired"]
    agent, model = expiring_agent(store, steps, clock, on_expiry=policy)
    await agent.chat().send("go")
    clock.advance(minutes=6)
    [settled] = await agent.settle_expired()
    assert settled.text == "the question expired"
    [result] = model.requests[-1].messages[-1].tool_responses
    assert result.output["expired"] is True
    assert "returned an answer (respond, deny or restart)" in result.output["error"]


def test_an_expiry_policy_that_cannot_decide_at_once_is_refused_when_the_agent_is_defined(store):
    async def later(interrupt):
        return {"denied": True}

    class Later:  # an object whose __call__ is async (found by a probe: taken, then never awaited)
        async def __call__(self, interrupt):
            return {"denied": True}

    for policy in (later, functools.partial(later), Later(), "deny"):
        with pytest.raises(DefinitionError, match="on_expiry must be a plain function"):
            expiring_agent(store, [], FakeClock(), on_expiry=policy)


async def test_an_escalation_in_the_trail_counts_the_approvals_given_by_then(store):
    """As its event does (found by a probe: the trail said 0 of 2, the webhook and the feed 1 of 2)."""
    from pausepoint import ApprovalPolicy, Escalation, Role
    from tests.approval_apps import MEMBERS, Clock, build

    policy = ApprovalPolicy(
        roles={"treasury": Role(tools=["transfer_money"]), "leads": Role(tools=["transfer_money"])},
        members=MEMBERS,
        quorum={"transfer_money": 2},
        ttl={"transfer_money": timedelta(minutes=10)},
        escalation={"transfer_money": [Escalation(to=["treasury", "leads"], ttl=timedelta(hours=1))]},
    )
    clock = Clock()
    agent, _, ledger = build(store, policy, clock=clock)
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    await chat.approve(pause.ref, principal="alice")  # 1 of 2
    clock.advance(timedelta(minutes=11))
    await agent.settle_expired()
    await chat.approve(pause.ref, principal="erin")  # 2 of 2, after the escalation
    trail = [(e.decision, e.principal, e.approvals, e.required) for e in await chat.audit_trail()][1:]
    assert trail == [("approve", "alice", 1, 2), ("escalate", None, 1, 2), ("approve", "erin", 2, 2)]
    assert ledger == ["500->savings"]


async def test_a_call_short_of_its_quorum_at_expiry_is_denied_saying_how_many_approved(store):
    """Found by a probe: the model was told "nobody answered" though someone had approved."""
    from tests.approval_apps import Clock, build, told, treasury

    policy = treasury(quorum={"transfer_money": 2}, ttl={"transfer_money": timedelta(minutes=10)})
    clock = Clock()
    agent, model, ledger = build(store, policy, clock=clock)
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    await chat.approve(pause.ref, principal="alice")
    clock.advance(timedelta(minutes=11))
    await agent.settle_expired()
    [result] = told(model)
    deadline = pause.expires_at.isoformat().replace("+00:00", "Z")  # as every surface writes a time
    assert result == {"denied": True, "reason": f"expired: it had 1 of the 2 approvals it needs by {deadline}"}
    assert ledger == []


async def test_a_time_in_words_is_written_as_in_the_bodies(store):
    """Found by a probe: REST's times end in Z, but the times written into words — the expiry's
    reason in the audit trail, what the model is told, the refusals of a late answer — ended in
    +00:00: two spellings of one time on one surface."""
    from pausepoint.errors import AlreadyResolved, InterruptExpired
    from tests.approval_apps import Clock, build, told, treasury

    clock = Clock()
    agent, model, _ = build(store, treasury(ttl={"transfer_money": timedelta(minutes=10)}), clock=clock)
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    clock.advance(timedelta(minutes=11))
    with pytest.raises(InterruptExpired) as late:
        await chat.approve(pause.ref, principal="alice")
    deadline = pause.expires_at.isoformat().replace("+00:00", "Z")
    assert str(late.value).endswith(f"expired at {deadline}")
    await agent.settle_expired()
    [expired] = [e for e in await chat.audit_trail() if e.decision == "expire"]
    assert expired.reason == f"no answer before {deadline}"
    assert deadline in told(model)[0]["reason"]
    [second] = (await chat.send("pay 7 to savings")).interrupts
    await chat.resume(respond=[second.deny("not today")], principal="alice")
    with pytest.raises(AlreadyResolved) as again:
        await chat.approve(second.ref, principal="bob")
    denied_at = clock().isoformat().replace("+00:00", "Z")
    assert f"deny by alice at {denied_at}" in str(again.value), str(again.value)
