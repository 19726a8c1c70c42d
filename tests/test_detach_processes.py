"""Detached turns across processes: a turn running in one process is seen running from another,
aborted from it (its model call cancelled, no tool run), and a process that dies mid-turn does
not leave its session stuck. On a SQLite file and on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from pausepoint import AgentFinishReason, DetachedTurn, TurnStatus
from pausepoint.errors import TurnInProgress
from tests.server.lab import LabEvents, build, read_events
from tests.stores.backends import PostgresBackend, open_store, service_url

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(params=["sqlite", "postgres"])
async def spec(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    if request.param == "sqlite":
        yield {"backend": "sqlite", "path": str(tmp_path / "shared.db")}
        return
    backend = PostgresBackend(service_url("postgres"))
    try:
        yield backend.spec()
    finally:
        await backend.cleanup()


async def until(condition: Callable[[], bool]) -> None:
    """Wait until ``condition()`` holds (it reads another process's file); fail after a minute."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the other process"
        await asyncio.sleep(0.02)


class Worker:
    """``tests.detach_worker``: detaches a slow turn, then waits."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, spec: dict[str, Any], events: Path) -> Worker:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.detach_worker", json.dumps(spec), str(events),
            cwd=ROOT, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        return cls(process)

    async def line(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        raw = await asyncio.wait_for(self.process.stdout.readline(), 120)
        assert raw, "the worker exited"
        return dict(json.loads(raw))

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
        await self.process.wait()


async def test_a_turn_running_in_another_process_is_aborted_from_here(spec, tmp_path):
    events = tmp_path / "events.log"
    worker = await Worker.start(spec, events)
    store = open_store(spec)
    try:
        started = await worker.line()
        await until(lambda: "slow:started" in read_events(events))
        chat = build(store, LabEvents()).agents["labAgent"].chat(started["session"], principal="ops")
        turn = DetachedTurn(chat, started["turn"])
        assert await turn.status() == TurnStatus.PENDING
        with pytest.raises(TurnInProgress):  # it is the session's, whichever process asks
            await chat.send("me too")
        assert await chat.abort() == TurnStatus.PENDING
        assert await worker.line() == {"response": "aborted"}  # the running process stopped it
        assert read_events(events) == ["slow:started", "slow:cancelled"]  # its model call cancelled; no tool
        assert await turn.status() == TurnStatus.ABORTED
        assert (await turn.wait()).finish_reason == AgentFinishReason.ABORTED
        assert (await chat.send("hello")).text == "You said: hello"
        assert [m.text for m in await chat.history()] == ["hello", "You said: hello"]
    finally:
        await worker.stop()
        await store.close()


async def test_a_process_that_dies_mid_turn_leaves_its_session_usable(spec, tmp_path):
    events = tmp_path / "events.log"
    worker = await Worker.start(spec, events)
    store = open_store(spec)
    try:
        started = await worker.line()
        await until(lambda: "slow:started" in read_events(events))
        await worker.stop()  # SIGKILL, mid model call
        patient = build(store, LabEvents()).agents["labAgent"]
        chat = patient.chat(started["session"])
        assert await DetachedTurn(chat, started["turn"]).status() == TurnStatus.PENDING  # for all it knows
        with pytest.raises(TurnInProgress):
            await chat.send("hello?")
        # an agent that presumes a silent turn lost at once (abandon_after; 15 minutes by default)
        hasty = build(store, LabEvents(), abandon_after=timedelta(0)).agents["labAgent"]
        chat = hasty.chat(started["session"])
        turn = DetachedTurn(chat, started["turn"])
        assert await turn.status() == TurnStatus.EXPIRED
        before = await chat.audit_trail()
        assert await chat.abort(principal="bob") == TurnStatus.EXPIRED  # nothing runs to stop: nothing recorded
        assert await turn.status() == TurnStatus.EXPIRED and await chat.audit_trail() == before
        assert (await chat.send("hello?")).text == "You said: hello?"  # ends the lost turn, then goes on
        assert await turn.status() == TurnStatus.FAILED
        assert "lost" in ((await turn.wait()).error or "")
        assert [m.text for m in await chat.history()] == ["hello?", "You said: hello?"]
    finally:
        await worker.stop()
        await store.close()
