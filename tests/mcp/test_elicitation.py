"""An MCP server's question mid-call (elicitation) is a durable pause, answered exactly once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pausepoint import AgentFinishReason, ApprovalPolicy, Grant, Pausepoint, Role
from pausepoint.errors import AlreadyResolved, ApprovalForbidden, InvalidAnswer, InvalidGrant
from pausepoint.mcp import McpConnection
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import last_tool_results, tool_call

from .conftest import HttpBank, Ledger, script, stdio_bank


def opener(ai: Pausepoint, tools: list, store: SqliteSessionStore | None = None, *, restarted: bool = False):  # type: ignore[no-untyped-def]
    """The clerk agent; ``restarted``: as defined again by a new process, whose model is next
    called with the call's result."""
    answer = [lambda req: str(last_tool_results(req)["open_account"])]
    model = script(*answer) if restarted else script([tool_call("open_account", {"kind": "savings"})], *answer)
    options = {"store": store} if store is not None else {}
    return ai.define_agent(name="clerk", model=model, tools=tools, **options)


async def test_a_question_pauses_the_call_and_the_answer_completes_it(bank: McpConnection, ledger: Ledger) -> None:
    ai = Pausepoint()
    agent = opener(ai, await ai.mcp_tools_async(bank, include=["open_account"]))
    chat = agent.chat()
    res = await chat.send("Open a savings account.")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    pause = res.interrupts[0]
    asked = pause.metadata["elicitation"]
    assert asked["message"] == "Who holds the new savings account?"
    assert asked["requested_schema"]["required"] == ["holder"]
    assert pause.input == {"kind": "savings"}
    # what people are shown of the pause holds the question, not the server's sealed round state
    assert "mcp_round" not in pause.metadata and "mcp_round" not in (await chat.interrupts())[0].metadata
    assert ledger.entries() == []  # the tool body has not run: the server is waiting for the answer
    with pytest.raises(InvalidAnswer, match="holder"):
        await chat.resume(respond=[pause.respond({"overdraft": True})])  # the required field is missing
    with pytest.raises(InvalidAnswer) as wrong:
        await chat.resume(respond=[pause.respond({"holder": 7})])
    # one line, each field's problem: not the validator's report (found by a probe), in JSON's
    # words as a pausepoint tool's input says them, not Python's ("7 is not of type 'string'")
    assert wrong.value.message.endswith("not valid for its question: holder: Input should be a string, not a number")
    with pytest.raises(InvalidAnswer) as wrong:
        await chat.resume(respond=[pause.respond({"holder": None, "overdraft": "no"})])
    assert "holder: Input should be a string, not null" in wrong.value.message
    assert "overdraft: Input should be true or false, not a string" in wrong.value.message
    # a string's format is checked as the server checks it (found by a probe: "next tuesday" for a
    # date closed the pause, and the server then refused the answer, failing the call)
    with pytest.raises(InvalidAnswer) as wrong:
        await chat.resume(respond=[pause.respond({"holder": "Ada", "opens_on": "next tuesday"})])
    assert wrong.value.message.endswith("not valid for its question: opens_on: 'next tuesday' is not a 'date'")
    res = await chat.resume(respond=[pause.respond({"holder": "Ada"})], principal="ada", idempotency_key="once")
    assert res.finish_reason == AgentFinishReason.STOP
    assert res.text == "Opened a savings account for Ada."
    assert ledger.entries() == [{"tool": "open_account", "kind": "savings", "action": "accept", "holder": "Ada"}]
    with pytest.raises(AlreadyResolved):
        await chat.resume(respond=[pause.respond({"holder": "Eve"})])
    retried = await chat.resume(respond=[pause.respond({"holder": "Ada"})], principal="ada", idempotency_key="once")
    assert retried.text == res.text
    assert len(ledger.entries()) == 1
    audit = [e for e in await chat.audit_trail() if e.decision != "message"]
    assert [(e.decision, e.principal, e.resumed_metadata) for e in audit] == [
        ("restart", "ada", {"elicitation": {"action": "accept", "content": {"holder": "Ada"}}})
    ]  # what a person reads: the answer, not the server's sealed state the call carried back


async def test_deny_is_the_mcp_decline_and_the_server_decides_what_that_means(
    bank: McpConnection, ledger: Ledger
) -> None:
    ai = Pausepoint()
    agent = opener(ai, await ai.mcp_tools_async(bank, include=["open_account"]))
    chat = agent.chat()
    pause = (await chat.send("Open a savings account.")).interrupts[0]
    res = await chat.resume(respond=[pause.deny("no new accounts")])
    assert res.text == "No savings account opened (decline)."
    assert ledger.entries() == [{"tool": "open_account", "kind": "savings", "action": "decline"}]


async def test_a_restart_must_carry_an_answer_to_the_question(bank: McpConnection, ledger: Ledger) -> None:
    ai = Pausepoint()
    agent = opener(ai, await ai.mcp_tools_async(bank, include=["open_account"]))
    chat = agent.chat()
    pause = (await chat.send("Open a savings account.")).interrupts[0]
    with pytest.raises(InvalidAnswer, match="question from the MCP server"):
        await chat.resume(restart=[agent.approval(pause)])  # a bare approval answers nothing here
    with pytest.raises(InvalidAnswer, match="arguments"):
        await chat.resume(restart=[pause.restart(replace_input={"kind": "checking"}, resumed_metadata={})])
    cancel = pause.restart(resumed_metadata={"elicitation": {"action": "cancel"}})
    res = await chat.resume(restart=[cancel])
    assert res.text == "No savings account opened (cancel)."
    assert ledger.entries("open_account") == [{"tool": "open_account", "kind": "savings", "action": "cancel"}]


async def test_an_approved_call_that_then_asks_is_not_asked_for_approval_again(
    bank: McpConnection, ledger: Ledger
) -> None:
    ai = Pausepoint()
    agent = opener(ai, await ai.mcp_tools_async(bank, include=["open_account"], requires_approval=True))
    chat = agent.chat()
    pause = (await chat.send("Open a savings account.")).interrupts[0]
    assert pause.approval is not None and pause.approval.gated
    question = (await chat.resume(restart=[agent.approval(pause)])).interrupts[0]
    assert question.ref == pause.ref and question.pause_id != pause.pause_id  # the same call, a new pause
    assert "elicitation" in question.metadata
    res = await chat.resume(respond=[question.respond({"holder": "Ada"})])
    assert res.text == "Opened a savings account for Ada."
    assert len(ledger.entries()) == 1


async def test_under_a_policy_a_question_takes_an_answer_or_a_denial_and_the_requester_may_give_it(
    bank: McpConnection, ledger: Ledger
) -> None:
    """The server's question is a question, not an approval (found by a probe): its pause lists
    what answers it — an answer or a denial, never an approval, an edit or a grant — as the MCP
    surface says; a grant with its answer is refused saying why; and under separation of duties
    the requester answers the server's question about the call another person approved."""
    ai = Pausepoint()
    tools = await ai.mcp_tools_async(bank, include=["open_account"], requires_approval=True)
    treasury = {"treasury": Role(tools=["open_account"])}
    members = {"tess": ["treasury"], "ada": ["treasury"]}
    policy = ApprovalPolicy(roles=treasury, members=members, separation_of_duties=True, grantable=["open_account"])
    agent = ai.define_agent(
        name="clerk",
        model=script(
            [tool_call("open_account", {"kind": "savings"})], lambda r: str(last_tool_results(r)["open_account"])
        ),
        tools=tools,
        approval=policy,
    )
    chat = agent.chat(principal="ada")
    pause = (await chat.send("Open a savings account.")).interrupts[0]
    with pytest.raises(ApprovalForbidden):  # the call ada asked for: someone else approves it
        await chat.resume(restart=[agent.approval(pause)], principal="ada")
    question = (await chat.resume(restart=[agent.approval(pause)], principal="tess")).interrupts[0]
    assert question.approval is not None
    assert (question.approval.decisions, question.approval.grantable) == (["deny", "respond"], False)
    assert agent.view(question).approval.grant_note is None
    with pytest.raises(InvalidGrant, match="an answer to the question 'open_account' asked approves nothing"):
        await chat.resume(respond=[question.respond({"holder": "Ada"}, grant=Grant())], principal="tess")
    res = await chat.resume(respond=[question.respond({"holder": "Ada"})], principal="ada")
    assert res.text == "Opened a savings account for Ada." and len(ledger.entries()) == 1


# -- a process restart while a question waits -------------------------------------------------


async def test_across_a_restart_a_server_that_kept_its_key_takes_the_answer(
    tmp_path: Path, ledger: Ledger, http_bank: Callable[..., HttpBank]
) -> None:
    """The question's state is sealed by the server; a server configured with a key (every
    instance, every restart) accepts it from a new agent process: the call completes, once."""
    db = tmp_path / "sessions.db"
    first_server = http_bank(BANK_KEY="a-key-every-instance-shares")
    ai = Pausepoint()
    agent = opener(
        ai, await ai.mcp_tools_async(first_server.connection(), include=["open_account"]), SqliteSessionStore(db)
    )
    pause = (await agent.chat().send("Open a savings account.")).interrupts[0]
    session_id = (await agent.list_sessions())[0].session_id
    first_server.stop()  # the agent's process and the server both go away
    second_server = http_bank(BANK_KEY="a-key-every-instance-shares")
    ai2 = Pausepoint()
    connection = second_server.connection()
    tools = await ai2.mcp_tools_async(connection, include=["open_account"])
    agent2 = opener(ai2, tools, SqliteSessionStore(db), restarted=True)
    res = await agent2.chat(session_id).resume(respond=[pause.respond({"holder": "Ada"})])
    assert res.text == "Opened a savings account for Ada."
    assert ledger.entries() == [{"tool": "open_account", "kind": "savings", "action": "accept", "holder": "Ada"}]
    await connection.aclose()


async def test_across_a_restart_a_server_that_lost_the_question_ends_the_call_as_not_completed(
    tmp_path: Path, ledger: Ledger
) -> None:
    """A stdio server dies with the agent's process, and its default key with it: the answer
    cannot reach the question any more. The call is not sent again (it is not idempotent):
    the model is told it did not complete, and the session goes on."""
    db = tmp_path / "sessions.db"
    ai = Pausepoint()
    first = stdio_bank(ledger)
    agent = opener(ai, await ai.mcp_tools_async(first, include=["open_account"]), SqliteSessionStore(db))
    chat = agent.chat()
    pause = (await chat.send("Open a savings account.")).interrupts[0]
    await first.aclose()
    ai2 = Pausepoint()
    second = stdio_bank(ledger)
    agent2 = opener(
        ai2, await ai2.mcp_tools_async(second, include=["open_account"]), SqliteSessionStore(db), restarted=True
    )
    res = await agent2.chat(chat.session_id).resume(respond=[pause.respond({"holder": "Ada"})])
    assert res.finish_reason == AgentFinishReason.STOP
    assert "did not complete" in res.text and "not_completed" not in res.text
    assert ledger.entries() == []
    await second.aclose()


async def test_across_a_restart_an_idempotent_tool_starts_over_and_asks_again(tmp_path: Path, ledger: Ledger) -> None:
    db = tmp_path / "sessions.db"
    ai = Pausepoint()
    first = stdio_bank(ledger)
    options = {"include": ["open_account"], "idempotent": True}
    agent = opener(ai, await ai.mcp_tools_async(first, **options), SqliteSessionStore(db))
    chat = agent.chat()
    pause = (await chat.send("Open a savings account.")).interrupts[0]
    await first.aclose()
    ai2 = Pausepoint()
    second = stdio_bank(ledger)
    agent2 = opener(ai2, await ai2.mcp_tools_async(second, **options), SqliteSessionStore(db), restarted=True)
    chat2 = agent2.chat(chat.session_id)
    res = await chat2.resume(respond=[pause.respond({"holder": "Ada"})])
    assert res.finish_reason == AgentFinishReason.INTERRUPTED  # asked again, as a new pause of the call
    again = res.interrupts[0]
    assert again.ref == pause.ref and again.pause_id != pause.pause_id
    res = await chat2.resume(respond=[again.respond({"holder": "Ada"})])
    assert res.text == "Opened a savings account for Ada."
    assert len(ledger.entries()) == 1
    await second.aclose()


async def test_a_restart_of_a_pause_that_asked_nothing_cannot_carry_a_servers_state(
    bank: McpConnection, ledger: Ledger
) -> None:
    """The state an MCP server sealed goes back to it only with the answer to its question: a
    restart of an approval pause carrying one (copied from another question, say) is refused,
    and nothing reaches the server."""
    ai = Pausepoint()
    agent = opener(ai, await ai.mcp_tools_async(bank, include=["open_account"], requires_approval=True))
    chat = agent.chat()
    pause = (await chat.send("Open a savings account.")).interrupts[0]
    assert "elicitation" not in (pause.metadata or {})  # an approval pause
    carried = {
        "elicitation": {"action": "accept", "content": {"holder": "Mallory"}},
        "mcp_round": {"questions": {}, "answers": {}, "request_state": "sealed-elsewhere", "about": {}, "key": "q"},
    }
    with pytest.raises(InvalidAnswer, match="question"):
        await chat.resume(restart=[pause.restart(resumed_metadata=carried)])
    assert ledger.entries() == []
    assert (await chat.interrupts())[0].pause_id == pause.pause_id  # still waiting
