"""Real MCP servers for the tests: the bank of ``bank_server.py``, over stdio and streamable HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from pausepoint import ModelRequest
from pausepoint.mcp import McpConnection
from pausepoint.testing import ScriptedModel

ROOT = Path(__file__).resolve().parents[2]

#: an MCP client's HTTP timeouts (the SDK's own defaults; httpx's 5 s is too short on a busy machine)
SLOW = httpx2.Timeout(30, read=300)


class Ledger:
    """What reached the bank: one entry per tool call its tools ran."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def entries(self, tool: str | None = None) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        found = [json.loads(line) for line in self.path.read_text().splitlines()]
        return [e for e in found if tool is None or e["tool"] == tool]


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path / "ledger.jsonl")


def bank_env(ledger: Ledger, **extra: str) -> dict[str, str]:
    return {"BANK_LEDGER": str(ledger.path), "PYTHONPATH": str(ROOT), **extra}


def stdio_bank(ledger: Ledger, **extra: str) -> McpConnection:
    """The bank as a stdio server (a new process each time the connection opens)."""
    return McpConnection.stdio(
        sys.executable, ["-m", "tests.mcp.bank_server"], cwd=ROOT, env=bank_env(ledger, **extra), call_timeout=30
    )


class HttpBank:
    """The bank as a streamable-HTTP server in a process of its own, on a free loopback port
    (``port``: that one, e.g. a stopped server's, to deploy it again at the same URL).
    ``server``: another module serving it (``tests.mcp.broken_server``, the bank behind a
    broken gateway)."""

    def __init__(self, ledger: Ledger, *, port: int = 0, server: str = "tests.mcp.bank_server", **extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", server, "--http", str(port)],
            cwd=ROOT,
            env={**os.environ, **bank_env(ledger, **extra)},
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("http://"):
            self.stop()
            raise RuntimeError(f"the MCP server did not start: {line!r}")
        self.url = line
        self.port = int(line.rsplit(":", 1)[1].split("/")[0])

    def connection(self, **options: Any) -> McpConnection:
        return McpConnection.http(self.url, call_timeout=30, **options)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def http_bank(ledger: Ledger) -> Iterator[Callable[..., HttpBank]]:
    started: list[HttpBank] = []

    def start(**extra: Any) -> HttpBank:
        bank = HttpBank(ledger, **extra)
        started.append(bank)
        return bank

    yield start
    for bank in started:
        bank.stop()


@pytest.fixture(params=["stdio", "http"])
async def bank(
    request: pytest.FixtureRequest, ledger: Ledger, http_bank: Callable[..., HttpBank]
) -> AsyncIterator[McpConnection]:
    """The bank over each transport (closed after the test)."""
    connection = stdio_bank(ledger) if request.param == "stdio" else http_bank().connection()
    yield connection
    await connection.aclose()


def script(*steps: Any) -> ScriptedModel:
    """A scripted model whose steps may also be functions of the request (called when reached)."""
    calls = iter(steps)

    def next_step(request: ModelRequest) -> Any:
        step = next(calls)
        return step(request) if callable(step) else step

    return ScriptedModel(next_step)
