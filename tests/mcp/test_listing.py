"""What listing a server's tools refuses, before anything is defined: schemas that cannot be
used, a listing that would never end, a tool listed twice — from real misbehaving servers
(``broken_server``)."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
from collections.abc import Iterator

import pytest

from pausepoint import AgentFinishReason, Pausepoint
from pausepoint.errors import DefinitionError, McpError, McpTimeout
from pausepoint.testing import last_tool_results, tool_call

from .conftest import Ledger, script
from .test_errors import broken


class SchemaHost:
    """A schema served over HTTP on loopback, counting the requests that reached it."""

    def __init__(self) -> None:
        hits: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                body = json.dumps({"type": "integer"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/schema+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.hits = hits
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/amount.json"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def schema_host() -> Iterator[SchemaHost]:
    host = SchemaHost()
    yield host
    host.stop()


@pytest.mark.parametrize("ref", ["#/$defs/Missing", "file:///etc/passwd", "remote"])
async def test_a_schema_whose_ref_cannot_be_resolved_is_refused_when_listed_and_never_fetched(
    ledger: Ledger, schema_host: SchemaHost, ref: str
) -> None:
    """A ``$ref`` that leads nowhere in the schema: refused when listed, naming the server, the
    tool and the reference — a remote one is never fetched (the host serving it sees nothing)."""
    ref = schema_host.url if ref == "remote" else ref
    ai = Pausepoint()
    connection = broken(ledger, "list-ref", REF=ref)
    with pytest.raises(DefinitionError) as refused:
        await ai.mcp_tools_async(connection)
    await connection.aclose()
    assert refused.value.message == (
        f"MCP server 'broken', tool 'pay', input schema: the $ref {ref!r} cannot be resolved: a reference must "
        "lead within the schema (remote references are never fetched)"
    )
    assert schema_host.hits == []


async def test_a_schema_that_cannot_be_evaluated_fails_the_call_as_invalid_input(ledger: Ledger) -> None:
    """References that only lead to each other resolve, so the listing passes; evaluating them
    cannot end. The call is an invalid-input result saying so: nothing is sent, the turn ends,
    and the model's call has its answer in the history (no call left half-written)."""
    ai = Pausepoint()
    connection = broken(ledger, "list-ref-cycle")
    seen: list[object] = []

    def look(request: object) -> str:
        seen.append(last_tool_results(request)["pay"])  # type: ignore[arg-type]
        return "ok"

    agent = ai.define_agent(
        name="payer", model=script([tool_call("pay", {"amount": 5})], look), tools=await ai.mcp_tools_async(connection)
    )
    chat = agent.chat()
    res = await asyncio.wait_for(chat.send("Go."), 60)
    await connection.aclose()
    assert res.finish_reason == AgentFinishReason.STOP
    (said,) = seen
    assert isinstance(said, dict) and said["error"] == "invalid input for tool 'pay'"
    (detail,) = said["details"]
    assert detail["type"] == "json_schema"
    assert detail["msg"].startswith("the schema cannot be evaluated (RecursionError: maximum recursion depth")
    assert ledger.entries() == []
    answered = [p.kind for m in await chat.history() for p in m.parts if p.kind.startswith("tool_")]
    assert answered == ["tool_request", "tool_response"]


async def test_a_listing_that_gives_the_same_cursor_again_is_refused(ledger: Ledger) -> None:
    with pytest.raises(McpError) as refused:
        await asyncio.wait_for(Pausepoint().mcp_tools_async(connection := broken(ledger, "list-same-cursor")), 30)
    await connection.aclose()
    assert type(refused.value) is McpError
    assert refused.value.message == (
        "MCP server 'broken' listed its tools with a cursor it had given already ('same'): its listing would never end"
    )


async def test_a_listing_with_no_last_page_is_refused(ledger: Ledger) -> None:
    with pytest.raises(McpError) as refused:
        await asyncio.wait_for(Pausepoint().mcp_tools_async(connection := broken(ledger, "list-endless")), 60)
    await connection.aclose()
    assert (
        refused.value.message == "MCP server 'broken' listed its tools in more than 1000 pages: its listing is refused"
    )


async def test_a_listing_that_is_not_answered_times_out(ledger: Ledger) -> None:
    """``call_timeout`` bounds every request, the listing's too."""
    connection = broken(ledger, "list-hang", call_timeout=0.5)
    with pytest.raises(McpTimeout) as refused:
        await asyncio.wait_for(Pausepoint().mcp_tools_async(connection), 30)  # a bound for the test, not the one tested
    await connection.aclose()
    assert refused.value.message == "MCP server 'broken' did not answer in 0.5s while listing tools"


async def test_a_tool_listed_twice_is_refused_and_nothing_is_defined(ledger: Ledger) -> None:
    """Which of two definitions is meant cannot be known: the listing is refused whole, saying
    so, and the app is left as it was — the name stays free for another tool."""
    ai = Pausepoint()
    connection = broken(ledger, "list-twice")
    with pytest.raises(DefinitionError) as refused:
        await ai.mcp_tools_async(connection)
    await connection.aclose()
    assert refused.value.message == (
        "MCP server 'broken' listed 'pay' twice: a server's tool names must be unique, so which definition is "
        "meant cannot be known; nothing was defined"
    )

    @ai.tool(name="pay")  # nothing was defined: the name is free
    def pay(amount: int) -> str:
        """Pay, locally."""
        return "paid"

    assert pay.name == "pay"
