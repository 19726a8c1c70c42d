from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pexpect
import pytest

ROOT = Path(__file__).resolve().parents[2]


def cli_env() -> dict[str, str]:
    """The environment of a CLI run: the repo importable, no colours, no provider keys."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return {**env, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}


def spawn(*args: str, timeout: float = 60) -> pexpect.spawn:
    """``python -m pausepoint ARGS`` in a pseudo-terminal, from the repo root."""
    return pexpect.spawn(
        sys.executable,
        ["-m", "pausepoint", *args],
        cwd=str(ROOT),
        env=cli_env(),
        encoding="utf-8",
        timeout=timeout,
        dimensions=(50, 250),
        preexec_fn=_ctrl_c_interrupts,
    )


def _ctrl_c_interrupts() -> None:
    """Ctrl+C interrupts the CLI as it does in a user's terminal, also when the test run itself
    was started with SIGINT ignored (a shell's background job), which children would inherit."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def terminals() -> Iterator[list[pexpect.spawn]]:
    """Spawned terminals, closed (killed if need be) after the test."""
    opened: list[pexpect.spawn] = []
    yield opened
    for child in opened:
        if child.isalive():
            child.terminate(force=True)


def serve_module(app: str, folder: Path, port: int = 0) -> tuple[subprocess.Popen[str], str]:
    """``pausepoint serve APP`` (``module:ai`` of a module in ``folder``) on ``port`` (0: a free
    one), alice's token ``s3cret``: the process, and the URL it said it serves at."""
    env = {**cli_env(), "PYTHONPATH": f"{folder}:{ROOT}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pausepoint", "serve", app, "--port", str(port), "--token", "alice=s3cret"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        found = re.search(r"at (http://127\.0\.0\.1:\d+)", line)
        if found:
            return proc, found[1]
    proc.kill()
    raise AssertionError(proc.stderr.read() if proc.stderr else "the server never said where it serves")


@contextmanager
def running(*args: str) -> Iterator[str]:
    """``python -m pausepoint ARGS`` as a server: yields what it printed up to "Ctrl+C stops the
    server.", then stops it with SIGINT and checks that it stopped cleanly (exit 0, "stopped")."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pausepoint", *args],
        cwd=ROOT,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        printed = []
        for line in proc.stdout:
            printed.append(line)
            if line.startswith("Ctrl+C"):
                break
        else:
            raise AssertionError("".join(printed) + proc.stderr.read())
        yield "".join(printed)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "stopped" in out and "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
