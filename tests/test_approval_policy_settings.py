"""An approval policy's per-tool settings, composed and checked (found by a probe, policy18):
an agent's ``"*"`` is its setting for every tool, ahead of what the app's policy says of one
tool; and a ``members`` function that could never answer (an async one) is refused when the
policy is defined, not on every approval after. Public API only, counting the tool's runs."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from pausepoint import AgentFinishReason, ApprovalPolicy, Escalation, Grant, Role
from pausepoint.errors import ApprovalForbidden, DefinitionError, InvalidGrant
from pausepoint.stores import SessionStore

from .approval_apps import MEMBERS, Clock, build, treasury

TREASURY = {"treasury": Role(tools=["transfer_money"])}

# -- an agent's "*" before the app's entry for a tool ----------------------------------------------


async def test_an_agents_star_quorum_ttl_and_escalation_hold_for_a_tool_the_apps_policy_names(store: SessionStore):
    clock = Clock()
    agents = ApprovalPolicy(
        roles=TREASURY,
        members={**MEMBERS, "fay": ["leads"]},  # two leads: a step under a quorum of two needs them
        quorum={"*": 2},
        ttl={"*": timedelta(minutes=5)},
        escalation={"*": [Escalation(to=["leads"], ttl=timedelta(hours=1))]},
    )
    apps = ApprovalPolicy(
        members={"sam": ["sre"]},
        quorum={"transfer_money": 1},
        ttl={"transfer_money": timedelta(days=7)},
        escalation={"transfer_money": [Escalation(to=["sre"], ttl=timedelta(hours=2))]},
    )
    agent, _, ledger = build(store, agents, app_policy=apps, clock=clock)
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    assert (pause.approval.required, pause.expires_at) == (2, clock.now + timedelta(minutes=5))
    assert agent.view(pause).on_expiry == "It is handed to leads if nobody decides it in time."
    res = await chat.approve(pause.ref, principal="alice")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED and ledger == []  # one of two: nothing runs
    clock.advance(timedelta(minutes=6))
    await agent.settle_expired()
    [handed] = await chat.interrupts()
    assert handed.approval.roles == ["leads"]  # the agent's step, not the app's sre
    with pytest.raises(ApprovalForbidden):
        await chat.approve(handed.ref, principal="sam")
    assert (await chat.approve(handed.ref, principal="erin")).text == "sent 500 to savings"  # alice's counts
    assert ledger == ["500->savings"]


async def test_the_apps_policy_still_decides_a_tool_the_agents_policy_says_nothing_of(store: SessionStore):
    agents = treasury(ttl={"deploy": timedelta(minutes=5)})  # a "*" of the app's comes after the agent's entries
    apps = ApprovalPolicy(quorum={"transfer_money": 2}, ttl={"*": timedelta(hours=1)})
    clock = Clock()
    agent, _, ledger = build(store, agents, app_policy=apps, clock=clock)
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    assert (pause.approval.required, pause.expires_at) == (2, clock.now + timedelta(hours=1))
    await chat.approve(pause.ref, principal="alice")
    assert ledger == []
    await chat.approve(pause.ref, principal="bob")
    assert ledger == ["500->savings"]


async def test_an_agents_star_limit_on_grants_is_not_lifted_by_the_apps_entry_for_a_tool(store: SessionStore):
    clock = Clock()
    agents = treasury(grantable={"*": timedelta(minutes=5)})
    apps = ApprovalPolicy(grantable={"transfer_money": None})  # the app's: no limit
    agent, _, ledger = build(store, agents, app_policy=apps, clock=clock)
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 5 to a")).interrupts
    with pytest.raises(InvalidGrant, match="at most 0:05:00"):
        await chat.approve(pause.ref, principal="alice", grant=Grant(ttl=timedelta(days=1)))
    assert ledger == [] and await chat.grants() == []
    await chat.approve(pause.ref, principal="alice", grant=Grant())
    [grant] = await chat.grants()
    assert grant.expires_at == clock.now + timedelta(minutes=5)
    clock.advance(timedelta(minutes=6))
    assert (await chat.send("pay 6 to a")).finish_reason == AgentFinishReason.INTERRUPTED
    assert ledger == ["5->a"]


# -- members a policy can read ----------------------------------------------------------------------


async def _directory(principal: str) -> list[str]:
    return ["treasury"] if principal in MEMBERS else []


class _AsyncDirectory:
    async def __call__(self, principal: str) -> list[str]:
        return await _directory(principal)


@pytest.mark.parametrize("members", [_directory, _AsyncDirectory()], ids=["async def", "async __call__"])
def test_an_async_members_function_is_refused_when_the_policy_is_defined(members):
    with pytest.raises(DefinitionError, match=r"members must be a mapping or a plain function.*not async") as refused:
        ApprovalPolicy(roles=TREASURY, members=members)
    assert "pass a dict" in refused.value.message


async def test_a_plain_members_function_handing_on_to_an_async_one_is_refused_in_words(
    store: SessionStore, caplog: pytest.LogCaptureFixture, recwarn: pytest.WarningsRecorder
):
    policy = ApprovalPolicy(roles=TREASURY, members=lambda principal: _directory(principal))
    agent, _, ledger = build(store, policy)
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 500 to savings")).interrupts
    with caplog.at_level(logging.WARNING, logger="pausepoint"), pytest.raises(ApprovalForbidden) as refused:
        await chat.approve(pause.ref, principal="alice")
    assert refused.value.details["reason"] == "members" and ledger == []
    assert "returned an awaitable, not roles: it must be a plain function" in caplog.text
    assert not [w for w in recwarn if "never awaited" in str(w.message)]  # closed, not left to the collector


# -- a pause's view says the escalation it keeps ---------------------------------------------------


async def test_a_pauses_view_says_the_escalation_recorded_with_it_not_the_deployed_policys(store: SessionStore):
    """A pause keeps its escalation (README): after a deploy that changed it, the pause's view
    said the new policy's step, or "denied automatically", while the pause was handed to the
    step it recorded (found by a probe)."""
    clock = Clock()

    def deployed(*steps: str) -> ApprovalPolicy:
        escalation = {"transfer_money": [Escalation(to=[step], ttl=timedelta(hours=1)) for step in steps]}
        return ApprovalPolicy(roles=TREASURY, members={**MEMBERS, "sam": ["sre"]}, escalation=escalation,
                              ttl={"transfer_money": timedelta(minutes=5)})  # fmt: skip

    first, _, ledger = build(store, deployed("leads"), clock=clock)
    paused = await first.chat(principal="dave").send("pay 500 to savings")
    [pause] = paused.interrupts
    assert pause.approval is not None and pause.approval.handed_to == ["leads"]
    for steps in (("sre",), ()):  # the deploys after it: another step, none
        later, _, _ = build(store, deployed(*steps), clock=clock, ledger=ledger)
        [seen] = await later.chat(paused.session_id, principal="dave").interrupts()
        assert later.view(seen).on_expiry == "It is handed to leads if nobody decides it in time."
    clock.advance(timedelta(minutes=6))
    await later.settle_expired()
    [handed] = await later.chat(paused.session_id, principal="dave").interrupts()
    assert handed.approval is not None and handed.approval.roles == ["leads"] and handed.approval.handed_to is None
    assert ledger == []
