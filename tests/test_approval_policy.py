"""SPEC 2.14: approval is bound to the call — ``requires_approval``, and the ``ApprovalPolicy``'s
rules, grants, quorum, separation of duties, roles and escalation, each accepted and refused,
with the audit entries they leave (on the in-memory store and a real SQLite file)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from pausepoint import (
    Agent,
    AgentFinishReason,
    ApprovalPolicy,
    Escalation,
    Grant,
    Interrupt,
    Pausepoint,
    Role,
    Rule,
    ToolRunContext,
)
from pausepoint.errors import (
    AlreadyApproved,
    AlreadyResolved,
    ApprovalForbidden,
    DecisionNotAllowed,
    DefinitionError,
    GrantNotFound,
    InputEditNotAllowed,
    InterruptExpired,
    InvalidAnswer,
    InvalidGrant,
    InvalidRequest,
    PausepointError,
    PendingInterrupts,
)
from pausepoint.stores import SessionStore, SqliteSessionStore
from pausepoint.testing import ScriptedModel, tool_call

from .approval_apps import MEMBERS, Clock, build, told, treasury
from .helpers import version

# -- requires_approval ----------------------------------------------------------------------------


async def test_a_call_that_requires_approval_pauses_before_it_runs_and_approving_runs_exactly_it(store):
    agent, _model, ledger = build(store)
    chat = agent.chat(principal="alice")
    res = await chat.send("pay 500 to savings")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED and ledger == []
    [pause] = res.interrupts
    assert (pause.name, pause.input) == ("transfer_money", {"amount": "500", "to_account": "savings"})
    assert pause.ref == (await chat.history())[-1].tool_requests[0].ref  # the call's own ref
    assert pause.metadata == {"reason": "transfer_money needs approval before it runs"}
    assert pause.approval is not None and pause.approval.gated and pause.approval.required == 1
    assert pause.approval.decisions == ["approve", "deny"]  # no made-up result, no edits: the tool said so
    view = agent.view(pause)
    assert view.approval is not None and view.approval.progress == "Needs approval"
    assert [f.text for f in view.fields] == ["500.00", "savings"]

    res = await chat.resume(restart=[agent.approval(pause)], principal="bob")
    assert (res.finish_reason, res.text) == (AgentFinishReason.STOP, "sent 500 to savings")
    assert ledger == ["500->savings"]
    entry = (await chat.audit_trail())[-1]
    assert (entry.decision, entry.principal, entry.ref, entry.approvals, entry.required) == (
        "approve",
        "bob",
        pause.ref,
        1,
        1,
    )
    assert entry.input == {"amount": "500", "to_account": "savings"}  # what was approved, exactly


async def test_denying_hands_the_model_the_denial_and_the_tool_never_runs(store):
    agent, model, ledger = build(store)
    chat = agent.chat()
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    res = await chat.resume(respond=[pause.deny("not this month")])
    assert res.finish_reason == AgentFinishReason.STOP and ledger == []
    assert told(model) == [{"denied": True, "reason": "not this month"}]


async def test_a_predicate_of_the_input_and_context_picks_the_calls_that_need_approval(store):
    seen: list[str] = []

    async def large(transfer, ctx: ToolRunContext) -> bool:
        seen.append(ctx.session_id)
        return transfer.amount > 100

    agent, _, ledger = build(store, requires=large)
    chat = agent.chat()
    assert (await chat.send("pay 40 to savings")).text == "sent 40 to savings"
    assert [e.decision for e in await chat.audit_trail()] == ["message"]  # no approval needed, none recorded
    res = await chat.send("pay 400 to savings")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED and ledger == ["40->savings"]
    assert seen == [chat.session_id] * 2

    agent, _, ledger = build(requires=lambda transfer: transfer.amount > 100)  # one parameter, sync
    chat = agent.chat()
    assert (await chat.send("pay 40 to a")).finish_reason == AgentFinishReason.STOP
    assert (await chat.send("pay 400 to a")).finish_reason == AgentFinishReason.INTERRUPTED


async def test_a_check_that_fails_makes_a_person_decide(store):
    def broken(transfer) -> bool:
        raise RuntimeError("limits service down")

    agent, _, ledger = build(store, requires=broken)
    res = await agent.chat().send("pay 1 to a")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED and ledger == []
    assert "failed (RuntimeError): a person decides" in res.interrupts[0].metadata["reason"]


async def test_edits_only_where_the_tool_allows_them_validated_and_recorded(store):
    agent, _, ledger = build(store, edits=True)
    chat = agent.chat()
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    assert pause.approval.decisions == ["approve", "edit", "deny"]
    before = await version(store, chat.session_id)
    with pytest.raises(InvalidAnswer):
        await chat.resume(restart=[pause.restart(replace_input={"amount": "lots", "to_account": "savings"})])
    assert await version(store, chat.session_id) == before and ledger == []
    res = await chat.resume(restart=[pause.restart(replace_input={"amount": 450, "to_account": "savings"})])
    assert res.text == "sent 450 to savings" and ledger == ["450->savings"]
    entry = (await chat.audit_trail())[-1]
    assert (entry.input, entry.replace_input) == (
        {"amount": "500", "to_account": "savings"},
        {"amount": "450", "to_account": "savings"},
    )

    agent, _, ledger = build(store)  # this one does not allow edits
    chat = agent.chat()
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    with pytest.raises(InputEditNotAllowed):
        await chat.resume(restart=[pause.restart(replace_input={"amount": 5, "to_account": "savings"})])
    assert ledger == []


async def test_a_call_paused_for_approval_takes_no_made_up_result(store):
    agent, _, ledger = build(store)
    chat = agent.chat()
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    before = await version(store, chat.session_id)
    with pytest.raises(DecisionNotAllowed):
        await chat.resume(respond=[pause.respond("sent 500 to savings")])
    # whatever the output: not "invalid for its output schema", which points to another output
    # (found by a probe: the denial object {"denied": true} was told to be a string)
    for output in ({"denied": True, "reason": "no"}, None, 42):
        with pytest.raises(DecisionNotAllowed, match="takes approve, deny, not respond"):
            await chat.resume(respond=[pause.respond(output)])
    assert await version(store, chat.session_id) == before and ledger == []
    assert (await chat.resume(restart=[pause.restart()])).text == "sent 500 to savings"


async def test_a_tool_that_pauses_itself_too_is_approved_once_for_its_input(store):
    """The seed's pattern inside a tool that requires approval: approving the call lets it
    run; its own pause, restarted with the same input, is not asked about again."""
    ai = Pausepoint()
    runs: list[str] = []

    @ai.tool(requires_approval=True)
    async def rotate(key: str, ctx: ToolRunContext) -> str:
        """Rotate a key (needs a fresh token first)."""
        if not (ctx.resumed_metadata or {}).get("token"):
            raise Interrupt({"need": "token"})
        runs.append(key)
        return f"rotated {key}"

    agent = ai.define_agent(
        name="ops", model=ScriptedModel([tool_call("rotate", {"key": "k1"}), "done"]), tools=[rotate], store=store
    )
    chat = agent.chat()
    [gate] = (await chat.send("rotate")).interrupts
    assert gate.approval is not None and gate.approval.gated
    [own] = (await chat.resume(restart=[gate.restart()])).interrupts  # approved: it ran, and paused itself
    assert own.approval is None and own.metadata == {"need": "token"} and own.ref == gate.ref
    res = await chat.resume(restart=[own.restart(resumed_metadata={"token": "t"})])
    assert res.text == "done" and runs == ["k1"]


# -- a model that skips the person (the banking demo) --------------------------------------------


def demo_agent(store, steps):
    from pausepoint.demo import build as build_demo

    ledger: list[str] = []
    _, agent = build_demo(store, ledger, model=ScriptedModel(steps))
    return agent, ledger


def approval_call(details: str):
    return tool_call("userApproval", {"action": "transfer_money", "details": details})


def transfer_call(amount, to):
    return tool_call("transfer_money", {"amount": amount, "to_account": to})


async def test_a_model_that_calls_the_guarded_tool_directly_cannot_move_money(store):
    agent, ledger = demo_agent(store, [transfer_call(500, "savings"), "Done."])
    chat = agent.chat()
    res = await chat.send("Transfer $500 to savings.")
    [pause] = res.interrupts
    assert pause.name == "transfer_money" and ledger == []  # the transfer itself waits for a person
    assert agent.view(pause).title == "Transfer $500.00 to savings"
    await chat.resume(restart=[agent.approval(pause)])
    assert ledger == ["500->savings"]


async def test_a_model_that_transfers_other_arguments_than_approved_is_paused(store):
    steps = [approval_call("Transfer $500 to savings"), transfer_call(5000, "savings"), "Done."]
    agent, ledger = demo_agent(store, steps)
    chat = agent.chat()
    [question] = (await chat.send("Transfer $500 to savings.")).interrupts
    assert agent.view(question).approval.offer == (
        "A yes also approves one transfer_money call with amount 500.00 and to account savings, within the next "
        "15 minutes."
    )
    res = await chat.resume(respond=[agent.approval(question)])
    [pause] = res.interrupts  # $5,000 is not what the person approved: the runtime asks about it
    assert (pause.name, pause.input["amount"]) == ("transfer_money", "5000") and ledger == []
    await chat.resume(respond=[pause.deny("that is not what I approved")])
    assert ledger == []


async def test_a_model_that_ignores_a_denial_cannot_move_money(store):
    steps = [approval_call("Transfer $500 to savings"), transfer_call(500, "savings"), "I did it anyway."]
    agent, ledger = demo_agent(store, steps)
    chat = agent.chat()
    [question] = (await chat.send("Transfer $500 to savings.")).interrupts
    res = await chat.resume(respond=[question.respond({"approved": False, "feedback": "no"})])
    [pause] = res.interrupts
    assert pause.name == "transfer_money" and ledger == []
    trail = await chat.audit_trail()
    assert [e.decision for e in trail] == ["message", "respond"]  # a no grants nothing


async def test_a_yes_approves_the_transfer_it_described_once(store):
    steps = [
        approval_call("Transfer $500 to savings"),
        transfer_call(500, "savings"),
        transfer_call(500, "savings"),
        "Done twice?",
    ]
    agent, ledger = demo_agent(store, steps)
    chat = agent.chat(principal="alice")
    [question] = (await chat.send("Transfer $500 to savings.")).interrupts
    res = await chat.resume(respond=[question.respond({"approved": True})], principal="alice")
    assert ledger == ["500->savings"]  # the described transfer ran on the yes, with no second question
    [again] = res.interrupts  # the same transfer again is another transfer: asked about
    assert again.name == "transfer_money"
    trail = await chat.audit_trail()
    assert [(e.decision, e.name, e.principal, e.via) for e in trail] == [
        ("message", "", "alice", "python"),
        ("respond", "userApproval", "alice", "python"),
        ("grant", "transfer_money", "alice", "python"),
        ("approve", "transfer_money", "alice", "policy"),  # by alice's grant: a person, always
    ]
    assert trail[2].scope["bounds"] == {"amount": {"equals": "500"}, "to_account": {"equals": "savings"}}
    assert trail[3].grant == trail[2].grant
    [grant] = await chat.grants()
    assert (grant.status, grant.used, grant.uses) == ("used", 1, 1)


@pytest.mark.parametrize(
    ("details", "amount", "to"),
    [
        ("Transfer $500 to your savings account", "500", "savings"),  # as a model words it back
        ("Send 20 dollars to Bob", "20", "Bob"),
        ("Move $1,000 from checking to the savings account", "1000", "savings"),
    ],
)
async def test_a_yes_approves_the_transfer_as_the_person_and_the_model_word_it(store, details, amount, to):
    steps = [approval_call(details), transfer_call(int(amount), to), "Done."]
    agent, ledger = demo_agent(store, steps)
    chat = agent.chat(principal="alice")
    [question] = (await chat.send(details)).interrupts
    assert f"to account {to}, within" in agent.view(question).approval.offer
    res = await chat.resume(respond=[question.respond({"approved": True})], principal="alice")
    assert res.interrupts == [] and ledger == [f"{amount}->{to}"]  # the described transfer, no second question
    [grant] = await chat.grants()
    assert grant.bounds == {"amount": {"equals": amount}, "to_account": {"equals": to}}


@pytest.mark.parametrize("written", ["$5,00", "$1.000,50", "$5.0.0", "$1,0000"])
async def test_a_yes_to_an_amount_that_reads_two_ways_grants_nothing_the_transfer_is_asked_about(store, written):
    steps = [approval_call(f"Transfer {written} to savings"), transfer_call(500, "savings"), "Done."]
    agent, ledger = demo_agent(store, steps)
    chat = agent.chat(principal="alice")
    [question] = (await chat.send(f"Transfer {written} to savings.")).interrupts
    res = await chat.resume(respond=[question.respond({"approved": True})], principal="alice")
    [asked] = res.interrupts  # no guess at what "$5,00" meant: the transfer itself is shown
    assert (asked.name, asked.input) == ("transfer_money", {"amount": "500", "to_account": "savings"})
    assert ledger == [] and await chat.grants() == []


# -- rules ------------------------------------------------------------------------------------------


async def test_a_rule_approves_small_transfers_and_the_audit_names_it(store):
    policy = ApprovalPolicy(rules=[Rule.approve("small transfers", ["transfer_money"], when=lambda t: t.amount <= 100)])
    agent, _, ledger = build(store, policy)
    chat = agent.chat()
    assert (await chat.send("pay 50 to savings")).text == "sent 50 to savings"
    assert (await chat.send("pay 500 to savings")).finish_reason == AgentFinishReason.INTERRUPTED
    assert ledger == ["50->savings"]
    decided = [e for e in await chat.audit_trail() if e.via == "policy"]
    assert [(e.decision, e.rule, e.name, e.principal, e.input) for e in decided] == [
        ("approve", "small transfers", "transfer_money", None, {"amount": "50", "to_account": "savings"})
    ]


async def test_a_rule_denies_and_the_model_is_told_why(store):
    policy = ApprovalPolicy(
        rules=[
            Rule.deny("closed accounts", ["transfer_money"], when=lambda t: t.to_account.startswith("ext-"),
                      reason="external accounts are closed"),
        ]
    )  # fmt: skip
    agent, model, ledger = build(store, policy)
    chat = agent.chat()
    res = await chat.send("pay 5 to ext-1")
    assert res.finish_reason == AgentFinishReason.STOP and ledger == []
    assert told(model) == [{"denied": True, "reason": "external accounts are closed"}]
    [entry] = [e for e in await chat.audit_trail() if e.via == "policy"]
    assert (entry.decision, entry.rule, entry.reason) == ("deny", "closed accounts", "external accounts are closed")


async def test_an_ask_rule_puts_a_person_before_any_tool_and_no_grant_stands_in(store):
    policy = ApprovalPolicy(rules=[Rule.ask("deploys need a person", ["deploy"])], grantable=["deploy"])
    agent, _, ledger = build(store, policy)
    chat = agent.chat()
    [pause] = (await chat.send("deploy web")).interrupts
    assert pause.name == "deploy" and pause.approval.rule == "deploys need a person" and ledger == []
    await chat.resume(restart=[pause.restart(grant=Grant())])  # a grant is given ...
    assert ledger == ["deploy:web"]
    res = await chat.send("deploy web")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED  # ... but the rule asks a person anyway
    assert ledger == ["deploy:web"]


async def test_rules_apply_in_order_and_a_rule_that_fails_never_approves(store):
    def broken(transfer) -> bool:
        raise ValueError("no")

    policy = ApprovalPolicy(
        rules=[
            Rule.deny("frozen", ["transfer_money"], when=lambda t: t.to_account == "frozen"),
            Rule.approve("tiny", ["transfer_money"], when=lambda t: t.amount < 10),
            Rule.approve("broken", ["transfer_money"], when=broken),
        ]
    )
    agent, _, ledger = build(store, policy)
    chat = agent.chat()
    assert (await chat.send("pay 1 to frozen")).text == '{"denied": true, "reason": "frozen"}'
    assert (await chat.send("pay 1 to a")).text == "sent 1 to a"
    res = await chat.send("pay 50 to a")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    assert "the rule 'broken' could not be evaluated (ValueError)" in res.interrupts[0].metadata["reason"]
    assert ledger == ["1->a"]


async def test_the_agents_policy_comes_before_the_apps(store):
    app = ApprovalPolicy(rules=[Rule.deny("app says no", ["transfer_money"])])
    agent_rules = ApprovalPolicy(rules=[Rule.approve("agent says yes to savings", ["transfer_money"],
                                                     when=lambda t: t.to_account == "savings")])  # fmt: skip
    agent, _, ledger = build(store, agent_rules, app_policy=app)
    chat = agent.chat()
    assert (await chat.send("pay 5 to savings")).text == "sent 5 to savings"
    assert "app says no" in (await chat.send("pay 5 to elsewhere")).text
    assert ledger == ["5->savings"]


# -- grants ---------------------------------------------------------------------------------------


async def test_a_grant_for_the_session_approves_later_calls_until_revoked(store):
    agent, _, ledger = build(store, ApprovalPolicy(grantable=["transfer_money"]))
    chat = agent.chat(principal="alice")
    [pause] = (await chat.send("pay 5 to a")).interrupts
    assert pause.approval.grantable and agent.view(pause).approval.grant_note
    await chat.resume(restart=[agent.approval(pause, grant=Grant())])
    assert (await chat.send("pay 7 to b")).text == "sent 7 to b"
    [grant] = await chat.grants()
    assert (grant.tool, grant.principal, grant.status, grant.used, grant.ref) == (
        "transfer_money", "alice", "active", 1, pause.ref
    )  # fmt: skip
    trail = await chat.audit_trail()
    assert [(e.decision, e.principal, e.grant) for e in trail if e.decision in ("grant", "approve")] == [
        ("approve", "alice", None),
        ("grant", "alice", grant.id),
        ("approve", "alice", grant.id),  # the later call: approved by alice's grant
    ]

    revoked = await chat.revoke_grant(grant.id, reason="done for today", principal="bob")
    assert (revoked.status, revoked.revoked_by, revoked.reason) == ("revoked", "bob", "done for today")
    assert (await chat.revoke_grant(grant.id)).revoked_by == "bob"  # again: nothing changes
    res = await chat.send("pay 9 to c")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED and ledger == ["5->a", "7->b"]
    assert (await chat.audit_trail())[-2].decision == "revoke"
    with pytest.raises(GrantNotFound):
        await chat.revoke_grant("nope")


async def test_a_revocation_that_cannot_be_recorded_is_a_bad_request_not_an_answer(store):
    agent, _, _ = build(store, ApprovalPolicy(grantable=["transfer_money"]))
    chat = agent.chat(principal="alice")
    [pause] = (await chat.send("pay 5 to a")).interrupts
    await chat.resume(restart=[agent.approval(pause, grant=Grant())])
    [grant] = await chat.grants()
    with pytest.raises(InvalidRequest, match=r"revocation cannot be recorded") as refused:
        await chat.revoke_grant(grant.id, reason="\ud800")
    assert not isinstance(refused.value, InvalidAnswer) and refused.value.code == "invalid_request"
    [still] = await chat.grants()
    assert still.status == "active"  # nothing written


async def test_a_grant_approves_only_within_its_bounds_uses_and_time(store):
    clock = Clock()
    policy = ApprovalPolicy(grantable={"transfer_money": timedelta(hours=8)})
    agent, _, ledger = build(store, policy, clock=clock)
    chat = agent.chat()
    [pause] = (await chat.send("pay 5 to a")).interrupts
    bounded = Grant(
        bounds={"amount": {"max": 100}, "to_account": {"one_of": ["a", "b"]}}, uses=2, ttl=timedelta(hours=1)
    )
    await chat.resume(restart=[pause.restart(grant=bounded)])
    [grant] = await chat.grants()
    assert grant.expires_at == clock.now + timedelta(hours=1)
    assert (await chat.send("pay 100 to b")).text == "sent 100 to b"  # within: approved
    for outside in ("pay 101 to a", "pay 5 to c"):  # above the amount, another account
        [asked] = (await chat.send(outside)).interrupts
        await chat.resume(respond=[asked.deny("no")])
    assert (await chat.send("pay 1 to a")).text == "sent 1 to a"  # the second use
    [asked] = (await chat.send("pay 2 to a")).interrupts  # no uses left
    await chat.resume(respond=[asked.deny("no")])
    assert ledger == ["5->a", "100->b", "1->a"]
    assert (await chat.grants())[0].status == "used"

    [pause] = (await chat.send("pay 3 to a")).interrupts
    await chat.resume(restart=[pause.restart(grant=Grant())])  # the policy's longest: 8 hours
    assert (await chat.grants())[1].expires_at == clock.now + timedelta(hours=8)
    assert (await chat.send("pay 4 to a")).text == "sent 4 to a"
    clock.advance(timedelta(hours=9))
    assert (await chat.send("pay 6 to a")).finish_reason == AgentFinishReason.INTERRUPTED
    assert [g.status for g in await chat.grants()] == ["used", "expired"]
    # revoking one that ended keeps its end, and writes nothing (found by a probe: it read "revoked")
    entries = len(await chat.audit_trail())
    ended = await chat.grants()
    assert [(await chat.revoke_grant(g.id)).status for g in ended] == ["used", "expired"]
    assert len(await chat.audit_trail()) == entries


@pytest.mark.parametrize(
    ("policy", "grant", "answer", "problem"),
    [
        (ApprovalPolicy(), Grant(), "approve", "lets nobody grant"),
        (ApprovalPolicy(grantable=["transfer_money"]), Grant(bounds={"iban": {"equals": "x"}}), "approve", "'iban'"),
        (ApprovalPolicy(grantable=["transfer_money"]), Grant(bounds={"amount": {"near": 5}}), "approve", "'near'"),
        (
            ApprovalPolicy(grantable=["transfer_money"]),
            Grant(bounds={"amount": {"max": "lots"}}),
            "approve",
            r"the condition 'max' on 'amount' cannot be applied: Input should be a valid decimal$",
        ),
        (ApprovalPolicy(grantable=["transfer_money"]), Grant(uses=0), "approve", "uses"),
        # bounds that approve more, or nothing, than they say (found by a probe: kept as given)
        (
            ApprovalPolicy(grantable=["transfer_money"]),
            Grant(bounds={"to_account": {"max": "z"}}),
            "approve",
            "text and booleans have no order",
        ),
        (
            ApprovalPolicy(grantable=["transfer_money"]),
            Grant(bounds={"amount": {"min": 100, "max": 10}}),
            "approve",
            "'min' is above 'max'",
        ),
        (
            ApprovalPolicy(grantable={"transfer_money": timedelta(hours=1)}),
            Grant(ttl=timedelta(hours=2)),
            "approve",
            "at most",
        ),
        (ApprovalPolicy(grantable=["transfer_money"]), Grant(tool="nothing"), "approve", "no tool"),
        # More uses than any session will make: a bound like every number's (found by a probe: a
        # 4,300-digit count was kept, and a client at Python's 640-digit limit could not read it).
        (ApprovalPolicy(grantable=["transfer_money"]), Grant(uses=10**4000), "approve", "from 1 to 10\\*\\*9"),
        # A grant no date is that far ahead of (found by a probe: a raw OverflowError).
        (ApprovalPolicy(grantable=["transfer_money"]), Grant(ttl=timedelta(days=3_285_000)), "approve", "10\\*\\*9"),
        (ApprovalPolicy(grantable=["transfer_money"]), Grant(), "deny", "goes with an approval"),
        (treasury(grantable=["transfer_money"], quorum={"transfer_money": 2}), Grant(), "approve", "several"),
    ],
)
async def test_grants_the_policy_or_the_tool_cannot_take_are_refused_and_nothing_is_written(
    store, policy, grant, answer, problem
):
    agent, _, ledger = build(store, policy)
    chat = agent.chat(principal="carol")
    [pause] = (await chat.send("pay 5 to a")).interrupts
    before = await version(store, chat.session_id)
    given = pause.restart(grant=grant) if answer == "approve" else pause.deny("no")
    if answer == "deny":
        given = type(given)(given.ref, given.name, None, None, "deny", "no", given.pause_id, grant)
    with pytest.raises(InvalidGrant, match=problem):
        await chat.resume(**({"restart": [given]} if answer == "approve" else {"respond": [given]}), principal="alice")
    assert await version(store, chat.session_id) == before and ledger == []
    assert await chat.grants() == []


async def test_a_grant_never_approves_a_call_its_grantor_asked_for_under_separation_of_duties(store):
    agent, _, ledger = build(store, treasury(grantable=["transfer_money"], separation_of_duties=True))
    chat = agent.chat(principal="carol")
    [pause] = (await chat.send("pay 5 to a")).interrupts
    await chat.resume(restart=[pause.restart(grant=Grant())], principal="alice")
    assert (await chat.send("pay 6 to a")).text == "sent 6 to a"  # carol asks; alice's grant approves
    res = await chat.send("pay 7 to a", principal="alice")  # alice asks: her own grant may not approve it
    assert res.finish_reason == AgentFinishReason.INTERRUPTED and ledger == ["5->a", "6->a"]


# -- quorum ---------------------------------------------------------------------------------------


async def test_a_quorum_counts_distinct_named_approvers_and_runs_the_call_once(store):
    agent, model, ledger = build(store, treasury(quorum={"transfer_money": 2}), edits=True)
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    assert agent.view(pause).approval.progress == "0 of 2 approvals"

    res = await chat.resume(restart=[pause.restart()], principal="alice")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED and ledger == []
    [waiting] = res.interrupts
    assert (waiting.ref, waiting.pause_id, waiting.approval.approved_by) == (pause.ref, pause.pause_id, ["alice"])
    view = agent.view(waiting).approval
    assert (view.progress, view.approved_by, view.may_approve) == ("1 of 2 approvals", ["alice"], ["bob", "carol"])
    assert view.waiting_for == "Waiting for 1 more approval from treasury (bob or carol)."
    assert (await chat.interrupts())[0].approval.approved_by == ["alice"]  # every process reads the same

    before = await version(store, chat.session_id)
    with pytest.raises(AlreadyApproved):
        await chat.resume(restart=[pause.restart()], principal="alice")
    with pytest.raises(ApprovalForbidden, match="named"):  # nobody named: a quorum counts people
        await agent.chat(chat.session_id).resume(restart=[pause.restart()])
    with pytest.raises(DecisionNotAllowed):  # approvals are of one input: no edits in a quorum
        await chat.resume(
            restart=[pause.restart(replace_input={"amount": 5, "to_account": "savings"})], principal="bob"
        )
    assert await version(store, chat.session_id) == before

    res = await chat.resume(restart=[pause.restart()], principal="bob")
    assert (res.finish_reason, res.text, ledger) == (AgentFinishReason.STOP, "sent 500 to savings", ["500->savings"])
    with pytest.raises(AlreadyResolved):
        await chat.resume(restart=[pause.restart()], principal="carol")
    trail = [e for e in await chat.audit_trail() if e.decision != "message"]
    assert [(e.decision, e.principal, e.approvals, e.required) for e in trail] == [
        ("approve", "alice", 1, 2),
        ("approve", "bob", 2, 2),  # one name per decision: the last approval too
    ]
    assert len(model.requests) == 2  # the model went on once, after the second approval


async def test_one_denial_denies_a_quorum(store):
    agent, model, ledger = build(store, treasury(quorum={"transfer_money": 2}))
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    await chat.resume(restart=[pause.restart()], principal="alice")
    res = await chat.resume(respond=[pause.deny("not approved by bob")], principal="bob")
    assert res.finish_reason == AgentFinishReason.STOP and ledger == []
    assert told(model) == [{"denied": True, "reason": "not approved by bob"}]


async def test_a_quorum_cancelled_or_expired_after_one_approval_says_how_far_it_got(store):
    """The trail's cancel (and expiry) of a quorum says one of two had approved (found by a
    probe: it said 0 of 2, as if nobody had)."""
    agent, _, ledger = build(store, treasury(quorum={"transfer_money": 2}))
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    await chat.resume(restart=[pause.restart()], principal="alice")
    await chat.cancel_pending("changed my mind", principal="dave")
    trail = [e for e in await chat.audit_trail() if e.decision != "message"]
    assert [(e.decision, e.principal, e.approvals, e.required) for e in trail] == [
        ("approve", "alice", 1, 2),
        ("cancel", "dave", 1, 2),
    ]
    clock = Clock()
    policy = treasury(quorum={"transfer_money": 2}, ttl={"transfer_money": timedelta(minutes=10)})
    agent, _, ledger = build(store, policy, clock=clock)
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    await chat.resume(restart=[pause.restart()], principal="alice")
    clock.advance(timedelta(minutes=11))
    await agent.settle_expired()
    trail = [e for e in await chat.audit_trail() if e.decision != "message"]
    assert [(e.decision, e.approvals, e.required) for e in trail] == [("approve", 1, 2), ("expire", 1, 2)]
    assert ledger == []


async def test_a_quorum_denied_after_one_approval_says_how_far_it_got(store):
    """The trail's denial of a quorum says one of two had approved, as a cancel's does (found by
    a probe: it said 0 of 2)."""
    agent, _, ledger = build(store, treasury(quorum={"transfer_money": 2}))
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    await chat.resume(restart=[pause.restart()], principal="alice")
    await chat.resume(respond=[pause.deny("not now")], principal="bob")
    trail = [e for e in await chat.audit_trail() if e.decision != "message"]
    assert [(e.decision, e.principal, e.approvals, e.required) for e in trail] == [
        ("approve", "alice", 1, 2),
        ("deny", "bob", 1, 2),
    ]
    assert ledger == []


async def test_racing_approvers_resolve_a_quorum_exactly_once(store):
    agent, _model, ledger = build(store, treasury(quorum={"transfer_money": 2}))
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    others = [build(store, treasury(quorum={"transfer_money": 2}), ledger=ledger)[0] for _ in range(3)]

    async def approve(agent_, who):
        try:
            return await agent_.chat(chat.session_id).resume(restart=[pause.restart()], principal=who)
        except PausepointError as exc:
            return exc

    racers = [approve(others[i % 3], who) for i, who in enumerate(["alice", "bob", "carol"] * 4)]
    outcomes = await asyncio.gather(*racers)
    assert ledger == ["500->savings"]
    trail = await agent.chat(chat.session_id).audit_trail()
    counted = [e.principal for e in trail if e.decision in ("approve", "restart")]
    assert len(counted) == 2 and len(set(counted)) == 2
    assert sum(not isinstance(o, Exception) for o in outcomes) == 2  # the two counted approvals
    assert all(isinstance(o, AlreadyResolved | AlreadyApproved) for o in outcomes if isinstance(o, Exception))


class EndsHeld:
    """The store of an approver's process whose end of turn is held back: its append of a
    ``turn_ended`` record waits (``reached`` is set) until ``release`` is set; the rest is the
    real store's."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store
        self.reached = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def append(self, session_id, expected_version, entries, summary, events=(), *, durable=True):
        if any(entry.kind == "turn_ended" for entry in entries):
            self.reached.set()
            await self.release.wait()
        return await self._store.append(session_id, expected_version, entries, summary, events, durable=durable)


async def test_an_approval_whose_turn_end_lost_to_the_last_approval_gets_that_turns_outcome_at_once(store):
    """alice's approval (1 of 2) is written, then bob's completes the quorum and finishes the turn
    before alice's process records its end: alice's call returns bob's outcome at once instead of
    waiting for another end (it waited ``wait_timeout``, then raised ``ResumeInProgress``)."""
    agent, _model, ledger = build(store, treasury(quorum={"transfer_money": 2}))
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    held = EndsHeld(store)
    alice_agent = build(held, treasury(quorum={"transfer_money": 2}), ledger=ledger)[0]  # type: ignore[arg-type]
    alice_agent.wait_timeout = 3.0
    bob_agent = build(store, treasury(quorum={"transfer_money": 2}), ledger=ledger)[0]

    alice = asyncio.create_task(alice_agent.chat(chat.session_id).resume(restart=[pause.restart()], principal="alice"))
    await asyncio.wait_for(held.reached.wait(), 30)  # her approval is in, her end is not
    bob = await bob_agent.chat(chat.session_id).resume(restart=[pause.restart()], principal="bob")
    assert (bob.finish_reason, bob.text, ledger) == (AgentFinishReason.STOP, "sent 500 to savings", ["500->savings"])
    held.release.set()
    res = await alice
    assert (res.finish_reason, res.text) == (AgentFinishReason.STOP, "sent 500 to savings")
    assert ledger == ["500->savings"]


# -- separation of duties and roles ----------------------------------------------------------------


async def test_the_requester_cannot_approve_their_own_call_but_may_withdraw_it(store):
    agent, _, ledger = build(store, treasury(separation_of_duties=True))
    chat = agent.chat(principal="alice")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    assert pause.approval.requested_by == "alice" and pause.approval.separate
    assert agent.view(pause).approval.may_approve == ["bob", "carol"]
    before = await version(store, chat.session_id)
    with pytest.raises(ApprovalForbidden, match="asked for this call") as refused:
        await chat.resume(restart=[pause.restart()], principal="alice")
    assert refused.value.details["reason"] == "separation_of_duties"
    assert await version(store, chat.session_id) == before and ledger == []
    await chat.resume(restart=[pause.restart()], principal="bob")
    assert ledger == ["500->savings"]

    [pause] = (await chat.send("pay 9 to b")).interrupts
    await chat.resume(respond=[pause.deny("never mind")], principal="alice")  # a no is always hers to give
    assert ledger == ["500->savings"]


async def test_only_the_deciding_roles_answer_with_the_decisions_their_role_allows(store):
    # composed: treasury's policy, and an on-call role that may stop anything but approve nothing
    policy = treasury() + ApprovalPolicy(roles={"oncall": Role(tools=["*"], decisions=["deny"])},
                                         members={"olga": ["oncall"]})  # fmt: skip
    agent, _, ledger = build(store, policy)
    chat = agent.chat()
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    assert pause.approval.roles == ["oncall", "treasury"]
    view = agent.view(pause).approval
    assert (view.may_approve, view.may_deny) == (["alice", "bob", "carol"], ["alice", "bob", "carol", "olga"])
    # it waits for treasury's approval: on-call may stop it, but gives no approval to wait for
    assert view.waiting_for == "Waiting for an approval from treasury (alice, bob or carol)."
    assert (view.roles, view.approving_roles) == (["oncall", "treasury"], ["treasury"])  # what a surface names
    for who, reason in (("dave", "role"), (None, "role"), ("olga", "decision")):
        with pytest.raises(ApprovalForbidden) as refused:
            await chat.resume(restart=[pause.restart()], principal=who)
        assert refused.value.details["reason"] == reason
    await chat.resume(respond=[pause.deny("on call says no")], principal="olga")
    assert ledger == []


async def test_the_same_input_spelled_otherwise_is_no_edit_for_a_role_that_may_only_edit(store):
    """Found by a probe: ed, whose role may edit transfers but not approve them, was refused the
    paused input sent back as it was, yet "500.0" for "500" — the same Decimal to the tool — was
    taken for an edit, and the unchanged transfer ran on his word. The input as the tool reads it
    decides; an approver's "500.0" runs the call as it paused."""
    roles = {"treasury": Role(tools=["transfer_money"]), "editors": Role(tools=["transfer_money"], decisions=["edit"])}
    policy = ApprovalPolicy(roles=roles, members={"alice": ["treasury"], "ed": ["editors"]})
    agent, _, ledger = build(store, policy, edits=True)
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    for spelled in ({"amount": "500", "to_account": "savings"}, {"amount": "500.0", "to_account": "savings"},
                    {"amount": 500, "to_account": "savings"}):  # fmt: skip
        with pytest.raises(ApprovalForbidden, match="may not approve"):
            await chat.approve(pause.ref, principal="ed", replace_input=spelled)
    assert ledger == [] and [e.decision for e in await chat.audit_trail()] == ["message"]
    res = await chat.approve(pause.ref, principal="alice", replace_input={"amount": "500.00", "to_account": "savings"})
    assert res.text == "sent 500 to savings" and ledger == ["500->savings"]  # as it paused: no edit recorded
    assert [(e.decision, e.replace_input) for e in await chat.audit_trail()][-1] == ("approve", None)


def test_a_quorum_counts_only_members_whose_role_may_approve():
    # two of treasury's approvals, but treasury has one member: the auditor may only deny
    roles = {"treasury": Role(tools=["transfer_money"]), "audit": Role(tools=["*"], decisions=["deny"])}
    members = {"alice": ["treasury"], "ann": ["audit"]}
    with pytest.raises(DefinitionError, match=r"but only 1 member\(s\) hold a role that may approve"):
        build(policy=ApprovalPolicy(roles=roles, members=members, quorum={"transfer_money": 2}))
    build(policy=ApprovalPolicy(roles=roles, members={**members, "bob": ["treasury"]}, quorum={"transfer_money": 2}))


async def test_roles_from_a_function_and_on_pauses_a_tool_made_itself(store):
    class Question(BaseModel):
        question: str

    ai = Pausepoint()
    ask = ai.define_interrupt(name="ask_legal", description="Ask legal.", input_schema=Question)
    policy = ApprovalPolicy(roles={"legal": Role(tools=["ask_legal"])},
                            members=lambda who: ["legal"] if who.endswith("@legal") else [])  # fmt: skip
    model = ScriptedModel([tool_call("ask_legal", {"question": "May we?"}), "ok"])
    agent = ai.define_agent(name="asker", model=model, tools=[ask], store=store, approval=policy)
    chat = agent.chat()
    [pause] = (await chat.send("go")).interrupts
    assert pause.approval is not None and not pause.approval.gated and pause.approval.roles == ["legal"]
    assert agent.view(pause).approval.may_approve is None  # members come from a function: not listed
    assert agent.view(pause).approval.approving_roles == ["legal"]  # a question's: who answers it
    with pytest.raises(ApprovalForbidden):
        await chat.resume(respond=[pause.respond({"approved": True})], principal="sam@sales")
    assert (await chat.resume(respond=[pause.respond({"approved": True})], principal="lou@legal")).text == "ok"


async def test_whether_one_may_answer_at_all_comes_before_which_decisions_a_pause_takes(store):
    agent, _, ledger = build(store, treasury())
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    assert "respond" not in pause.approval.decisions  # a gated call takes no made-up result...
    with pytest.raises(ApprovalForbidden) as refused:  # ...but dave may not answer it at all
        await chat.resume(respond=[pause.respond("sent, trust me")], principal="dave")
    assert refused.value.details["reason"] == "role"
    with pytest.raises(DecisionNotAllowed):  # treasury may answer: for them, the decision is wrong
        await chat.resume(respond=[pause.respond("sent, trust me")], principal="alice")
    assert ledger == []


async def test_a_members_function_that_fails_refuses_with_a_typed_error_and_approves_nothing(store, caplog):
    down = {"bob"}

    def members(principal: str) -> list[str]:
        if principal in down:
            raise RuntimeError("the directory is down")
        return ["treasury"] if principal == "alice" else []

    policy = ApprovalPolicy(roles={"treasury": Role(tools=["transfer_money"])}, members=members,
                            grantable=["transfer_money"])  # fmt: skip
    agent, _, ledger = build(store, policy)
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    with pytest.raises(ApprovalForbidden) as refused:
        await chat.approve(pause.ref, principal="bob")
    assert (refused.value.code, refused.value.details["reason"]) == ("approval_forbidden", "members")
    assert "RuntimeError" in refused.value.message and "the directory is down" in caplog.text
    assert ledger == [] and [p.pause_id for p in await chat.interrupts()] == [pause.pause_id]
    await chat.approve(pause.ref, principal="alice", grant=Grant())
    assert ledger == ["500->savings"]
    down.add("alice")  # alice's grant stands for alice: with her roles unknown, a person decides
    res = await chat.send("pay 7 to b")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED and ledger == ["500->savings"]


# -- escalation -------------------------------------------------------------------------------------


def escalating() -> ApprovalPolicy:
    """Treasury decides transfers within 10 minutes; then leads, within an hour."""
    return treasury(
        ttl={"transfer_money": timedelta(minutes=10)},
        escalation={"transfer_money": [Escalation(to=["leads"], ttl=timedelta(hours=1))]},
    )


async def test_a_pause_nobody_decided_in_time_goes_to_other_approvers_then_to_the_expiry_policy(store):
    clock, policy = Clock(), escalating()
    agent, model, ledger = build(store, policy, clock=clock)
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    assert pause.expires_at == clock.now + timedelta(minutes=10)
    assert agent.view(pause).on_expiry == "It is handed to leads if nobody decides it in time."
    clock.advance(timedelta(minutes=11))
    with pytest.raises(PendingInterrupts):  # it is handed on, not dropped: still open
        await chat.send("anything else?")
    await agent.settle_expired()
    [handed] = await chat.interrupts()
    assert (handed.pause_id, handed.approval.roles, handed.approval.escalated) == (pause.pause_id, ["leads"], 1)
    assert handed.expires_at == pause.expires_at + timedelta(hours=1)  # from when it ran out
    assert agent.view(handed).approval.escalated == "Handed to leads: nobody decided it in time."
    assert agent.view(handed).on_expiry.startswith("It is denied automatically")  # the last step: the policy
    with pytest.raises(ApprovalForbidden):
        await chat.resume(restart=[handed.restart()], principal="alice")  # treasury no longer decides it
    res = await chat.resume(restart=[handed.restart()], principal="erin")
    assert res.text == "sent 500 to savings" and ledger == ["500->savings"]
    trail = [e for e in await chat.audit_trail() if e.decision != "message"]
    assert [(e.decision, e.via, e.principal, e.escalated_to) for e in trail] == [
        ("escalate", "expiry", None, ["leads"]),
        ("approve", "python", "erin", None),
    ]

    [pause] = (await chat.send("pay 9 to b")).interrupts  # the next one: nobody decides at all
    clock.advance(timedelta(minutes=11))
    await agent.settle_expired()
    clock.advance(timedelta(hours=2))
    await agent.settle_expired()
    assert await chat.interrupts() == [] and ledger == ["500->savings"]
    assert told(model)[0]["denied"] is True


async def test_an_escalating_pause_past_its_time_is_handed_on_by_the_next_answer_or_send(store):
    clock, policy = Clock(), escalating()
    agent, _, ledger = build(store, policy, clock=clock)
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    clock.advance(timedelta(minutes=11))  # nobody runs settle_expired()

    # an answer is checked against the pause's new deciders, not refused as expired
    with pytest.raises(ApprovalForbidden):
        await chat.approve(pause.ref, principal="alice")
    assert [e.decision for e in await chat.audit_trail()] == ["message"]  # a refusal writes nothing
    res = await chat.approve(pause.ref, principal="erin")
    assert res.text == "sent 500 to savings" and ledger == ["500->savings"]
    trail = [e for e in await chat.audit_trail() if e.decision != "message"]
    assert [(e.decision, e.principal, e.escalated_to) for e in trail] == [
        ("escalate", None, ["leads"]),
        ("approve", "erin", None),
    ]

    # a send hands it on too: still refused (the pause is open), but it lists its new deciders
    [pause] = (await chat.send("pay 9 to b")).interrupts
    clock.advance(timedelta(minutes=11))
    with pytest.raises(PendingInterrupts):
        await chat.send("anything else?")
    [handed] = await chat.interrupts()
    assert (handed.approval.roles, handed.approval.escalated) == (["leads"], 1)
    # its step's hour runs from when the pause ran out, not from whenever someone came by
    assert handed.expires_at == pause.expires_at + timedelta(hours=1) < clock.now + timedelta(hours=1)
    assert agent.view(handed).approval.may_approve == ["erin"]


async def test_a_pause_nobody_looked_at_past_all_its_steps_has_expired_when_someone_does(store):
    """No sweep, and nobody came by while the steps ran out (found by a probe: an approval
    three times the pause's whole life late ran the call): the next answer finds it expired."""
    clock, policy = Clock(), escalating()
    agent, _, ledger = build(store, policy, clock=clock)
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    clock.advance(timedelta(minutes=10) + timedelta(hours=1, seconds=1))
    with pytest.raises(InterruptExpired):
        await chat.approve(pause.ref, principal="erin")
    assert ledger == [] and [e.decision for e in await chat.audit_trail()] == ["message"]  # a refusal writes nothing
    await chat.settle_expired()  # what the sweep, or the next send, records
    trail = [(e.decision, e.escalated_to) for e in await chat.audit_trail() if e.decision != "message"]
    assert trail == [("escalate", ["leads"]), ("expire", None)], trail
    assert ledger == []


# -- definitions -------------------------------------------------------------------------------------


def test_policies_that_cannot_work_are_refused_when_defined():
    with pytest.raises(DefinitionError, match="'trasfer_money', which is no tool"):
        build(policy=ApprovalPolicy(rules=[Rule.deny("typo", ["trasfer_money"])]))
    with pytest.raises(DefinitionError, match="quorum counts approvals"):
        build(policy=ApprovalPolicy(quorum={"deploy": 2}))
    with pytest.raises(DefinitionError, match="only 3 member"):
        build(policy=treasury(quorum={"transfer_money": 4}))
    with pytest.raises(DefinitionError, match="give it a ttl"):
        ApprovalPolicy(escalation={"deploy": [Escalation(to=["leads"], ttl=timedelta(hours=1))]})
    for endless in (timedelta.max, timedelta(days=365 * 9000)):  # no date is that far ahead (found by a probe)
        with pytest.raises(DefinitionError, match=r"ttl\[.*to 10\*\*9 seconds"):
            ApprovalPolicy(ttl=endless)
        with pytest.raises(DefinitionError, match=r"grantable\[.*to 10\*\*9 seconds"):
            ApprovalPolicy(grantable={"transfer_money": endless})
        with pytest.raises(DefinitionError, match=r"Escalation.ttl must be a timedelta from a microsecond to"):
            Escalation(to=["leads"], ttl=endless)
    with pytest.raises(DefinitionError):
        ApprovalPolicy(quorum={"deploy": 0})
    with pytest.raises(DefinitionError):
        Rule("", "approve")
    with pytest.raises(DefinitionError):
        Role(decisions=["approve", "ignore"])
    with pytest.raises(DefinitionError, match="requires_approval"):
        build(requires="yes")  # type: ignore[arg-type]
    ai = Pausepoint()
    with pytest.raises(DefinitionError, match="cannot require approval"):
        from pausepoint import Tool

        Tool(lambda x: x, name="t", pauses_only=True, requires_approval=True)
    with pytest.raises(DefinitionError):
        ai.define_agent(name="a", model=ScriptedModel([]), approval="strict")  # type: ignore[arg-type]


async def test_two_processes_sweeping_at_once_hand_a_pause_on_once(tmp_path):
    """Both find the pause due and write its escalation; the second finds the first's there when
    its conditional append is refused, and does not hand it on again (one audit entry, one
    event, one new expiry)."""
    path = tmp_path / "sessions.db"
    both_read = asyncio.Event()
    waiting: list[str] = []

    class HeldBack(SqliteSessionStore):
        """The second process's store: its appends wait until the first has written."""

        async def append(self, session_id: str, expected_version: int, *args: Any, **kwargs: Any) -> Any:
            if expected_version > 0 and not both_read.is_set():
                waiting.append(session_id)
                await both_read.wait()
            return await super().append(session_id, expected_version, *args, **kwargs)

    clock, policy = Clock(), escalating()
    first, _, _ = build(SqliteSessionStore(path), policy, clock=clock)
    second, _, _ = build(HeldBack(path), policy, clock=clock)
    chat = first.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    clock.advance(timedelta(minutes=11))

    async def second_sweeps() -> None:
        await second.settle_expired()

    held = asyncio.create_task(second_sweeps())
    for _ in range(500):  # until the second has read the pause due and waits to write
        if waiting:
            break
        await asyncio.sleep(0.01)
    assert waiting == [chat.session_id]
    await first.settle_expired()
    both_read.set()
    await held
    trail = [e for e in await second.chat(chat.session_id).audit_trail() if e.decision == "escalate"]
    assert [(e.ref, e.escalated_to) for e in trail] == [(pause.ref, ["leads"])]
    [handed] = await chat.interrupts()
    assert (handed.approval.roles, handed.approval.escalated) == (["leads"], 1)
    events = await SqliteSessionStore(path).read_events()
    assert [e.kind for e in events].count("escalation") == 1


@pytest.mark.parametrize("with_roles", [True, False])
async def test_separation_of_duties_covers_a_tool_that_pauses_itself_for_approval(store, with_roles: bool):
    """``True`` is every call paused for approval: by ``requires_approval``, and by the tool
    itself (a yes runs it, as in examples/payments.py) — not an interrupt's question (found by a
    probe: the requester approved their own payment; found again by another, with no setting but
    ``separation_of_duties=True``: the policy had no say at all)."""
    ai = Pausepoint()
    paid: list[str] = []

    @ai.tool()
    async def pay_self(amount: int, ctx: ToolRunContext) -> str:
        """Pay, once approved."""
        if not (ctx.resumed_metadata or {}).get("tool_approved"):
            raise Interrupt({"why": "payments need a yes"})
        paid.append(str(amount))
        return "paid"

    roles: dict[str, Any] = {"roles": {"treasury": Role(tools=["pay_self"])}, "members": MEMBERS} if with_roles else {}
    policy = ApprovalPolicy(**roles, separation_of_duties=True)
    agent = ai.define_agent(
        name="payer", model=ScriptedModel([[tool_call("pay_self", {"amount": 5})], "done"]), tools=[pay_self],
        store=store, approval=policy,
    )  # fmt: skip
    chat = agent.chat(principal="alice")
    [pause] = (await chat.send("pay 5")).interrupts
    assert pause.approval is not None and pause.approval.separate
    with pytest.raises(ApprovalForbidden) as refused:
        await chat.approve(pause.ref, principal="alice")
    assert refused.value.details["reason"] == "separation_of_duties" and paid == []
    with pytest.raises(ApprovalForbidden) as refused:  # nor end it with a result of their own making
        await chat.resume(respond=[pause.respond("paid, trust me")], principal="alice")
    assert refused.value.details["reason"] == "separation_of_duties" and "only deny it" in str(refused.value)
    assert (await chat.approve(pause.ref, principal="bob")).text == "done" and paid == ["5"]


async def test_a_grant_revoked_elsewhere_while_a_call_it_approved_runs_leaves_that_call_approved(store):
    """The grant approved the call, and the approval is written before it runs; another process
    revokes the grant meanwhile. The call's result is recorded and the turn ends as the model
    says, and the grant approves nothing later (found by a probe: the caller got
    ``ConcurrentUpdate`` with the money moved, the result was never recorded and the session
    refused everything for ``abandon_after``)."""
    started, release, paid = asyncio.Event(), asyncio.Event(), []

    def bank() -> Agent:
        ai = Pausepoint()

        @ai.tool(requires_approval=True)
        async def pay(amount: int) -> str:
            """Pays."""
            paid.append(amount)
            if amount == 3:
                started.set()
                await release.wait()
            return f"paid {amount}"

        def script(request: Any) -> Any:
            last = request.messages[-1]
            if last.role == "user" and last.text.startswith("pay "):
                return tool_call("pay", {"amount": int(last.text.split()[1])})
            return "Done." if last.role == "tool" else "Hello."

        policy = ApprovalPolicy(grantable=["pay"])
        return ai.define_agent(name="bank", model=ScriptedModel(script), tools=[pay], store=store, approval=policy)

    here, elsewhere = bank(), bank()
    chat = here.chat(principal="alice")
    [pause] = (await chat.send("pay 1")).interrupts
    await chat.approve(pause.ref, grant=Grant(), principal="alice")
    [grant] = await chat.grants()
    sending = asyncio.ensure_future(chat.send("pay 3"))  # the grant approves it; it runs slowly
    await started.wait()
    await elsewhere.chat(chat.session_id).revoke_grant(grant.id, reason="stop", principal="bob")
    release.set()
    sent = await asyncio.wait_for(sending, 30)
    assert (sent.finish_reason, sent.text, paid) == (AgentFinishReason.STOP, "Done.", [1, 3])
    history = await chat.history()
    assert [r.output for m in history for r in m.tool_responses] == ["paid 1", "paid 3"]
    later = await chat.send("pay 4")  # revoked: a person decides again
    assert later.finish_reason == AgentFinishReason.INTERRUPTED and paid == [1, 3]


def test_an_escalation_nobody_could_approve_is_refused_where_the_members_are_known():
    """Found by a probe: ``Escalation(to=["tresury"])`` (a typo), a role nobody holds, or one
    fewer members hold than the quorum were taken, and a pause handed on could only expire.
    Checked where the members are known: given with the policy, or added later."""
    ten = timedelta(minutes=10)

    def handed(to: str, roles: dict[str, Role] | None = None, **options: Any) -> ApprovalPolicy:
        return ApprovalPolicy(
            roles=roles or {"treasury": Role(tools=["transfer_money"])}, members=MEMBERS, ttl=ten,
            escalation={"transfer_money": [Escalation(to=[to], ttl=ten)]}, **options,
        )  # fmt: skip

    with pytest.raises(DefinitionError, match=r"hands it to tresury, but only 0 member\(s\) hold a role there") as typo:
        build(policy=handed("tresury"))
    assert "(tresury: a role no approval policy defines and no member holds; roles: treasury)" in str(typo.value)
    with pytest.raises(DefinitionError, match=r"hands it to sre, but only 0 member\(s\)"):
        build(policy=handed("sre", {"treasury": Role(tools=["transfer_money"]), "sre": Role(tools=[])}))
    with pytest.raises(DefinitionError, match=r"hands it to leads, but only 1 member\(s\) .* and it needs 2"):
        build(policy=handed("leads", quorum={"transfer_money": 2}))
    build(policy=handed("leads"))  # erin holds leads
    build(policy=treasury(ttl=ten, escalation=[Escalation(to=["leads"], ttl=ten)]))  # "*": deploy never pauses

    # members not known yet: taken; once added, refused, and the policy is left as it was
    unknown = ApprovalPolicy(roles={"treasury": Role(tools=["transfer_money"])}, ttl=ten,
                             escalation={"transfer_money": [Escalation(to=["tresury"], ttl=ten)]})  # fmt: skip
    agent, _, _ = build(policy=unknown)
    with pytest.raises(DefinitionError, match="hands it to tresury"):
        agent.approval_policy = agent.approval_policy.with_members({"alice": ["treasury"]})
    assert agent.approval_policy.members is None
