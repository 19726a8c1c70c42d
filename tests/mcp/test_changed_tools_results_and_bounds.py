"""Found by a probe: a tool changed and changed back, a listen subscription lost with its
server, a result off its output schema, and grant bounds of the wrong JSON type."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pausepoint import AgentFinishReason, ApprovalPolicy, Grant, Pausepoint
from pausepoint.errors import InvalidGrant, ToolDefinitionChanged
from pausepoint.mcp import McpConnection
from pausepoint.stores import InMemorySessionStore
from pausepoint.testing import ScriptedModel, last_tool_results, tool_call

from .conftest import HttpBank, Ledger, script, stdio_bank
from .test_errors import broken, what_the_model_sees

MOVE = [tool_call("transfer", {"amount": 500, "to_account": "savings"})]


async def test_a_tool_changed_and_changed_back_fails_calls_at_once_then_pauses_and_runs_again(
    ledger: Ledger, http_bank: Callable[..., HttpBank]
) -> None:
    """While the server offers a changed ``transfer``, a call fails at once, unsent, asking
    nobody (it paused, was approved, and only then said "not sent"); once the server offers the
    agent's definition again, a new pause records that definition and its approval is sent
    (it was refused, ToolDefinitionChanged, for good)."""
    first = http_bank()
    connection = first.connection()
    ai = Pausepoint()
    tools = await ai.mcp_tools_async(connection, requires_approval=True)
    model = script(MOVE, "Denied.", MOVE, lambda req: str(last_tool_results(req)), MOVE, "Moved.")
    agent = ai.define_agent(name="teller", model=model, tools=tools, store=InMemorySessionStore())
    chat = agent.chat()
    [pause] = (await chat.send("Move $500 to savings.")).interrupts
    first.stop()
    changed = http_bank(port=first.port, BANK_VERSION="currency")  # the same URL, a new schema
    await chat.resume(respond=[pause.deny("not now")])  # a denial is taken: it sends nothing
    res = await chat.send("Move $500 to savings.")
    assert res.interrupts == [] and res.finish_reason == AgentFinishReason.STOP
    assert "changed tool 'transfer' since" in res.text and "was not sent" in res.text
    changed.stop()
    http_bank(port=first.port)  # the agent's definition again
    [again] = (await chat.send("Move $500 to savings.")).interrupts
    res = await chat.resume(restart=[agent.approval(again)])
    assert res.text == "Moved."
    assert ledger.entries() == [{"tool": "transfer", "amount": 500, "to_account": "savings"}]
    await connection.aclose()


async def test_a_call_a_grant_approves_reaches_the_definition_the_grant_was_given_on(ledger: Ledger) -> None:
    """Found by a probe: a grant is an approval given on the tool as it was; a later call it
    approved was sent to a tool the server had changed, quietly, since (a paused call's approval
    compares the listing again; a grant's did not)."""
    ai = Pausepoint()
    changing = stdio_bank(ledger, BANK_VERSION="changing")
    tools = await ai.mcp_tools_async(
        changing, include=["transfer", "require_memos_quietly"], requires_approval={"transfer"}
    )
    quietly = [tool_call("require_memos_quietly", {})]
    model = script(MOVE, "Moved.", quietly, "Noted.", MOVE, lambda req: str(last_tool_results(req)))
    policy = ApprovalPolicy(grantable=["transfer"])
    agent = ai.define_agent(name="teller", model=model, tools=tools, store=InMemorySessionStore(), approval=policy)
    chat = agent.chat()
    [pause] = (await chat.send("Move $500 to savings.")).interrupts
    assert (await chat.resume(restart=[agent.approval(pause, grant=Grant())])).text == "Moved."
    assert (await chat.send("Memos from now on.")).text == "Noted."
    res = await chat.send("Move $500 to savings.")  # within the grant: approved by it
    assert "changed tool 'transfer' since" in res.text and "was not sent" in res.text
    assert [e["tool"] for e in ledger.entries()] == ["transfer", "require_memos_quietly"]  # not sent again
    await changing.aclose()


async def test_a_notice_after_the_http_server_restarted_is_heard_and_the_changed_tool_not_sent(
    ledger: Ledger, http_bank: Callable[..., HttpBank]
) -> None:
    """The HTTP server restarts behind a live connection (its requests still succeed): the
    connection's ``subscriptions/listen`` is opened again, so its later change notice is heard
    (it was lost with the first server, and the changed tool's call was sent)."""
    first = http_bank(BANK_VERSION="changing")
    connection = first.connection()
    ai = Pausepoint()
    tools = await ai.mcp_tools_async(connection, include=["transfer", "require_memos"])
    done = lambda req: str(last_tool_results(req))  # noqa: E731
    model = script(MOVE, "Moved.", [tool_call("require_memos", {})], "Noted.", MOVE, done)
    agent = ai.define_agent(name="teller", model=model, tools=tools, store=InMemorySessionStore())
    chat = agent.chat()
    assert (await chat.send("Move $500 to savings.")).text == "Moved."
    first.stop()
    http_bank(port=first.port, BANK_VERSION="changing")
    assert (await chat.send("Memos from now on.")).text == "Noted."
    for _ in range(200):  # the notice (or the subscription opened again) marks the listing stale
        if tools[0]._catalog._checked is None:
            break
        await asyncio.sleep(0.05)
    res = await chat.send("Move $500 to savings.")
    assert "changed tool 'transfer' since" in res.text and "was not sent" in res.text
    assert [e["tool"] for e in ledger.entries()] == ["transfer", "require_memos"]
    await connection.aclose()


async def test_a_result_off_the_output_schema_says_the_call_ran_on_one_line(ledger: Ledger) -> None:
    """The server answered: the call ran, its result cannot be used — not "may or may not have
    taken effect", and not the validator's multi-line report."""
    seen = await what_the_model_sees(broken(ledger, "call-off-schema"), ("pay", {"amount": 5}))
    assert isinstance(seen, dict)
    error = seen["error"]
    assert "the call ran (what it did took effect), but returned a result that cannot be used" in error
    assert "'not a number' is not of type 'integer'" in error
    assert "may or may not" not in error and "\n" not in error and len(error) < 500
    assert [e["tool"] for e in ledger.entries()] == ["pay"]


SCHEMAS = {
    "type": "object",
    "properties": {
        "amount": {"type": "number"},
        "count": {"type": "integer"},
        "flag": {"type": "boolean"},
        "ref": {"$ref": "#/$defs/Num"},
    },
    "$defs": {"Num": {"type": "number"}},
}

SERVER = """
import json, sys, anyio
from mcp import types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[types.Tool(name="pay", input_schema=json.loads(sys.argv[1]))])

async def call_tool(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text", text="paid")])

async def main():
    async with stdio_server() as (r, w):
        server = Server("payer", on_list_tools=list_tools, on_call_tool=call_tool)
        await server.run(r, w, server.create_initialization_options())

anyio.run(main)
"""


@pytest.fixture
async def payer(tmp_path: Path) -> McpConnection:
    path = tmp_path / "payer.py"
    path.write_text(SERVER)
    import sys

    connection = McpConnection.stdio(sys.executable, [str(path), json.dumps(SCHEMAS)], call_timeout=30)
    yield connection  # type: ignore[misc]
    await connection.aclose()


async def grant_then(payer: McpConnection, bounds: dict[str, object], later: dict[str, object]) -> bool:
    """Approve a first call with a grant of ``bounds``; whether a later call runs by it."""
    ai = Pausepoint()
    tools = await ai.mcp_tools_async(payer, requires_approval=True)
    model = ScriptedModel([[tool_call("pay", {"amount": 1})], "one", [tool_call("pay", later)], "two"])
    agent = ai.define_agent(name="payer", model=model, tools=tools, approval=ApprovalPolicy(grantable=["pay"]))
    chat = agent.chat()
    [pause] = (await chat.send("Pay.")).interrupts
    await chat.resume(restart=[pause.restart(grant=Grant(bounds=bounds))])
    return (await chat.send("Again.")).interrupts == []


@pytest.mark.parametrize(
    ("bounds", "why"),
    [
        ({"amount": {"max": "10"}}, "JSON number, and '10' is not one"),
        ({"amount": {"max": True}}, "JSON number, and True is not one"),
        ({"count": {"min": 1.5}}, "JSON integer, and 1.5 is not one"),
        ({"flag": {"equals": 1}}, "JSON boolean, and 1 is not one"),
        ({"flag": {"max": 1}}, "JSON boolean, and 1 is not one"),
        ({"flag": {"max": True}}, "a boolean has no order"),
    ],
)
async def test_a_grant_bound_not_of_the_propertys_json_type_is_refused(
    payer: McpConnection, bounds: dict[str, object], why: str
) -> None:
    with pytest.raises(InvalidGrant, match=why):
        await grant_then(payer, bounds, {"amount": 1})


async def test_grant_bounds_read_json_types_and_local_refs(payer: McpConnection) -> None:
    """A boolean bound matches that boolean; a property whose type is behind a ``$ref`` is read
    as that type (it was refused: "the field has no type to compare by")."""
    assert await grant_then(payer, {"flag": {"equals": True}}, {"flag": True})
    assert not await grant_then(payer, {"flag": {"equals": True}}, {"flag": False})
    assert await grant_then(payer, {"ref": {"max": 10}}, {"ref": 9.5})
    assert not await grant_then(payer, {"ref": {"max": 10}}, {"ref": 11})


async def test_an_answer_to_a_changed_tools_pause_is_refused_even_where_changed_tools_are_allowed(
    ledger: Ledger,
) -> None:
    """Found by a probe: the refusal advised ``allow_changed_tools=True``, which took the answer
    and closed the pause, while the changed MCP tool's call was not sent: the answer reached
    nobody. It is refused there too, saying so; the pause stays open, and a denial is taken."""
    ai = Pausepoint()
    changing = stdio_bank(ledger, BANK_VERSION="changing")
    tools = await ai.mcp_tools_async(changing, include=["transfer", "require_memos"], requires_approval={"transfer"})
    model = script(MOVE, [tool_call("require_memos", {})], "Noted.", "Denied.")
    agent = ai.define_agent(
        name="teller", model=model, tools=tools, store=InMemorySessionStore(), allow_changed_tools=True
    )
    chat = agent.chat()
    [pause] = (await chat.send("Move $500 to savings.")).interrupts
    other = agent.chat()
    assert (await other.send("Memos from now on.")).text == "Noted."  # the server changes transfer, and says so
    for _ in range(200):
        if tools[0]._catalog._checked is None:
            break
        await asyncio.sleep(0.05)
    with pytest.raises(ToolDefinitionChanged, match="its calls are not sent while it differs"):
        await chat.resume(restart=[agent.approval(pause)])
    assert [p.ref for p in await chat.interrupts()] == [pause.ref]
    assert (await chat.resume(respond=[pause.deny("changed")])).finish_reason == AgentFinishReason.STOP
    assert [e["tool"] for e in ledger.entries()] == ["require_memos"]
    await changing.aclose()
