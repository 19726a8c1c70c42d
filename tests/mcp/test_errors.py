"""What a server that breaks the protocol makes of a call: a short, typed error, at once, saying
whether the call may have taken effect — from real misbehaving servers (``broken_server``)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from pausepoint import AgentFinishReason, Pausepoint
from pausepoint.errors import McpError, McpUnavailable
from pausepoint.mcp import McpConnection
from pausepoint.testing import last_tool_results, tool_call

from .conftest import ROOT, HttpBank, Ledger, bank_env, script, stdio_bank

UNSURE = "it may or may not have taken effect"


def broken(ledger: Ledger, how: str, **options: Any) -> McpConnection:
    """The stdio server of ``broken_server``, misbehaving as ``how`` says; ``call_timeout`` is
    the default (300 s): a failure must not wait for it. ``options``: the server's environment
    (upper-case names: ``CODE="-32000"``) and the connection's (``call_timeout=0.5``)."""
    env = {key: value for key, value in options.items() if key.isupper()}
    given = {key: value for key, value in options.items() if not key.isupper()}
    return McpConnection.stdio(
        sys.executable,
        ["-m", "tests.mcp.broken_server"],
        cwd=ROOT,
        env=bank_env(ledger, BROKEN=how, **env),
        name="broken",
        **given,
    )


async def what_the_model_sees(connection: McpConnection, call: tuple[str, dict[str, object]]) -> object:
    """One call by an agent (no approval), and the result its model is handed."""
    ai = Pausepoint()
    seen: list[object] = []

    def look(request: object) -> str:
        seen.append(last_tool_results(request)[call[0]])  # type: ignore[arg-type]
        return "ok"

    agent = ai.define_agent(
        name="payer", model=script([tool_call(*call)], look), tools=await ai.mcp_tools_async(connection)
    )
    res = await asyncio.wait_for(agent.chat().send("Go."), 20)  # not call_timeout: at once
    assert res.finish_reason == AgentFinishReason.STOP  # the session goes on
    return seen[0]


async def test_a_malformed_call_result_is_a_short_typed_error_the_model_sees(ledger: Ledger) -> None:
    """``tools/call`` answered ``{"content": 42, "isError": "maybe"}``: not pydantic's
    "validation errors for union[...]", but what is wrong, and that the call may have run."""
    connection = broken(ledger, "call-garbage")
    seen = await what_the_model_sees(connection, ("pay", {"amount": 5}))
    await connection.aclose()
    assert seen == {
        "error": "McpError: MCP server 'broken' answered calling 'pay' with a reply that does not follow the MCP "
        "protocol (content: Input should be a valid list; isError: Input should be a valid boolean, unable to "
        f"interpret input; resultType: Field required); {UNSURE}"
    }
    assert ledger.entries() == [{"tool": "pay", "amount": 5}]


async def test_a_malformed_listing_is_an_mcp_error_chained_to_the_sdks(ledger: Ledger) -> None:
    connection = broken(ledger, "list-garbage")
    with pytest.raises(McpError) as raised:
        await Pausepoint().mcp_tools_async(connection)
    await connection.aclose()
    assert raised.value.message == (
        "MCP server 'broken' answered listing tools with a reply that does not follow the MCP protocol "
        "(tools: Input should be a valid list)"
    )
    assert isinstance(raised.value.__cause__, ValidationError)


async def test_a_line_that_is_not_json_fails_the_call_at_once_saying_it_may_have_taken_effect(
    ledger: Ledger,
) -> None:
    """A stdio server answers a call with a line that is not JSON-RPC (and nothing else): the
    call fails now, not after ``call_timeout``, with the warning a mid-call death gets."""
    connection = broken(ledger, "call-not-json")
    assert connection.call_timeout == 300
    seen = await what_the_model_sees(connection, ("pay", {"amount": 5}))
    await connection.aclose()
    assert seen == {
        "error": "McpError: MCP server 'broken' answered calling 'pay' with the line 'Traceback (most recent call "
        f"last): the server broke', not an MCP message; {UNSURE}"
    }


async def test_a_question_no_answer_can_fit_fails_the_call_rather_than_pausing_it(ledger: Ledger) -> None:
    """Found by a probe: the pause was made, and every answer then failed with DefinitionError
    (a 422 ``definition_error`` over REST): only a denial could close it."""
    seen = await what_the_model_sees(broken(ledger, "ask-bad-ref"), ("pay", {"amount": 5}))
    assert isinstance(seen, dict) and "it asked a question no answer can fit" in seen["error"]
    assert "'#/nowhere'" in seen["error"]


async def test_a_line_that_is_not_json_during_the_handshake_fails_it_at_once(ledger: Ledger) -> None:
    """As a call's would (found by a probe: a timeout after the whole ``connect_timeout``, said as
    "did not start or answer", and a future whose exception nobody retrieved)."""
    connection = broken(ledger, "hello-not-json", connect_timeout=300)  # a timeout would say "did not start"
    with pytest.raises(McpError, match=r"answered the handshake with the line 'starting the bank\.\.\. done', not an"):
        await connection.list_tools()
    await connection.aclose()


@pytest.mark.parametrize(
    ("how", "kind", "answer"),
    [
        ("502", McpUnavailable, "HTTP 502 (text/html: '<html><body><h1>502 Bad Gateway</h1></body></html>')"),
        ("html", McpError, "HTTP 200 (text/html: '<html><body>Welcome to our site!</body></html>')"),
        ("sse", McpError, "an event stream whose message cannot be read"),
    ],
)
async def test_an_http_answer_that_cannot_be_read_after_the_call_ran_says_it_may_have_taken_effect(
    ledger: Ledger, http_bank: Callable[..., HttpBank], how: str, kind: type[McpError], answer: str
) -> None:
    """The bank runs the call; a gateway in front of it answers with a page instead of the bank's
    answer: the call may have taken effect (it did), and the error says so."""
    connection = http_bank(server="tests.mcp.broken_server", BROKEN=how).connection()
    seen = await what_the_model_sees(connection, ("balance", {"account": "savings"}))
    await connection.aclose()
    assert ledger.entries() == [{"tool": "balance", "account": "savings"}]
    assert seen == {
        "error": f"{kind.__name__}: MCP server 'bank' answered calling 'balance' with {answer}, not an MCP answer; "
        f"{UNSURE}"
    }


async def test_an_http_refusal_says_the_call_was_refused(ledger: Ledger, http_bank: Callable[..., HttpBank]) -> None:
    """A 4xx is HTTP's word that the request was not carried out: no "may have taken effect"."""
    connection = http_bank(server="tests.mcp.broken_server", BROKEN="403").connection()
    seen = await what_the_model_sees(connection, ("balance", {"account": "savings"}))
    await connection.aclose()
    assert ledger.entries() == []
    assert seen == {
        "error": "McpError: MCP server 'bank' refused the request while calling 'balance': HTTP 403 (text/html: "
        "'<html><body><h1>403 Forbidden</h1></body></html>')"
    }


async def test_an_argument_off_its_strings_format_is_invalid_input_and_never_sent(ledger: Ledger) -> None:
    """A string's ``format`` is checked as the server checks it (found by a probe: a day of
    "next tuesday" for a ``date`` passed the check, was approved, and only then refused)."""
    dated = stdio_bank(ledger, BANK_VERSION="dated")
    wrong = {"amount": 5, "to_account": "savings", "on": "next tuesday"}
    seen = await what_the_model_sees(dated, ("transfer", wrong))
    assert seen == {
        "error": "invalid input for tool 'transfer'",
        "details": [{"type": "json_schema", "loc": ["on"], "msg": "'next tuesday' is not a 'date'"}],
    }
    assert ledger.entries() == []
    right = {"amount": 5, "to_account": "savings", "on": "2026-12-08"}
    assert await what_the_model_sees(dated, ("transfer", right)) == "Transferred $5 to savings on 2026-12-08."
    assert ledger.entries() == [{"tool": "transfer", "amount": 5, "to_account": "savings", "on": "2026-12-08"}]
    await dated.aclose()
