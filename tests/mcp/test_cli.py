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
