"""A pause made through one server process, answered through another on the same store."""

from __future__ import annotations

import asyncio

import pytest

from pausepoint import AgentFinishReason
from pausepoint.client import Client
from pausepoint.errors import AlreadyResolved
from tests.server.harness import serve_in_process
from tests.stores.backends import PostgresBackend, service_url


async def pause_in_one_answer_in_another(spec) -> None:
    with serve_in_process(spec) as first, serve_in_process(spec) as second:
        async with (
            Client(first + "/bank", token="alice-token") as one,
            Client(second + "/bank", token="alice-token") as two,
        ):
            res = await one.agent("bankingAgent").chat().send("Transfer $40 to rent.")
            assert res.finish_reason == AgentFinishReason.INTERRUPTED
            other = two.agent("bankingAgent").chat(res.session_id)
            [pause] = await other.interrupts()
            answer = pause.respond({"approved": True})
            racers = [other.resume(respond=[answer]), one.agent("bankingAgent").chat(res.session_id).resume(
                respond=[answer])]  # fmt: skip
            outcomes = await asyncio.gather(*racers, return_exceptions=True)
            done = [o for o in outcomes if not isinstance(o, BaseException)]
            refused = [o for o in outcomes if isinstance(o, BaseException)]
            assert len(done) == 1 and done[0].text == "Transferred $40 to rent."
            assert len(refused) == 1 and isinstance(refused[0], AlreadyResolved), refused
            trail = await one.agent("bankingAgent").chat(res.session_id).audit_trail()
            assert [(e.decision, e.principal, e.via) for e in trail] == [
                ("message", "alice", "http"),
                ("respond", "alice", "http"),
                ("grant", "alice", "http"),  # the yes grants the one transfer it asked about
                ("approve", "alice", "policy"),  # ... which alice's grant approves
            ]


async def test_across_processes_on_one_sqlite_file(tmp_path):
    await pause_in_one_answer_in_another({"backend": "sqlite", "path": str(tmp_path / "shared.db")})


async def test_across_processes_on_postgres():
    backend = PostgresBackend(service_url("postgres"))
    try:
        await pause_in_one_answer_in_another(backend.spec())
    finally:
        await backend.cleanup()


pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
