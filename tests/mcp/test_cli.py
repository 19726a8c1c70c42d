"""``pausepoint serve --mcp`` / ``--mcp-stdio``, and the MCP example."""

from __future__ import annotations

import subprocess
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

import pausepoint.mcp
from tests.cli.conftest import ROOT, cli_env
from tests.cli.test_serve import serving

from .conftest import SLOW
from .test_serve import AGENT, call


def test_the_mcp_surface_is_pinned() -> None:
    assert sorted(pausepoint.mcp.__all__) == ["ApprovalSpec", "McpConnection", "McpTool"]


async def test_serve_with_mcp_mounts_the_endpoint_behind_the_same_tokens() -> None:
    with serving("examples.banking_mcp:ai", "--token", "alice=s3cret", "--mcp") as (base, printed):
        assert f"mcp      {base}/mcp" in printed
        http = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"}, timeout=SLOW)
        async with Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
            reply = await call(client, "send_message", agent=AGENT, text="Transfer $500 to savings.")
            ref = reply["pauses"][0]["ref"]
            done = await call(
                client, "answer_pause", agent=AGENT, session_id=reply["session_id"], ref=ref, decision="approve"
            )
            assert done["text"] == "Transferred $500.00 to savings."


def test_bad_mcp_options_are_refused_with_a_message() -> None:
    for extra, expected in (
        (["--mcp-stdio", "alice", "--token", "a=b"], "--mcp-stdio speaks over stdin/stdout"),
        (["--mcp-stdio", ""], "wants the principal"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "pausepoint", "serve", "examples.banking_mcp:ai", *extra],
            cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode != 0 and expected in done.stderr, done.stderr
        assert done.stdout == ""  # stdout is the protocol's: nothing else is ever written there


async def test_the_example_runs() -> None:
    from examples import banking_mcp

    await banking_mcp.main()


BATCH_APP = """
import sys
from pausepoint import Pausepoint
from pausepoint.mcp import McpConnection
from pausepoint.testing import ScriptedModel, last_tool_results, tool_call

def script(request):
    if last_tool_results(request):
        return "results: " + repr(sorted(last_tool_results(request)))
    return [tool_call("transfer_money", {"amount": "500", "to_account": "savings"}),
            tool_call("open_account", {"kind": "savings"})]

ai = Pausepoint()
bank = McpConnection.stdio(sys.executable, ["-m", "examples.bank_mcp_server"], cwd=ROOT, name="bank")
agent = ai.define_agent(name="bankingAgent", model=ScriptedModel(script),
                        tools=ai.mcp_tools(bank, requires_approval={"transfer_money"}))
"""


def test_chat_asks_an_mcp_servers_question_by_its_schema_and_offers_no_yes(tmp_path) -> None:
    """Found by a probe: the card of a server's question offered [a]pprove, which such a pause
    never takes; [r]espond showed "any JSON value", not the question's schema; and an answer the
    schema refused went to the resume, which refused the batch (the approval given beside it
    dropped). Now: no yes, the question's shape, and a refused answer asked for again on its own."""
    (tmp_path / "batch_app.py").write_text(f"ROOT = {str(ROOT)!r}\n" + BATCH_APP)
    done = subprocess.run(
        [sys.executable, "-m", "pausepoint", "chat", "batch_app:agent", "--db", str(tmp_path / "s.db"),
         "--principal", "alice"],
        input='go\na\nr\n{"holder": 5}\n{"holder": "Ann"}\n',
        cwd=ROOT, env={**cli_env(), "PYTHONPATH": f"{tmp_path}:{ROOT}"}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    out = done.stdout
    question = out[out.index("paused: open_account") :]
    assert "└─ [d]eny  [r]espond with JSON  [s]kip" in question and "[a]pprove" not in question.split("choice>")[0]
    assert 'expected: {"holder": string}' in question
    assert "refused: holder: Input should be a string, not a number; try again" in question
    assert out.count("paused: transfer_money") == 1  # its approval kept
    assert '✓ transfer_money: "Transferred $500.00 to savings."' in out
    assert '✓ open_account: "Opened a savings account for Ann."' in out
