"""A keyed retry by ``pausepoint.client`` that reaches another server process while the first
request's turn still runs there: that process answers 409 ``resume_in_progress``, and the
client asks again until the turn ends (found by a probe: it gave up with ``ResumeInProgress``
once its connection retries, under a second, were spent)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from pausepoint import AgentFinishReason, Pausepoint
from pausepoint.client import Client
from pausepoint.errors import ResumeInProgress
from pausepoint.server import BearerTokens, create_app
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, last_tool_results, tool_call
from tests.server.harness import TOKENS, serve_in_thread

ALICE = {"Authorization": "Bearer alice-token"}
PATH = "/v1/agents/bank/sessions/s1/messages"


def process(db: Path, ran: list[str]) -> Starlette:
    """One server process of two behind the same address, on one SQLite file."""
    ai = Pausepoint()

    @ai.tool()
    async def transfer(amount: int) -> str:
        """Moves money, slowly."""
        ran.append(f"transfer:{amount}")
        await asyncio.sleep(1.5)
        return "moved"

    def script(request):
        return "Moved 5." if last_tool_results(request) else [tool_call("transfer", {"amount": 5})]

    ai.define_agent(name="bank", model=ScriptedModel(script), tools=[transfer], store=SqliteSessionStore(db))
    return create_app(ai, auth=BearerTokens(TOKENS))


async def started(ran: list[str]) -> None:
    for _ in range(1000):  # a guard against a hang
        if ran:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the first request's tool never started")


async def test_a_keyed_send_retried_on_another_process_waits_for_the_first_ones_turn(tmp_path):
    ran: list[str] = []
    db = tmp_path / "s.db"
    with serve_in_thread(lambda: process(db, ran)) as first, serve_in_thread(lambda: process(db, ran)) as second:
        headers = {**ALICE, "Idempotency-Key": "m-1"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            sending = asyncio.ensure_future(http.post(first + PATH, json={"message": "move 5"}))
            await started(ran)
            other = await http.post(second + PATH, json={"message": "move 5"})
            assert (other.status_code, other.json()["error"]["code"]) == (409, "resume_in_progress")  # the premise
            async with Client(second, token="alice-token") as client:
                retried = await client.agent("bank").chat("s1").send("move 5", idempotency_key="m-1")
            reply = await sending
    assert (retried.finish_reason, retried.text) == (AgentFinishReason.STOP, "Moved 5.")
    assert reply.json()["finish_reason"] == "stop" and ran == ["transfer:5"]  # once


async def test_with_no_retries_a_turn_in_progress_is_said_at_once(tmp_path):
    ran: list[str] = []
    db = tmp_path / "s.db"
    with serve_in_thread(lambda: process(db, ran)) as first, serve_in_thread(lambda: process(db, ran)) as second:
        async with httpx.AsyncClient(headers={**ALICE, "Idempotency-Key": "m-1"}, timeout=30) as http:
            sending = asyncio.ensure_future(http.post(first + PATH, json={"message": "move 5"}))
            await started(ran)
            async with Client(second, token="alice-token", retries=0) as client:
                with pytest.raises(ResumeInProgress):
                    await client.agent("bank").chat("s1").send("move 5", idempotency_key="m-1")
            await sending
    assert ran == ["transfer:5"]
