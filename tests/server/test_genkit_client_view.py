"""Genkit 0.12's own ``remote_agent`` against the server: what its user sees — ``chat.messages``
rebuilt from the stream and the outputs — is what ``getSnapshot`` holds, after every step;
one ref per tool call; caller-chosen session ids; detach, poll and abort.

Genkit's client appends each turn's output message to ``chat.messages``. A resume that leaves
calls paused adds no message, and its output restates the last model message (so that
``res.interrupts`` lists what is still open, as Genkit's own server does); the client then
holds that model message twice in a row, the later copy current — two model messages never
follow each other otherwise. ``current`` reads the client's view that way. And a message's
``interrupt`` marks say what was paused when the client received it: once answered, the
snapshot shows the call plainly, the client's earlier copy still marked (``plain`` compares
without the marks)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.server.test_genkit_wire import GENKIT_PYTHON

SCRIPT = Path(__file__).with_name("genkit_story.py")

pytestmark = pytest.mark.skipif(
    not Path(GENKIT_PYTHON).exists(), reason="genkit 0.12.0 is not installed (PAUSEPOINT_GENKIT_PYTHON)"
)


def story(url: str, scenario: str, token: str = "alice-token") -> list[dict[str, Any]]:
    done = subprocess.run(
        [GENKIT_PYTHON, str(SCRIPT), url + "/agents/labAgent", token, scenario],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def current(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The client's messages, a restated model message in place of its earlier copy."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if out and message["role"] == "model" == out[-1]["role"]:
            out[-1] = message
        else:
            out.append(message)
    return out


def plain(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages without the ``interrupt`` marks (what was paused when the message was seen)."""
    out = []
    for message in messages:
        parts = []
        for part in message["content"]:
            metadata = {k: v for k, v in part.get("metadata", {}).items() if k != "interrupt"}
            bare = {k: v for k, v in part.items() if k != "metadata"}
            parts.append(bare | ({"metadata": metadata} if metadata else {}))
        out.append({**message, "content": parts})
    return out


def refs(messages: list[dict[str, Any]], kind: str) -> list[str]:
    return [p[kind]["ref"] for m in messages for p in m["content"] if kind in p]


def streamed_parts(step: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for c in step["chunks"] if c.get("modelChunk") for p in c["modelChunk"]["content"]]


@pytest.mark.parametrize("scenario", ["sibling", "sibling-streamed"])
def test_a_finished_sibling_beside_a_pause(served, scenario):
    send, resume = story(served.lab, scenario)
    assert [m["role"] for m in send["snapshot"]] == ["user", "model"]
    assert send["client"] == send["snapshot"]  # exactly: the finished sibling waits for its batch
    balance, approval = send["snapshot"][1]["content"]
    assert "metadata" not in balance and approval["metadata"] == {"interrupt": True}
    assert [i[1] for i in send["interrupts"]] == [approval["toolRequest"]["ref"]]
    if scenario.endswith("streamed"):
        parts = streamed_parts(send)
        assert refs([{"content": parts}], "toolRequest") == refs(send["snapshot"], "toolRequest")  # each once
        assert not any("interrupt" in p.get("metadata", {}) for p in parts)  # the output marks the pause
        assert not refs([{"content": parts}], "toolResponse")  # no tool message before its batch is complete
    assert [m["role"] for m in resume["snapshot"]] == ["user", "model", "tool", "model", "tool", "model"]
    assert plain(resume["client"]) == plain(resume["snapshot"])
    assert resume["client"][2:] == resume["snapshot"][2:]
    tool = resume["snapshot"][2]["content"]
    assert [p["toolResponse"]["ref"] for p in tool] == refs(send["snapshot"], "toolRequest")  # one ref per call
    assert served.events.lines == ["get_balance:A", "transfer:5->B"]


@pytest.mark.parametrize("scenario", ["partial", "partial-streamed"])
def test_partial_answers(served, scenario):
    send, first, second = story(served.lab, scenario)
    assert send["client"] == send["snapshot"]
    a, b = send["interrupts"]
    assert first["finish"] == "interrupted" and [i[1] for i in first["interrupts"]] == [b[1]]
    assert current(first["client"]) == first["snapshot"]  # the restated message is the snapshot's, marks included
    assert [m["role"] for m in first["snapshot"]] == ["user", "model"]
    assert first["chunks"][:-1] == []  # nothing new in the history: nothing streamed but the turn's end
    assert [m["role"] for m in second["snapshot"]] == ["user", "model", "tool", "model", "tool", "model"]
    assert plain(current(second["client"])) == plain(second["snapshot"])
    assert refs(second["snapshot"][2:3], "toolResponse") == [a[1], b[1]]
    assert served.events.lines == ["transfer:1->A"]  # $1 approved, $2 refused


@pytest.mark.parametrize("scenario", ["restart", "restart-streamed"])
def test_a_restart_that_pauses_again_and_the_same_input_as_replacement(served, scenario):
    send, again, approved = story(served.lab, scenario)
    assert send["client"] == send["snapshot"]
    assert again["finish"] == "interrupted"
    assert again["interrupts"] == send["interrupts"]  # the same call, the same ref
    assert current(again["client"]) == again["snapshot"]
    assert [m["role"] for m in again["snapshot"]] == ["user", "model"]
    assert approved["finish"] == "stop"  # replace_input=<same input>: accepted, not an edit
    assert plain(current(approved["client"])) == plain(approved["snapshot"])
    assert [m["role"] for m in approved["snapshot"]] == ["user", "model", "tool", "model"]
    assert served.events.lines == ["run_shell:rm x"]


def test_the_ref_a_stream_shows_answers_the_pause(served):
    [answered] = story(served.lab, "stream-ref")
    assert answered["finish"] == "stop"
    assert served.events.lines == ["transfer:7->C"]


def test_a_session_id_the_caller_chose(served):
    created, continued = story(served.lab, "my-session")
    assert created["output"]["sessionId"] == continued["output"]["sessionId"] == "my-conv-1"
    assert created["snapshot_meta"]["sessionId"] == "my-conv-1" and created["snapshot_meta"]["parentId"] == ""
    assert continued["snapshot_meta"]["parentId"] == created["output"]["snapshotId"]
    assert [m["role"] for m in continued["snapshot"]] == ["user", "model", "user", "model"]
    assert continued["client"] == continued["snapshot"][2:]  # chat(session_id=) starts empty (load_chat loads)
    # another principal naming it learns nothing: the same answer as for any session it cannot see
    [other] = story(served.lab, "other-session", token="bob-token")
    assert other["error"] == "NOT_FOUND" and "no session 'my-conv-1'" in other["message"]


class Detaching:
    """The ``detach`` scenario, driven step by step: detach, (the test waits), abort."""

    def __init__(self, url: str, other: str | None = None) -> None:
        command = [GENKIT_PYTHON, str(SCRIPT), url + "/agents/labAgent", "alice-token", "detach"]
        if other is not None:
            command.append(other + "/agents/labAgent")
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)  # fmt: skip

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(60)
            raise AssertionError(self.process.stderr.read() if self.process.stderr else "no output")
        return dict(json.loads(line))

    def abort(self) -> tuple[dict[str, Any], dict[str, Any]]:
        assert self.process.stdin is not None
        self.process.stdin.write("abort\n")
        self.process.stdin.flush()
        aborted, after = self.read(), self.read()
        assert self.process.wait(60) == 0
        return aborted, after


def check_detached_then_aborted(detached: dict[str, Any], aborted: dict[str, Any], after: dict[str, Any]) -> None:
    assert detached["status"] == "pending" and detached["detached"].startswith(detached["session"] + ".")
    prompt = [{"role": "user", "content": [{"text": "Slow: think it over"}]}]
    assert detached["snapshot"] == detached["client"] == prompt  # running: the prompt it works on
    assert (aborted["before"], aborted["status"], aborted["finish"]) == ("pending", "aborted", "aborted")
    assert aborted["again"] == "aborted"  # a second abort changes nothing
    assert aborted["snapshot"] == []  # the model never answered: the prompt is not in the history
    assert (after["text"], after["finish"]) == ("You said: hello after", "stop")  # the session goes on
    assert after["same"] == "You said: same chat"


def test_detach_poll_and_abort(served):
    run = Detaching(served.lab)
    detached = run.read()
    assert served.events.slow_started.wait(60)  # the model call is under way
    aborted, after = run.abort()
    assert served.events.slow_cancelled.is_set()  # the abort cancelled the model call
    check_detached_then_aborted(detached, aborted, after)
    assert served.events.lines == ["slow:started", "slow:cancelled"]  # and no tool ran


def test_detach_in_one_server_process_abort_through_another_on_postgres(tmp_path):
    from tests.server.harness import serve_in_process
    from tests.server.lab import read_events
    from tests.stores.backends import PostgresBackend, service_url

    backend = PostgresBackend(service_url("postgres"))
    events = tmp_path / "events.log"
    spec = {**backend.spec(), "events": str(events)}
    try:
        with serve_in_process(spec) as first, serve_in_process(spec) as second:
            run = Detaching(first + "/lab", second + "/lab")
            detached = run.read()
            wait_for(lambda: "slow:started" in read_events(events))
            aborted, after = run.abort()
    finally:
        import asyncio

        asyncio.run(backend.cleanup())
    check_detached_then_aborted(detached, aborted, after)
    assert read_events(events) == ["slow:started", "slow:cancelled"]  # cancelled in the first process; no tool ran


def wait_for(condition: Any, timeout: float = 60.0) -> None:
    """Wait until ``condition()`` holds (it reads another process's file); fail after ``timeout``."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)
