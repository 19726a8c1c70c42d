"""MCP tools as agent tools: listing, calls, approval before the call, errors the model sees."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

import pytest

from pausepoint import AgentFinishReason, Pausepoint, ToolResponse
from pausepoint.errors import (
    AlreadyResolved,
    DecisionNotAllowed,
    DefinitionError,
    McpUnavailable,
    ToolDefinitionChanged,
)
from pausepoint.mcp import McpConnection, McpTool
from pausepoint.stores import InMemorySessionStore, SqliteSessionStore
from pausepoint.testing import ScriptedModel, last_tool_results, tool_call

from .conftest import HttpBank, Ledger, script, stdio_bank


async def test_lists_the_servers_tools_with_their_schemas_prefixed_and_filtered(bank: McpConnection) -> None:
    ai = Pausepoint()
    tools = await ai.mcp_tools_async(bank, prefix="bank_", exclude=["crash"])
    assert sorted(t.name for t in tools) == ["bank_balance", "bank_open_account", "bank_transfer"]
    transfer = next(t for t in tools if t.name == "bank_transfer")
    assert isinstance(transfer, McpTool) and transfer.mcp_name == "transfer"
    assert transfer.input_schema["required"] == ["amount", "to_account"]  # the server's schema, as sent
    assert transfer.definition.input_schema == transfer.input_schema
    assert transfer.description == "Transfer money between accounts."
    only = await Pausepoint().mcp_tools_async(bank, include=["balance"])
    assert [t.name for t in only] == ["balance"]


async def test_a_name_some_provider_refuses_is_given_as_one_they_all_take_and_the_server_is_called_by_its_own(
    bank: McpConnection, ledger: Ledger
) -> None:
    """An MCP server may name a tool as some provider refuses (``files.read``; here a prefix
    with a dot): the agent's tool is named as every provider takes a name (``TOOL_NAME``), and
    the server is called by its own name. Found by a probe: sent as it was, a dotted name failed
    every model call on OpenAI and Anthropic."""
    ai = Pausepoint()
    tools = await ai.mcp_tools_async(bank, prefix="bank.", include=["balance"])
    assert [(t.name, t.mcp_name) for t in tools] == [("bank_balance", "balance")]
    model = script(
        [tool_call("bank_balance", {"account": "savings"})],
        lambda req: f"It says {last_tool_results(req)['bank_balance']}",
    )
    agent = ai.define_agent(name="teller", model=model, tools=tools)
    assert (await agent.chat().send("What is in savings?")).text == "It says savings: $1,000"
    assert ledger.entries() == [{"tool": "balance", "account": "savings"}]


async def test_a_call_reaches_the_server_once_and_its_result_reaches_the_model(
    bank: McpConnection, ledger: Ledger
) -> None:
    ai = Pausepoint()
    tools = await ai.mcp_tools_async(bank)
    model = script(
        [tool_call("balance", {"account": "savings"})], lambda req: f"It says {last_tool_results(req)['balance']}"
    )
    agent = ai.define_agent(name="teller", model=model, tools=tools)
    res = await agent.chat().send("What is in savings?")
    assert res.finish_reason == AgentFinishReason.STOP
    assert res.text == "It says savings: $1,000"
    assert ledger.entries() == [{"tool": "balance", "account": "savings"}]


async def test_arguments_that_fail_the_servers_schema_are_an_invalid_input_result_and_never_sent(
    bank: McpConnection, ledger: Ledger
) -> None:
    ai = Pausepoint()
    tools = await ai.mcp_tools_async(bank)
    model = script(*[[tool_call("transfer", {"amount": "lots"})], "Sorry."])
    agent = ai.define_agent(name="teller", model=model, tools=tools)
    await agent.chat().send("Move lots.")
    result = last_tool_results(model.requests[1])["transfer"]
    assert result["error"] == "invalid input for tool 'transfer'"
    problems = {(tuple(d["loc"]), d["msg"]) for d in result["details"]}
    # each at its field, in JSON's words, as a pausepoint tool's input says them (not Python's:
    # "'to_account' is a required property", "'lots' is not of type 'integer'")
    assert (("to_account",), "Field required") in problems
    assert (("amount",), "Input should be an integer, not a string") in problems
    assert ledger.entries() == []


async def test_bad_definitions_are_refused_with_a_typed_error(bank: McpConnection) -> None:
    ai = Pausepoint()
    with pytest.raises(DefinitionError, match="has no tool 'withdraw'"):
        await ai.mcp_tools_async(bank, include=["withdraw"])
    with pytest.raises(DefinitionError, match="has no tool 'wire'"):
        await ai.mcp_tools_async(bank, requires_approval={"wire"})
    with pytest.raises(DefinitionError, match="collection of tool names"):
        await ai.mcp_tools_async(bank, exclude="crash")
    await ai.mcp_tools_async(bank, include=["balance"])
    with pytest.raises(DefinitionError, match="already defined"):
        await ai.mcp_tools_async(bank, include=["balance"])
    with pytest.raises(DefinitionError, match="McpConnection"):
        await ai.mcp_tools_async("http://example.invalid/mcp")  # type: ignore[arg-type]
    # found by a probe: one string was read letter by letter ("has no tool 'a', 'p', 'y'"), and
    # None or a number was a TypeError from inside; each names its option now, defining nothing
    for option, value, said in (
        ("requires_approval", "pay", "requires_approval takes a collection of tool names, not one string"),
        ("requires_approval", None, "requires_approval takes True, False, tool names, a mapping or a predicate"),
        ("idempotent", None, "idempotent takes True, False or a collection of tool names, not None"),
        ("allow_input_edits", 3, "allow_input_edits takes True, False or a collection of tool names, not 3"),
        ("include", 42, "include takes a collection of tool names, a predicate on the SDK's Tool, or None"),
        ("exclude", True, "exclude takes a collection of tool names, not True"),
        ("prefix", None, "prefix takes a string"),
    ):
        with pytest.raises(DefinitionError, match=re.escape(said)):
            await ai.mcp_tools_async(bank, **{"include": ["transfer"], option: value})
    agent = ai.define_agent(name="a", model=ScriptedModel(["ok"]), tools=["balance"])
    with pytest.raises(DefinitionError):  # nothing of the refused listings was defined
        ai.define_agent(name="b", model=ScriptedModel(["ok"]), tools=["transfer"])
    assert list(agent.tools) == ["balance"]


async def test_a_server_that_cannot_be_started_is_mcp_unavailable(tmp_path: object) -> None:
    with pytest.raises(McpUnavailable, match="could not be started or reached"):
        await Pausepoint().mcp_tools_async(McpConnection.stdio("/nonexistent/mcp-server"))


def test_mcp_tools_lists_synchronously_at_import_time(ledger: Ledger) -> None:
    ai = Pausepoint()
    tools = ai.mcp_tools(stdio_bank(ledger), include=["balance"])
    assert [t.name for t in tools] == ["balance"]


# -- approval before the call -----------------------------------------------------------------


def gated_agent(ai: Pausepoint, tools: list, store=None):  # type: ignore[no-untyped-def]
    model = script(
        [tool_call("transfer", {"amount": 500, "to_account": "savings"})], lambda req: str(last_tool_results(req))
    )
    return ai.define_agent(name="teller", model=model, tools=tools, store=store or InMemorySessionStore())


async def test_an_approval_gated_tool_pauses_before_the_call_and_approval_sends_exactly_that_call(
    bank: McpConnection, ledger: Ledger
) -> None:
    ai = Pausepoint()
    agent = gated_agent(ai, await ai.mcp_tools_async(bank, requires_approval={"transfer"}))
    chat = agent.chat()
    res = await chat.send("Move $500 to savings.")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    pause = res.interrupts[0]
    assert pause.name == "transfer" and pause.input == {"amount": 500, "to_account": "savings"}
    assert pause.metadata == {"reason": "transfer needs approval before it runs"}  # the runtime's gate
    assert pause.approval is not None and pause.approval.gated and pause.approval.decisions == ["approve", "deny"]
    assert ledger.entries() == []  # nothing reached the server yet
    approve = agent.approval(pause)
    res = await chat.resume(restart=[approve], idempotency_key="k1")
    assert res.finish_reason == AgentFinishReason.STOP
    assert "Transferred $500 to savings." in res.text
    assert ledger.entries() == [{"tool": "transfer", "amount": 500, "to_account": "savings"}]
    # a replayed answer: refused, or the first outcome again with the same key; never a second call
    with pytest.raises(AlreadyResolved):
        await chat.resume(restart=[approve])
    again = await chat.resume(restart=[approve], idempotency_key="k1")
    assert again.text == res.text
    assert len(ledger.entries()) == 1


async def test_a_denied_call_never_reaches_the_server(bank: McpConnection, ledger: Ledger) -> None:
    ai = Pausepoint()
    agent = gated_agent(ai, await ai.mcp_tools_async(bank, requires_approval=True))
    chat = agent.chat()
    res = await chat.send("Move $500 to savings.")
    res = await chat.resume(respond=[res.interrupts[0].deny("not today")])
    assert res.finish_reason == AgentFinishReason.STOP
    assert "'denied': True" in res.text and "not today" in res.text
    assert ledger.entries() == []


async def test_a_predicate_decides_which_calls_need_approval(bank: McpConnection, ledger: Ledger) -> None:
    ai = Pausepoint()
    big = {"transfer": lambda arguments: arguments["amount"] >= 100}
    tools = await ai.mcp_tools_async(bank, requires_approval=big)
    model = script(
        [
            tool_call("transfer", {"amount": 5, "to_account": "a"}),
            tool_call("transfer", {"amount": 500, "to_account": "b"}),
        ],
        "done",
    )
    agent = ai.define_agent(name="teller", model=model, tools=tools)
    res = await agent.chat().send("Two transfers.")
    assert [i.input["amount"] for i in res.interrupts] == [500]
    assert ledger.entries() == [{"tool": "transfer", "amount": 5, "to_account": "a"}]


async def test_a_pause_taken_on_a_tool_the_server_changed_since_is_refused(ledger: Ledger, tmp_path) -> None:  # type: ignore[no-untyped-def]
    store_path = tmp_path / "sessions.db"
    ai = Pausepoint()
    first = stdio_bank(ledger)
    agent = gated_agent(ai, await ai.mcp_tools_async(first, requires_approval=True), SqliteSessionStore(store_path))
    chat = agent.chat()
    pause = (await chat.send("Move $500 to savings.")).interrupts[0]
    await first.aclose()
    # a new process: the same agent definition, but the server now wants a memo
    ai2 = Pausepoint()
    changed = stdio_bank(ledger, BANK_VERSION="2")
    agent2 = gated_agent(
        ai2, await ai2.mcp_tools_async(changed, requires_approval=True), SqliteSessionStore(store_path)
    )
    with pytest.raises(ToolDefinitionChanged, match="'transfer' changed since it paused"):
        await agent2.chat(chat.session_id).resume(restart=[agent2.approval(pause)])
    assert ledger.entries() == []
    await changed.aclose()


async def test_a_server_that_dies_mid_call_is_an_error_the_model_sees_and_the_session_goes_on(
    bank: McpConnection, ledger: Ledger
) -> None:
    ai = Pausepoint()
    tools = await ai.mcp_tools_async(bank)
    model = script(
        [tool_call("crash", {"reason": "boom"})],
        lambda req: f"crash said: {last_tool_results(req)['crash']['error']}",
        [tool_call("balance", {"account": "savings"})],
        lambda req: str(last_tool_results(req)["balance"]),
    )
    agent = ai.define_agent(name="teller", model=model, tools=tools)
    chat = agent.chat()
    res = await chat.send("Crash, please.")
    assert res.finish_reason == AgentFinishReason.STOP
    assert res.text.startswith("crash said: McpUnavailable: MCP server 'bank': the connection ")
    assert "it may or may not have taken effect" in res.text
    assert [e["tool"] for e in ledger.entries()] == ["crash"]
    # the next call starts the server again (stdio) or reconnects (HTTP, a server that died stays dead)
    if isinstance(bank.target, str):
        return
    res = await chat.send("Balance?")
    assert res.text == "savings: $1,000"


async def test_a_made_up_result_for_an_approval_pause_is_refused_and_nothing_is_sent(
    bank: McpConnection, ledger: Ledger
) -> None:
    ai = Pausepoint()
    agent = gated_agent(ai, await ai.mcp_tools_async(bank, requires_approval=True))
    chat = agent.chat()
    res = await chat.send("Move $500 to savings.")
    pause = res.interrupts[0]
    with pytest.raises(DecisionNotAllowed, match="takes approve, deny, not respond"):
        await chat.resume(respond=[ToolResponse(pause.ref, "transfer", "done by hand")])
    assert (await chat.interrupts())[0].pause_id == pause.pause_id  # still waiting
    assert ledger.entries() == []


async def test_an_approved_call_is_not_sent_to_a_server_redeployed_with_another_schema_since_the_pause(
    ledger: Ledger, http_bank: Callable[..., HttpBank]
) -> None:
    """The agent's process keeps running, and its HTTP connection with it, while the server is
    redeployed at the same URL with a changed ``transfer`` (a ``currency`` defaulting to euros),
    saying nothing: the approval of a call paused against the first version is refused when
    given (it was recorded, and the call then failed unsent: found by a probe), and a later
    call of the tool fails without being sent."""
    first = http_bank()
    connection = first.connection()
    ai = Pausepoint()
    transfer = [tool_call("transfer", {"amount": 500, "to_account": "savings"})]
    model = script(transfer, transfer, lambda req: str(last_tool_results(req)))  # a cancel asks no model
    tools = await ai.mcp_tools_async(connection, requires_approval=True)
    agent = ai.define_agent(name="teller", model=model, tools=tools, store=InMemorySessionStore())
    chat = agent.chat()
    pause = (await chat.send("Move $500 to savings.")).interrupts[0]
    first.stop()
    http_bank(port=first.port, BANK_VERSION="currency")  # the same URL, a new schema
    with pytest.raises(ToolDefinitionChanged, match="'transfer' changed since it paused"):
        await chat.resume(restart=[agent.approval(pause)])
    assert [p.pause_id for p in await chat.interrupts()] == [pause.pause_id]  # nothing recorded
    assert [e.decision for e in await chat.audit_trail()] == ["message"]
    await chat.cancel_pending("the server changed")
    res = await chat.send("Move $500 to savings.")  # known changed: it fails at once, nobody asked
    assert ledger.entries() == []  # nothing reached the new server
    assert res.finish_reason == AgentFinishReason.STOP and res.interrupts == []
    assert "McpError: MCP server 'bank' changed tool 'transfer' since" in res.text
    assert "was not sent" in res.text
    await connection.aclose()


async def test_a_change_the_server_announces_fails_the_next_call_unsent(ledger: Ledger) -> None:
    """A 2026 server tells only the clients that listen (``subscriptions/listen``): the
    connection listens, so a call made after the notice is compared with the new listing and
    not sent (found by a probe: the notice never arrived, and a call not paused went out on the
    definition it was made for)."""
    ai = Pausepoint()
    changing = stdio_bank(ledger, BANK_VERSION="changing")
    tools = await ai.mcp_tools_async(changing, include=["transfer", "require_memos"])
    move = [tool_call("transfer", {"amount": 500, "to_account": "savings"})]
    model = script([tool_call("require_memos", {})], "Noted.", move, lambda req: str(last_tool_results(req)))
    agent = ai.define_agent(name="teller", model=model, tools=tools, store=InMemorySessionStore())
    chat = agent.chat()
    assert (await chat.send("Memos from now on.")).text == "Noted."
    for _ in range(100):  # the notice travels beside the reply: give it a moment to be heard
        if tools[0]._catalog._checked is None:
            break
        await asyncio.sleep(0.05)
    res = await chat.send("Move $500 to savings.")
    assert "changed tool 'transfer' since" in res.text and "was not sent" in res.text
    assert [e["tool"] for e in ledger.entries()] == ["require_memos"]  # nothing else reached it
    await changing.aclose()


def _stop_bank_servers() -> int:
    """SIGTERM this process's stdio bank servers (as if they died while idle); how many."""
    import os
    import signal
    from pathlib import Path

    stopped = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (proc / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and b"tests.mcp.bank_server" in command:
            os.kill(int(proc.name), signal.SIGTERM)
            stopped += 1
    return stopped


async def test_an_approval_after_the_stdio_server_died_while_idle_reaches_the_server_started_again(
    ledger: Ledger,
) -> None:
    """Found by a probe: the listing before the call met the closed connection, so the approved
    call failed (McpUnavailable) and the approval was spent, nothing sent. The docs promise that
    the next call starts the server again."""
    import asyncio

    bank = stdio_bank(ledger)
    try:
        ai = Pausepoint()
        agent = gated_agent(ai, await ai.mcp_tools_async(bank, requires_approval={"transfer"}))
        chat = agent.chat()
        [pause] = (await chat.send("Move $500 to savings.")).interrupts
        assert _stop_bank_servers() == 1
        await asyncio.sleep(0.5)  # it is gone: nothing asks the server anything meanwhile
        res = await chat.resume(restart=[agent.approval(pause)])
        assert res.finish_reason == AgentFinishReason.STOP and "McpUnavailable" not in res.text
        assert ledger.entries("transfer") == [{"tool": "transfer", "amount": 500, "to_account": "savings"}]
    finally:
        await bank.aclose()
