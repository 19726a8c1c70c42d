"""Every code block of the README and docs/ runs as written.

One test per page. The page's blocks run in order, each in a process of its own, in a fresh
working folder that already holds the README's and the page's ``file`` blocks (the README's
tutorial is ``myapp.py``; see ``blocks.py`` for the directives). Cloud keys are removed from
the environment: what a block needs offline it must say itself.

``python`` blocks run as ``python block.py``. In ``bash`` blocks, each ``pausepoint`` command
runs: a server (``serve``, ``demo`` without ``--terminal``) until it says it is ready (on a free
port: ``--port`` is replaced by ``--port 0``), then stopped; any other command with its input
closed, and it must exit 0. ``demo`` on the local model (no ``--model scripted``) is not run
here (tests/cli and tests/console run it); other shell lines (``pip``, ``python3 dev.py``)
are not run. A failure names the page and line of its block.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .blocks import ROOT, Block, blocks, pages

CLOUD_KEYS = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")
TIMEOUT = 120
PAUSEPOINT = shutil.which("pausepoint", path=str(Path(sys.executable).parent)) or "pausepoint"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLOUD_KEYS}
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONPATH", None)  # a reader's folder: only what is installed, and the files the docs made
    return env


def _commands(block: Block) -> list[str]:
    """The shell commands of a bash block: continuation lines joined, comments dropped."""
    commands: list[str] = []
    pending = ""
    for raw in block.code.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        words = shlex.split(line, comments=True)
        if words:
            commands.append(shlex.join(words))
    return commands


@contextlib.contextmanager
def _serving(words: list[str], cwd: Path, where: str) -> Iterator[str]:
    """Run a server command until the block is done; yields its URL. Raises ``Failed`` if it
    does not say it is ready."""
    if "--port" in words:
        words[words.index("--port") + 1] = "0"
    else:
        words += ["--port", "0"]
    if words[1] == "demo":
        words += ["--no-open"] if "--no-open" not in words else []
    process = subprocess.Popen(
        [PAUSEPOINT, *words[1:]], cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    output: list[str] = []
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + TIMEOUT
        for line in process.stdout:  # the server prints this line once it listens
            output.append(line)
            if "Ctrl+C stops the server." in line or time.monotonic() > deadline:
                break
        urls = re.findall(r"(http://[\w.:]+)", "".join(output))
        if not any("Ctrl+C stops the server." in line for line in output) or not urls:
            raise Failed(f"{where}: `{shlex.join(words)}` did not start:\n{''.join(output)}")
        yield urls[0]
    finally:
        process.terminate()
        process.wait(timeout=30)


class Failed(Exception):
    """A block did not run as written (the message names its page and line)."""


def _run_server(words: list[str], cwd: Path, where: str) -> str | None:
    """Start a server command, wait for it to say it is ready, stop it. A problem, or None."""
    try:
        with _serving(words, cwd, where):
            return None
    except Failed as exc:
        return str(exc)


def _run_shell(block: Block, cwd: Path) -> list[str]:
    problems: list[str] = []
    for command in _commands(block):
        words = shlex.split(command)
        if words[0] != "pausepoint" or len(words) < 2:
            continue  # pip, python3 dev.py, uvicorn: not run here
        if words[1] == "demo" and ("--model" not in words or words[words.index("--model") + 1] != "scripted"):
            continue  # the local model: tests/cli and tests/console run it
        if any("<" in word for word in words):
            continue  # a placeholder to fill in (<id>)
        # A server listening on a port runs until it says it is ready; anything else (the
        # terminal, MCP over stdin/stdout: stdin is empty, so it ends at once) runs to its end.
        if words[1] in ("serve", "demo") and "--terminal" not in words and "--mcp-stdio" not in words:
            problem = _run_server(words, cwd, block.where)
        else:
            done = subprocess.run(
                [PAUSEPOINT, *words[1:]],
                cwd=cwd,
                env=_env(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
            )
            problem = (
                None
                if done.returncode == 0
                else f"{block.where}: `{command}` exited {done.returncode}:\n{done.stdout}{done.stderr}"
            )
        if problem is not None:
            problems.append(problem)
    return problems


def _run_python(block: Block, cwd: Path) -> str | None:
    if block.directive == "server":
        try:
            with _serving(["pausepoint", "serve", *shlex.split(block.argument)], cwd, block.where) as url:
                return _run_script(block, cwd, {"PAUSEPOINT_URL": url})
        except Failed as exc:
            return str(exc)
    return _run_script(block, cwd, {})


def _run_script(block: Block, cwd: Path, extra_env: dict[str, str]) -> str | None:
    name = block.argument if block.directive == "file" else f"block_{block.line}.py"
    script = cwd / name
    if block.directive != "file":
        script.write_text(block.code, encoding="utf-8")
    try:
        done = subprocess.run(
            [sys.executable, name], cwd=cwd, env=_env() | extra_env, capture_output=True, text=True, timeout=TIMEOUT
        )
    except subprocess.TimeoutExpired:
        return f"{block.where}: did not finish in {TIMEOUT} s"
    if done.returncode != 0:
        return f"{block.where}: exited {done.returncode}\n{done.stdout}{done.stderr}"
    return None


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_block_of_the_page_runs(page: Path, tmp_path: Path) -> None:
    readme = blocks(ROOT / "README.md")
    own = blocks(page)
    for block in [*readme, *own]:
        if block.directive == "file":
            (tmp_path / block.argument).write_text(block.code, encoding="utf-8")
    problems: list[str] = []
    for block in own:
        if block.directive == "illustrative":
            continue
        if block.directive == "needs" and not os.environ.get(block.argument):
            continue
        if block.language == "python":
            problem = _run_python(block, tmp_path)
            problems += [problem] if problem else []
        elif block.language in ("bash", "sh"):
            problems += _run_shell(block, tmp_path)
    assert not problems, "\n\n".join(problems)


def test_illustrative_blocks_are_few() -> None:
    """A sketch that is not run can rot: keep them rare, and say so in the page."""
    sketches = [b.where for page in pages() for b in blocks(page) if b.directive == "illustrative"]
    python = [b for page in pages() for b in blocks(page) if b.language == "python"]
    assert len(sketches) <= max(3, len(python) // 6), sketches


def test_directives_are_read() -> None:
    """The directives parse, and name files that make sense (a typo would silently skip a block)."""
    for page in pages():
        for block in blocks(page):
            if block.directive == "file":
                assert re.fullmatch(r"[\w./-]+\.py", block.argument), block.where
            if block.directive == "needs":
                assert re.fullmatch(r"[A-Z_]+", block.argument), block.where
