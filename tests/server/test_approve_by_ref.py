"""Answers by ref over HTTP: ``RemoteChat.approve`` (``POST .../interrupts/{ref}/approve``), and
routes that leave the pause to the core — each answer by ref reads the session once, in the
locked operation that records it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from examples import banking
from pausepoint import AgentFinishReason, Grant, ToolResultChunk, TurnEndChunk
from pausepoint.client import Client
from pausepoint.errors import (
    AlreadyResolved,
    IdempotencyKeyReused,
    InputEditNotAllowed,
    InvalidAnswer,
    InvalidGrant,
    UnknownInterrupt,
)
from pausepoint.server import BearerTokens, create_app
from pausepoint.stores import SqliteSessionStore
from tests.server.conftest import ALICE
from tests.server.harness import serve_in_thread


async def test_the_client_approves_by_ref(served):
    async with Client(served.bank, token="alice-token") as client:
        chat = client.agent("bankingAgent").chat()
        [pause] = (await chat.send("Transfer $12 to ann.")).interrupts
        with pytest.raises(InputEditNotAllowed):  # a question's input cannot be edited, even to null
            await chat.approve(pause.ref, replace_input=None)
        with pytest.raises(InvalidGrant):  # the yes grants the transfer already: no grant of the question
            await chat.approve(pause.ref, grant=Grant())
        with pytest.raises(InvalidAnswer):
            await chat.approve(pause.ref, grant={"uses": 1})  # type: ignore[arg-type]
        with pytest.raises(UnknownInterrupt):
            await chat.approve("nope")
        assert served.ledger == []

        res = await chat.approve(pause.ref, idempotency_key="k1", metadata={"ticket": "T-1"})
        assert (res.finish_reason, res.text, served.ledger) == (
            AgentFinishReason.STOP,
            "Transferred $12 to ann.",
            ["12->ann"],
        )
        assert await chat.approve(pause.ref, idempotency_key="k1", metadata={"ticket": "T-1"}) == res
        with pytest.raises(IdempotencyKeyReused):
            await chat.approve(pause.ref, idempotency_key="k1")
        with pytest.raises(AlreadyResolved):
            await chat.approve(pause.ref)
        entry = next(e for e in await chat.audit_trail() if e.decision == "respond")
        assert (entry.ref, entry.output, entry.metadata, entry.principal, entry.via) == (
            pause.ref,
            {"approved": True, "feedback": ""},
            {"ticket": "T-1"},
            "alice",
            "http",
        )
        assert served.ledger == ["12->ann"]


async def test_the_client_approves_an_edited_input_streamed(served):
    async with Client(served.shell, token="alice-token") as client:
        chat = client.agent("shellAgent").chat()
        [pause] = (await chat.send("Run: rm -rf dist/")).interrupts
        turn = chat.approve_stream(pause.ref, replace_input={"command": "rm -rf dist/tmp"}, pause_id=pause.pause_id)
        chunks = [chunk async for chunk in turn]
        res = await turn.response
        assert res.finish_reason == AgentFinishReason.STOP
        assert [c.ref for c in chunks if isinstance(c, ToolResultChunk)] == [pause.ref]
        assert isinstance(chunks[-1], TurnEndChunk) and chunks[-1].response == res
        assert served.executed == [
            {
                "command": "rm -rf dist/tmp",
                "resumed_metadata": {"tool_approved": True},
                "original_input": {"command": "rm -rf dist/"},
            }
        ]


class Reads:
    """A ``pausepoint.telemetry.Metrics`` that counts the store's reads of session logs."""

    def __init__(self) -> None:
        self.count = 0

    def turn_ended(self, agent: str, finish_reason: str, seconds: float) -> None:
        pass

    def model_called(self, agent: str, model: str, seconds: float, error: str | None) -> None:
        pass

    def pause_opened(self, agent: str, tool: str) -> None:
        pass

    def pause_resolved(self, agent: str, tool: str, decision: str, waited: float) -> None:
        pass

    def store_called(self, backend: str, operation: str, seconds: float) -> None:
        self.count += operation == "read"


@pytest.fixture
def counted(tmp_path: Path) -> Iterator[tuple[str, Reads]]:
    reads = Reads()

    def app():
        ai, _ = banking.build(SqliteSessionStore(tmp_path / "s.db"))
        ai.telemetry.metrics = reads
        return create_app(ai, auth=BearerTokens({"alice-token": "alice"}), expiry_interval=None)

    with serve_in_thread(app) as url:
        yield url + "/v1/agents/bankingAgent/sessions", reads


@pytest.mark.parametrize(
    "action, body",
    [
        ("approve", {}),
        ("respond", {"output": {"approved": True}}),  # no name: the core finds it
        ("deny", {"reason": "no"}),
    ],
)
async def test_an_answer_by_ref_reads_the_session_once(counted, http: httpx.AsyncClient, action, body):
    sessions, reads = counted
    started = (await http.post(sessions, json={"message": "Transfer $5 to z."}, headers=ALICE)).json()
    session, ref = f"{sessions}/{started['session_id']}", started["interrupts"][0]["ref"]
    reads.count = 0
    reply = await http.post(f"{session}/interrupts/{ref}/{action}", json=body, headers=ALICE)
    assert reply.status_code == 200 and reply.json()["finish_reason"] == "stop", reply.text
    assert reads.count == 1  # the lock's refresh: the route itself reads no session
    reads.count = 0
    again = await http.post(f"{session}/interrupts/{ref}/{action}", json=body, headers=ALICE)
    assert again.json()["error"]["code"] == "already_resolved" and reads.count == 1
