"""A server stopping mid-request: ``pausepoint serve`` gets SIGTERM (systemd's stop, docs/deploy.md)
while a tool runs longer than the 3 s grace period. The request is answered in the API's own
shape — 503 ``shutting_down`` — not with the ASGI server's plain-text 500 (found by a probe); the
tool it cut short is recorded before the process exits, so the session goes on at once from the
next process, not after ``abandon_after`` (found by another)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest

from pausepoint import AgentFinishReason, Pausepoint
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel
from tests.cli.conftest import serve_module
from tests.server.test_display import sse

APP = """
import asyncio
from pathlib import Path
from pausepoint import Pausepoint
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, tool_call

ai = Pausepoint()
STARTED = Path({started!r})

@ai.tool()
async def slow_report(name: str) -> str:
    \"\"\"Takes long.\"\"\"
    STARTED.write_text(name)
    await asyncio.sleep(30)
    return "done"

ai.define_agent(
    name="reporter",
    model=ScriptedModel([[tool_call("slow_report", {{"name": "q3"}})], "here it is"]),
    tools=[slow_report],
    store=SqliteSessionStore({db!r}),
)
"""


def serve_slow_app(tmp_path: Path) -> tuple[subprocess.Popen[str], str]:
    """``pausepoint serve`` of the slow app above, on a port of its own: the process and its URL."""
    (tmp_path / "slow_app.py").write_text(
        textwrap.dedent(APP.format(started=str(tmp_path / "started"), db=str(tmp_path / "s.db")))
    )
    return serve_module("slow_app:ai", tmp_path)


@pytest.mark.parametrize("streamed", [False, True])
def test_a_request_cut_short_by_a_stopping_server_is_a_503_in_the_apis_shape(tmp_path: Path, streamed: bool):
    """Streamed, the reply had begun (200): its last event is that error (found by a probe: the
    stream ended with no event, and the server logged a traceback)."""
    started = tmp_path / "started"
    proc, base = serve_slow_app(tmp_path)
    try:
        replies: list[httpx.Response] = []

        def send() -> None:
            accept = {"Accept": "text/event-stream"} if streamed else {}
            replies.append(
                httpx.post(
                    f"{base}/v1/agents/reporter/sessions",
                    json={"message": "the q3 report, please"},
                    headers={"Authorization": "Bearer s3cret", **accept},
                    timeout=60,
                )
            )

        sender = threading.Thread(target=send)
        sender.start()
        deadline = time.monotonic() + 30
        while not started.exists():
            assert time.monotonic() < deadline, "the tool never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        sender.join(timeout=30)
        [reply] = replies
        if streamed:
            assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/event-stream")
            name, data = sse(reply.text)[-1]
            assert name == "error", reply.text
            error = data["error"]
        else:
            assert reply.status_code == 503, reply.text
            assert reply.headers["content-type"].startswith("application/json")
            error = reply.json()["error"]
        assert (error["code"], error["status"]) == ("shutting_down", "UNAVAILABLE")
        assert "Idempotency-Key" in error["message"]
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "Exception in ASGI application" not in err, err
        asyncio.run(_the_session_goes_on_at_once(tmp_path / "s.db"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def _the_session_goes_on_at_once(db: Path) -> None:
    """The next process (this one) finds the tool recorded as cut short, the turn ended
    ``aborted``, and the session free for its next message."""
    ai = Pausepoint()

    @ai.tool()
    async def slow_report(name: str) -> str:
        """Takes long."""
        raise AssertionError("a call cut short never runs again")

    store = SqliteSessionStore(db)
    agent = ai.define_agent(name="reporter", model=ScriptedModel(["carrying on"]), tools=[slow_report], store=store)
    try:
        [summary] = await agent.list_sessions()
        chat = agent.chat(summary.session_id)
        last = await chat.last_response()
        assert last is not None and last.finish_reason == AgentFinishReason.ABORTED
        output = (await chat.history())[-1].tool_responses[0].output
        assert output["outcome"] == "unknown" and output["error"].startswith("cancelled: ")
        assert (await chat.send("is it there?")).text == "carrying on"  # not TurnInProgress
    finally:
        await store.close()


def test_an_open_feed_ends_with_the_stopping_servers_error(tmp_path: Path):
    """A feed still open when the server stops past its grace period ends with an ``error``
    event, ``shutting_down``, and a whole response — as a turn's stream does (found by a probe:
    cut with no event, the chunked body never terminated, and uvicorn logged errors)."""
    proc, base = serve_slow_app(tmp_path)
    try:
        received: list[str] = []
        opened = threading.Event()

        def follow() -> None:
            with httpx.stream("GET", f"{base}/v1/feed", headers={"Authorization": "Bearer s3cret"}, timeout=60) as r:
                for text in r.iter_text():
                    received.append(text)
                    opened.set()

        follower = threading.Thread(target=follow)
        follower.start()
        assert opened.wait(30)
        proc.send_signal(signal.SIGTERM)
        follower.join(timeout=30)
        assert not follower.is_alive()
        name, data = sse("".join(received))[-1]
        assert name == "error" and data["error"]["code"] == "shutting_down", received
        # how a feed goes on, not a turn's advice (found by a probe: "send it again with the same key")
        assert "Last-Event-ID" in data["error"]["message"] and "Idempotency" not in data["error"]["message"]
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "without completing response" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
