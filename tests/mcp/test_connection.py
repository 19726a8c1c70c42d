"""The connection to a server: what its own JSON-RPC errors, its failing to start, its roots
requests and its silence come to — from real servers (``broken_server``, shell commands)."""

from __future__ import annotations

import asyncio
import logging
import math
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from mcp import MCPError

from pausepoint import Pausepoint
from pausepoint.errors import DefinitionError, McpError, McpTimeout, McpUnavailable
from pausepoint.mcp import McpConnection

from .conftest import Ledger
from .test_errors import UNSURE, broken, what_the_model_sees


@pytest.mark.parametrize("code", ["-32000", "-32001"])
async def test_a_servers_error_with_a_code_the_sdk_also_uses_is_its_error(ledger: Ledger, code: str) -> None:
    """-32000 and -32001 are the SDK's own codes for a closed connection and a timeout, and codes
    a server may send: a server's error is its error (``McpError``, its message), the connection
    stays open, and the next call reaches the same server process (not one started again)."""
    connection = broken(ledger, "call-rpc-error", CODE=code)
    with pytest.raises(McpError) as failed:
        await connection.call_tool("pay", {"amount": 1})
    assert type(failed.value) is McpError
    assert failed.value.message == "MCP server 'broken' answered with an error while calling 'pay': bank closed"
    assert failed.value.details == {"server": "broken", "mcp_code": int(code)}
    seen = await what_the_model_sees(connection, ("pay", {"amount": 2}))
    await connection.aclose()
    assert seen == "paid"
    first, second = ledger.entries()
    assert (first["amount"], second["amount"]) == (1, 2) and first["pid"] == second["pid"]


async def test_a_server_that_dies_mid_call_is_still_unavailable(ledger: Ledger, tmp_path: Path) -> None:
    """The SDK's own "connection closed" (code -32000 too) is still told apart: the server exited."""
    script = tmp_path / "dies.py"
    script.write_text(_DIES_ON_CALL)
    connection = McpConnection.stdio(sys.executable, [str(script)], name="dies")
    await Pausepoint().mcp_tools_async(connection)
    with pytest.raises(McpUnavailable) as failed:
        await connection.call_tool("pay", {})
    await connection.aclose()
    assert failed.value.message == f"MCP server 'dies': the connection closed while calling 'pay'; {UNSURE}"


@pytest.mark.parametrize("how", ["exits", "missing script", "syntax error"])
async def test_a_stdio_server_that_exits_at_start_is_unavailable(tmp_path: Path, how: str) -> None:
    """A server that ends before the handshake could not be started: ``McpUnavailable``, not a
    refusal (a refusal is a JSON-RPC error the server sent)."""
    broken_script = tmp_path / "broken.py"
    broken_script.write_text("def (:\n")
    command, args = {
        "exits": ("/bin/sh", ["-c", "exit 1"]),
        "missing script": (sys.executable, [str(tmp_path / "missing.py")]),
        "syntax error": (sys.executable, [str(broken_script)]),
    }[how]
    connection = McpConnection.stdio(command, args, name="broken", errlog=(tmp_path / "stderr").open("w"))
    with pytest.raises(McpUnavailable) as failed:
        await Pausepoint().mcp_tools_async(connection)
    await connection.aclose()
    assert failed.value.message == (
        f"MCP server 'broken' could not be started or reached ({command} {' '.join(args)}): it closed the "
        "connection before answering the handshake (it exited, or closed its output)"
    )


async def test_a_roots_request_is_answered_with_no_roots(ledger: Ledger) -> None:
    connection = broken(ledger, "call-asks-roots")
    seen = await what_the_model_sees(connection, ("pay", {"amount": 5}))
    await connection.aclose()
    assert seen == '{"roots": []}'  # what the client answered, as the server saw it


async def test_a_call_that_is_not_answered_times_out_saying_it_may_have_taken_effect(ledger: Ledger) -> None:
    """``call_timeout`` is kept by pausepoint itself (the SDK is given none)."""
    connection = broken(ledger, "call-hang", call_timeout=0.5)
    with pytest.raises(McpTimeout) as failed:
        await asyncio.wait_for(connection.call_tool("pay", {"amount": 5}), 30)  # a bound for the test
    await connection.aclose()
    assert failed.value.message == f"MCP server 'broken' did not answer in 0.5s while calling 'pay'; {UNSURE}"
    assert failed.value.details == {"server": "broken", "outcome": "unknown"}
    assert ledger.entries() == [{"tool": "pay", "amount": 5}]


#: what ``_Gateway`` answers a POST to each path with
_GATEWAY_ANSWERS = {
    "502": (502, "text/plain", b"bad gateway"),
    "503": (503, "text/plain", b"unavailable"),
    "504": (504, "text/plain", b"gateway timeout"),
    "403": (403, "text/plain", b"forbidden"),
    "html": (200, "text/html", b"<html>log in</html>"),
    "json": (200, "application/json", b'{"hello": 1}'),
}


class _Gateway(BaseHTTPRequestHandler):
    """Answers every POST as its path says (``/502``: a gateway's 502, ...): never MCP."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        status, content_type, body = _GATEWAY_ANSWERS[self.path.strip("/")]
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def gateway() -> Iterator[str]:
    """A loopback HTTP server in front of no MCP server; its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Gateway)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.mark.parametrize(
    ("how", "kind", "answer"),
    [
        ("502", McpUnavailable, "HTTP 502 (text/plain: 'bad gateway')"),
        ("503", McpUnavailable, "HTTP 503 (text/plain: 'unavailable')"),
        ("504", McpUnavailable, "HTTP 504 (text/plain: 'gateway timeout')"),
        ("html", McpError, "HTTP 200 (text/html: '<html>log in</html>')"),
        ("json", McpError, """HTTP 200 (application/json: '{"hello": 1}')"""),
        ("403", McpError, "HTTP 403 (text/plain: 'forbidden')"),
    ],
)
async def test_an_http_answer_that_is_not_mcp_while_connecting_reads_as_a_calls_does(
    gateway: str, how: str, kind: type[McpError], answer: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by a probe: a gateway's 502, 503 or 504 while connecting was an ``McpError``
    "refused the connection: Server returned an error response" (not ``McpUnavailable``, and
    no status), and a JSON body that is no JSON-RPC message was pydantic's 34-line report,
    logged by the SDK with its traceback too. Now as docs/mcp.md's table says of a call."""
    connection = McpConnection.http(f"{gateway}/{how}", name="bank", connect_timeout=10, call_timeout=10)
    with caplog.at_level(logging.ERROR), pytest.raises(McpError) as failed:
        await Pausepoint().mcp_tools_async(connection)
    await connection.aclose()
    assert type(failed.value) is kind
    said = "refused the connection: {}" if how == "403" else "answered the handshake with {}, not an MCP answer"
    assert failed.value.message == "MCP server 'bank' " + said.format(answer)
    assert failed.value.details == {"server": "bank", "http_status": int(how) if how.isdigit() else 200}
    assert isinstance(failed.value.__cause__, MCPError)  # chained to the SDK's stand-in, as a call's is
    assert not [r for r in caplog.records if r.name.startswith("mcp.") and r.exc_info]  # no SDK traceback


@pytest.mark.parametrize("which", ["connect_timeout", "call_timeout"])
@pytest.mark.parametrize("seconds", [math.nan, math.inf, -math.inf, 0, -1, "5", True])
def test_a_timeout_that_is_not_a_positive_finite_number_is_refused_where_it_is_defined(
    which: str, seconds: object
) -> None:
    """Found by a probe: NaN was taken, and every use then failed with "did not answer in nans"."""
    for define in (
        lambda: McpConnection.http("http://127.0.0.1:9/mcp", name="bank", **{which: seconds}),  # type: ignore[arg-type]
        lambda: McpConnection.stdio(sys.executable, name="bank", **{which: seconds}),  # type: ignore[arg-type]
    ):
        with pytest.raises(DefinitionError, match=rf"MCP server 'bank': {which} must be a positive, finite number"):
            define()


def test_a_call_timeout_of_none_is_no_bound() -> None:
    connection = McpConnection.http("http://127.0.0.1:9/mcp", name="bank", connect_timeout=1, call_timeout=None)
    assert (connection.connect_timeout, connection.call_timeout) == (1, None)


#: a stdio server (raw JSON-RPC) that offers ``pay`` and exits when it is called
_DIES_ON_CALL = """
import json, os, sys
for line in sys.stdin:
    message = json.loads(line)
    method, ident = message.get("method"), message.get("id")
    if ident is None or method is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "dies", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "pay", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        os._exit(3)
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "no"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}), flush=True)
"""
