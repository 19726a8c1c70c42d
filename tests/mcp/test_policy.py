"""MCP tools under the runtime's approval mechanism (``requires_approval`` + ``ApprovalPolicy``):
grants, a quorum, rules and denials, with a real MCP server whose ledger counts what reached it."""

from __future__ import annotations

from typing import Any

import pytest

from pausepoint import AgentFinishReason, ApprovalPolicy, Grant, Pausepoint, Role, Rule
from pausepoint.errors import AlreadyApproved, AlreadyResolved, ApprovalForbidden, InvalidGrant
from pausepoint.mcp import McpConnection
from pausepoint.testing import ScriptedModel, Step, last_tool_results, tool_call

from .conftest import Ledger, stdio_bank

TRANSFER = {"tool": "transfer", "amount": 500, "to_account": "savings"}
MEMBERS = {"alice": ["treasury"], "bob": ["treasury"], "carol": ["treasury"]}


def teller(request: Any) -> Step:
    """Transfers what it is asked ("pay 500 to savings"), then says what the bank said."""
    results = last_tool_results(request)
    if results:
        return str(results["transfer"])
    _, amount, _, to = request.messages[-1].text.split()
    return [tool_call("transfer", {"amount": int(amount), "to_account": to})]


async def agent_on(bank: McpConnection, policy: ApprovalPolicy | None, requires_approval: Any = ("transfer",)) -> Any:
    ai = Pausepoint()
    tools = await ai.mcp_tools_async(bank, include=["transfer"], requires_approval=requires_approval)
    return ai.define_agent(name="teller", model=ScriptedModel(teller), tools=tools, approval=policy)


async def test_approved_with_a_grant_the_call_and_a_later_one_each_reach_the_server_once(
    bank: McpConnection, ledger: Ledger
) -> None:
    agent = await agent_on(bank, ApprovalPolicy(grantable=["transfer"]))
    chat = agent.chat(principal="alice")
    (pause,) = (await chat.send("pay 500 to savings")).interrupts
    assert pause.approval is not None and pause.approval.gated and pause.approval.grantable
    assert ledger.entries() == []  # nothing reached the server before the approval
    res = await chat.resume(restart=[agent.approval(pause, grant=Grant())], idempotency_key="yes")
    assert res.text == "Transferred $500 to savings." and ledger.entries() == [TRANSFER]
    later = await chat.send("pay 70 to checking")  # the grant approves it: no pause
    assert later.finish_reason == AgentFinishReason.STOP and later.text == "Transferred $70 to checking."
    assert ledger.entries() == [TRANSFER, {"tool": "transfer", "amount": 70, "to_account": "checking"}]
    with pytest.raises(AlreadyResolved):  # a replayed approval: refused, nothing sent
        await chat.resume(restart=[agent.approval(pause)])
    assert (await chat.resume(restart=[agent.approval(pause, grant=Grant())], idempotency_key="yes")).text == res.text
    (grant,) = await chat.grants()
    trail = [(e.decision, e.grant) for e in await chat.audit_trail() if e.decision in ("grant", "approve")]
    assert trail == [("approve", None), ("grant", grant.id), ("approve", grant.id)]
    assert len(ledger.entries()) == 2


async def test_a_grant_bounded_by_the_servers_arguments_approves_only_calls_within_them(
    bank: McpConnection, ledger: Ledger
) -> None:
    agent = await agent_on(bank, ApprovalPolicy(grantable=["transfer"]))
    chat = agent.chat(principal="alice")
    (pause,) = (await chat.send("pay 500 to savings")).interrupts
    await chat.resume(restart=[agent.approval(pause, grant=Grant(bounds={"amount": {"max": 100}}))])
    assert (await chat.send("pay 100 to savings")).text == "Transferred $100 to savings."
    over = await chat.send("pay 101 to savings")
    assert over.finish_reason == AgentFinishReason.INTERRUPTED  # outside the grant: a person decides
    assert [e["amount"] for e in ledger.entries()] == [500, 100]


async def test_a_grant_cannot_bound_by_size_a_property_whose_schema_names_no_type(ledger: Ledger) -> None:
    """``max`` on such a property compared whatever came: ``True <= 100``, so a later call with
    ``amount: true`` reached the server approved by nobody (found by a probe). Such a grant is
    refused; ``one_of`` bounds it."""
    ai = Pausepoint()
    untyped = stdio_bank(ledger, BANK_VERSION="untyped")
    tools = await ai.mcp_tools_async(untyped, include=["transfer"], requires_approval=["transfer"])
    steps = [
        [tool_call("transfer", {"amount": 50, "to_account": "x"})],
        "Sent.",
        [tool_call("transfer", {"amount": True, "to_account": "x"})],
    ]
    agent = ai.define_agent(
        name="teller", model=ScriptedModel(steps), tools=tools, approval=ApprovalPolicy(grantable=["transfer"])
    )
    chat = agent.chat(principal="alice")
    (pause,) = (await chat.send("pay 50 to x")).interrupts
    with pytest.raises(InvalidGrant, match="'max' on 'amount' cannot be applied: the field has no type"):
        await chat.resume(restart=[agent.approval(pause, grant=Grant(bounds={"amount": {"max": 100}}))])
    assert ledger.entries() == []  # refused: nothing recorded, nothing sent
    await chat.resume(restart=[agent.approval(pause, grant=Grant(bounds={"amount": {"one_of": [50]}}))])
    later = await chat.send("pay true to x")
    assert later.finish_reason == AgentFinishReason.INTERRUPTED  # outside the grant: a person decides
    assert ledger.entries() == [{"tool": "transfer", "amount": 50, "to_account": "x"}]
    await ai.aclose()


async def test_a_two_of_two_quorum_sends_the_call_once_after_the_second_approval(
    bank: McpConnection, ledger: Ledger
) -> None:
    policy = ApprovalPolicy(roles={"treasury": Role(tools=["transfer"])}, members=MEMBERS, quorum={"transfer": 2})
    agent = await agent_on(bank, policy)
    chat = agent.chat(principal="dave")
    (pause,) = (await chat.send("pay 500 to savings")).interrupts
    assert pause.approval is not None and pause.approval.required == 2
    res = await chat.resume(restart=[agent.approval(pause)], principal="alice")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED and ledger.entries() == []
    with pytest.raises(AlreadyApproved):  # the same approver twice counts once
        await chat.resume(restart=[agent.approval(pause)], principal="alice")
    with pytest.raises(ApprovalForbidden):  # not in treasury
        await chat.resume(restart=[agent.approval(pause)], principal="dave")
    assert ledger.entries() == []
    res = await chat.resume(restart=[agent.approval(pause)], principal="bob")
    assert res.text == "Transferred $500 to savings." and ledger.entries() == [TRANSFER]
    with pytest.raises(AlreadyResolved):
        await chat.resume(restart=[agent.approval(pause)], principal="carol")
    trail = [(e.decision, e.principal, e.approvals) for e in await chat.audit_trail() if e.decision != "message"]
    assert trail == [("approve", "alice", 1), ("approve", "bob", 2)]
    assert ledger.entries() == [TRANSFER]


async def test_a_denial_in_a_quorum_never_reaches_the_server(bank: McpConnection, ledger: Ledger) -> None:
    policy = ApprovalPolicy(roles={"treasury": Role(tools=["transfer"])}, members=MEMBERS, quorum={"transfer": 2})
    agent = await agent_on(bank, policy)
    chat = agent.chat(principal="dave")
    (pause,) = (await chat.send("pay 500 to savings")).interrupts
    await chat.resume(restart=[agent.approval(pause)], principal="alice")
    res = await chat.resume(respond=[pause.deny("no")], principal="bob")
    assert res.finish_reason == AgentFinishReason.STOP and "'denied': True" in res.text
    assert ledger.entries() == []


async def test_rules_read_the_servers_arguments_and_decide_without_a_person(
    bank: McpConnection, ledger: Ledger
) -> None:
    policy = ApprovalPolicy(
        rules=[
            Rule.deny("no external", ["transfer"], when=lambda t: t.to_account.startswith("ext-")),
            Rule.approve("small", ["transfer"], when=lambda t: t.amount < 100),
        ]
    )
    agent = await agent_on(bank, policy)
    chat = agent.chat(principal="alice")
    assert (await chat.send("pay 5 to savings")).text == "Transferred $5 to savings."
    assert "'denied': True" in (await chat.send("pay 5 to ext-1")).text
    assert (await chat.send("pay 500 to savings")).finish_reason == AgentFinishReason.INTERRUPTED
    assert ledger.entries() == [{"tool": "transfer", "amount": 5, "to_account": "savings"}]
    decided = [(e.decision, e.rule) for e in await chat.audit_trail() if e.via == "policy"]
    assert decided == [("approve", "small"), ("deny", "no external")]


async def test_a_policy_alone_gates_an_mcp_tool_named_by_an_ask_rule(bank: McpConnection, ledger: Ledger) -> None:
    agent = await agent_on(bank, ApprovalPolicy(rules=[Rule.ask("a person", ["transfer"])]), requires_approval=False)
    chat = agent.chat(principal="alice")
    (pause,) = (await chat.send("pay 500 to savings")).interrupts
    assert pause.approval is not None and pause.approval.rule == "a person" and ledger.entries() == []
    assert (await chat.resume(restart=[agent.approval(pause)])).text == "Transferred $500 to savings."
    assert ledger.entries() == [TRANSFER]


async def test_served_over_mcp_a_quorum_asks_each_approver_once_and_sends_the_call_once(ledger: Ledger) -> None:
    """The person at an MCP client approves with ``send_message(ask=true)``; their approval is
    counted, they are not asked again, and the desk's second approval sends the call."""
    from pausepoint.server import BearerTokens, OwnerPolicy, create_app
    from tests.server.harness import serve_in_thread

    from .conftest import stdio_bank
    from .test_serve_ask import TOKENS, answering, client, data, send

    ai = Pausepoint()  # listed here, not in the server's thread (which must start in 10 s)
    tools = ai.mcp_tools(stdio_bank(ledger), include=["transfer"], requires_approval=True)
    policy = ApprovalPolicy(
        roles={"treasury": Role(tools=["transfer"])},
        members={"alice": ["treasury"], "desk": ["treasury"]},
        quorum={"transfer": 2},
    )
    ai.define_agent(name="teller", model=ScriptedModel(teller), tools=tools, approval=policy)

    def factory() -> Any:
        return create_app(ai, auth=BearerTokens(TOKENS), policy=OwnerPolicy(approvers={"desk"}), mcp=True)

    with serve_in_thread(factory) as url:
        callback, asked = answering({"decision": "approve"})
        async with client(url, callback=callback) as alice:
            waiting = await send(alice, "pay 500 to savings")
        (question,) = asked
        assert question.message.endswith("(risk: normal, 0 of 2 approvals). Approve?")
        assert waiting["finish_reason"] == "interrupted" and ledger.entries() == []
        (pause,) = waiting["pauses"]
        assert pause["approval"]["approved_by"] == ["alice"] and pause["approval"]["progress"] == "1 of 2 approvals"
        async with client(url, "desk-token") as desk:
            answer = {"agent": "teller", "session_id": waiting["session_id"], "ref": pause["ref"]}
            done = data(await desk.call_tool("answer_pause", {**answer, "decision": "approve"}))
            again = data(await desk.call_tool("answer_pause", {**answer, "decision": "approve"}))
    assert done["text"] == "Transferred $500 to savings." and ledger.entries() == [TRANSFER]
    assert again[0] == "error" and "already_resolved" in again[1]
    assert ledger.entries() == [TRANSFER]


async def test_an_approved_call_asks_the_server_for_its_listing_once(bank: McpConnection, ledger: Ledger) -> None:
    """The answer compares the server's listing (a pause of a changed tool is refused), and the
    call it sends goes on against that comparison, a moment old: one ``tools/list``, not two."""
    agent = await agent_on(bank, None)
    chat = agent.chat(principal="alice")
    (pause,) = (await chat.send("pay 500 to savings")).interrupts
    listings = 0
    listed = bank.list_tools

    async def counted() -> Any:
        nonlocal listings
        listings += 1
        return await listed()

    bank.list_tools = counted  # type: ignore[method-assign]
    res = await chat.resume(restart=[agent.approval(pause)])
    assert res.text == "Transferred $500 to savings." and ledger.entries() == [TRANSFER]
    assert listings == 1
