"""``RemoteChat`` streams cut short: by a real ``pausepoint serve`` that stops past its grace
period mid-turn (SIGTERM; the stream's last event is ``error`` ``shutting_down``), and by a
connection that breaks after the ``turn_end`` chunk, while the ``response`` event was on its way.

Found by a probe: the first raised ``ShuttingDown`` instead of asking again with the turn's
idempotency key, as a stream whose connection broke is completed (docs/server.md), and named no
key to send it again with; the second gave ``turn_end`` twice.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from pausepoint import AgentFinishReason, AgentResponse, TurnEndChunk
from pausepoint.client import Client
from pausepoint.errors import ShuttingDown
from pausepoint.server._errors import error_body, shutting_down
from pausepoint.turn._streaming import CHUNK
from tests.cli.conftest import serve_module
from tests.models.wire_server import Json, Sse, WireServer, scripted
from tests.server.test_client_failures import paused_stream

# A tool, and a model, that take longer than serve's 3 s grace period the first time (in the
# process that is stopped); run again — which they must not be — they would end at once.
APP = """
import asyncio
from pathlib import Path
from pausepoint import Pausepoint
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, tool_call

ai = Pausepoint()
STARTED = Path({started!r})
store = SqliteSessionStore({db!r})

async def take_long() -> None:
    first = not STARTED.exists()
    STARTED.write_text("started")
    if first:
        await asyncio.sleep(30)

@ai.tool()
async def slow_report(name: str) -> str:
    \"\"\"Takes long.\"\"\"
    await take_long()
    return "done"

async def slow_answer(request):
    await take_long()
    return "thought it over"

ai.define_agent(
    name="reporter",
    model=ScriptedModel([[tool_call("slow_report", {{"name": "q3"}})], "here it is"]),
    tools=[slow_report],
    store=store,
)
ai.define_agent(name="thinker", model=ScriptedModel(slow_answer), store=store)
"""


def serve(tmp_path: Path, port: int = 0) -> tuple[subprocess.Popen[str], str]:
    """``pausepoint serve`` of the app above (its store in ``tmp_path``), on ``port`` (0: a free
    one): the process and its URL."""
    app = tmp_path / "cut_app.py"
    if not app.exists():
        started, db = str(tmp_path / "started"), str(tmp_path / "s.db")
        app.write_text(textwrap.dedent(APP.format(started=started, db=db)))
    return serve_module("cut_app:ai", tmp_path, port)


async def stop_when_started(proc: subprocess.Popen[str], started: Path) -> None:
    """SIGTERM to ``proc`` once the slow tool or model runs; back when the process has exited."""
    deadline = time.monotonic() + 30
    while not await asyncio.to_thread(started.exists):
        assert time.monotonic() < deadline, "the slow tool or model never started"
        await asyncio.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.wait, 30) == 0


def stopped(*procs: subprocess.Popen[str]) -> None:
    """Each server ended; its log printed, which pytest shows for a test that failed."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        print(f"--- the log of server {proc.pid} ---\n{proc.communicate(timeout=30)[1][-6000:]}")


async def test_a_stream_a_stopping_server_cut_short_is_completed_by_its_key(tmp_path: Path) -> None:
    """The server that took the turn stops (the tool cut short, the turn recorded ``aborted``);
    the next one, on the same address, answers the keyed request with that end."""
    first, url = serve(tmp_path)
    port = int(url.rsplit(":", 1)[1])
    later: list[subprocess.Popen[str]] = []

    async def restart() -> None:
        await stop_when_started(first, tmp_path / "started")
        later.append((await asyncio.to_thread(serve, tmp_path, port))[0])

    try:
        async with Client(url, token="s3cret", retries=12) as client:
            chat = client.agent("reporter").chat()
            restarting = asyncio.create_task(restart())
            stream = chat.send_stream("the q3 report, please")
            chunks = [chunk async for chunk in stream]
            final = await stream.response
            await restarting
            assert final.finish_reason == AgentFinishReason.ABORTED
            assert await chat.last_response() == final  # the end the first server recorded
            history = await chat.history()
    finally:
        stopped(first, *later)
    kinds = [chunk.kind for chunk in chunks if chunk.kind != "tool_call_delta"]
    assert kinds == ["tool_request", "turn_end"]  # the completion's end, once
    assert chunks[-1] == TurnEndChunk(final)
    outcome = history[-1].tool_responses[0].output  # cut short once, never run again
    assert outcome["outcome"] == "unknown" and outcome["error"].startswith("cancelled: ")


async def test_a_shutting_down_raised_names_the_key_to_send_it_again_with(tmp_path: Path) -> None:
    """Not retried (``retries=0``), a send the stopping server cut short raises
    ``ShuttingDown`` naming the fresh key the client chose; sent again with it (to the next
    server), the message is taken once: its turn goes on, and a third send gets that outcome."""
    first, url = serve(tmp_path)
    port = int(url.rsplit(":", 1)[1])
    servers = [first]
    try:
        async with Client(url, token="s3cret", retries=0) as client:
            chat = client.agent("thinker").chat()
            stopping = asyncio.create_task(stop_when_started(first, tmp_path / "started"))
            with pytest.raises(ShuttingDown) as caught:
                await chat.send("think it over")
            await stopping
        key = caught.value.details["idempotency_key"]
        assert isinstance(key, str) and len(key) >= 16
        servers.append(serve(tmp_path, port)[0])
        async with Client(url, token="s3cret") as client:
            chat = client.agent("thinker").chat(chat.session_id)
            again = await chat.send("think it over", idempotency_key=key)
            once_more = await chat.send("think it over", idempotency_key=key)
            history = await chat.history()
    finally:
        stopped(*servers)
    assert again.text == "thought it over" and once_more == again
    assert [(m.role, m.text) for m in history] == [("user", "think it over"), ("model", "thought it over")]


@pytest.mark.parametrize("after_the_turn_end", ["the connection closes", "a stopping server's error"])
async def test_a_stream_cut_after_its_turn_end_ends_once_with_that_response(after_the_turn_end: str) -> None:
    """Cut while its ``response`` event was on its way (the largest of a stream), the stream
    has given the whole turn: its ``turn_end`` holds the response, so nothing is asked again."""
    response, live = await paused_stream()
    events: list[object] = [("chunk", CHUNK.dump_python(chunk, mode="json")) for chunk in live]
    if after_the_turn_end == "a stopping server's error":
        events.append(("error", error_body(shutting_down())))
    body = TypeAdapter(AgentResponse).dump_python(response, mode="json")  # a keyed request's answer
    with WireServer(scripted([Sse(events), Json(body)])) as server:
        async with Client(server.url, retries=2) as client:
            stream = client.agent("bank").chat(response.session_id).send_stream("Hi")
            chunks = [chunk async for chunk in stream]
            final = await stream.response
    assert chunks == live  # one turn_end, as the local chat's stream gave
    assert final == response and len(server.requests) == 1
