"""A detached turn whose process stops while it runs — ``asyncio.run`` returning, a script that
used the blocking API ending — ends ``aborted``, its running call recorded as cancelled, so the
next process goes on at once instead of waiting ``abandon_after`` for a turn nothing runs (found
by a probe: the session refused every call for 15 minutes, and an abort did not free it)."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from pausepoint import AgentFinishReason
from tests.exit_app import agent

ROOT = Path(__file__).resolve().parents[1]


def continued(path: Path, session_id: str) -> tuple[str | None, str | None, str]:
    """Another process's view: how the detached turn ended, its call's result, and a new message's reply."""

    async def read() -> tuple[str | None, str | None, str]:
        chat = agent(str(path)).chat(session_id)
        last = await chat.last_response()
        outputs = [r.output for m in await chat.history() for r in m.tool_responses]
        reply = await chat.send("hi")
        return (last.finish_reason.value if last else None, str(outputs), reply.text)

    return asyncio.run(read())


def test_a_detached_turn_left_running_when_asyncio_run_returns_ends_aborted(tmp_path):
    path = tmp_path / "jobs.db"

    async def detach_and_return(wait_for_the_job: bool) -> str:
        started = asyncio.Event()
        chat = agent(str(path), started).chat()
        await chat.detach("slow")
        if wait_for_the_job:
            await started.wait()
        return chat.session_id  # this "script" returns, and asyncio.run cancels what still runs

    for wait_for_the_job in (False, True):  # before the job starts (the call written), and while it runs
        session_id = asyncio.run(detach_and_return(wait_for_the_job))
        finish, outputs, reply = continued(path, session_id)
        assert finish == AgentFinishReason.ABORTED.value and reply == "Hello.", (wait_for_the_job, outputs)
        assert "cancelled" in outputs or outputs == "[]", outputs


def test_a_detached_turn_started_with_the_blocking_api_ends_aborted_when_the_script_ends(tmp_path):
    path = tmp_path / "jobs.db"
    script = textwrap.dedent(
        f"""
        import pausepoint
        from tests.exit_app import agent
        chat = agent({str(path)!r}).chat()
        pausepoint.run_sync(chat.detach("slow"))
        import time; time.sleep(0.5)  # the job runs; then the script ends
        print(chat.session_id)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    finish, outputs, reply = continued(path, done.stdout.strip())
    assert finish == AgentFinishReason.ABORTED.value and "cancelled" in outputs and reply == "Hello."


def test_ctrl_c_on_a_blocking_send_while_the_model_answers_ends_the_turn_aborted_even_on_a_busy_store(tmp_path):
    """Found by a probe: Ctrl+C on a script blocked in ``chat.sync.send`` while the model answered
    a tool's result, then the exit: the exit's cancel of what still ran cancelled that call a
    second time, cutting off the write of its end (always when the store was busy for a moment,
    else now and then). The session then had no turn end and no result of the call, and every
    process got ``TurnInProgress`` for ``abandon_after``."""
    path, noted = tmp_path / "jobs.db", tmp_path / "noted"
    script = textwrap.dedent(
        f"""
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as on a terminal
        from tests.exit_app import agent
        agent({str(path)!r}, noted={str(noted)!r}).chat("S").sync.send("note, then think")
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not noted.exists() and time.monotonic() < deadline:  # the tool ran; the model thinks
            time.sleep(0.05)
        assert noted.exists(), "the tool never ran"
        time.sleep(0.3)
        other = sqlite3.connect(path, isolation_level=None)  # another process writes for a moment
        other.execute("BEGIN IMMEDIATE")
        child.send_signal(signal.SIGINT)
        time.sleep(1.0)
        other.execute("ROLLBACK")
        other.close()
        assert child.wait(timeout=60) != 0  # ended by the interrupt
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()
    finish, outputs, reply = continued(path, "S")
    assert finish == AgentFinishReason.ABORTED.value, (finish, outputs)
    assert outputs == "['noted']" and reply == "Hello."
    assert noted.read_text() == "noted\n"  # the tool ran once
