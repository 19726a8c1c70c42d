"""``pausepoint demo``: in the terminal, and served with the console and the REST API."""

from __future__ import annotations

import inspect
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import httpx
import pexpect
import pytest

from pausepoint.client import Client
from pausepoint.server import create_app
from tests.cli.conftest import ROOT, cli_env, running, spawn

HAS_CONSOLE = "console" in inspect.signature(create_app).parameters


def test_demo_in_the_terminal_on_the_scripted_model(tmp_path, terminals):
    child = spawn("demo", "--terminal", "--model", "scripted", "--db", str(tmp_path / "demo.db"))
    terminals.append(child)
    child.expect_exact("bankingAgent on the scripted stand-in model")
    child.expect_exact("you> ")
    child.sendline("Transfer $500 to savings.")
    child.expect_exact("paused: userApproval")
    child.expect_exact("choice> ")
    child.sendline("approve")
    child.expect_exact("approve “Transfer $500 to savings”? [y/N] ")
    child.sendline("yes")
    child.expect_exact("✓ transfer_money")
    child.expect_exact("agent> Transferred $500 to savings.")
    child.expect_exact("you> ")
    child.sendline("Transfer $20 to checking.")
    child.expect_exact("choice> ")
    child.sendline("deny")
    child.expect_exact("reason> ")
    child.sendline("not today")
    child.expect_exact("agent> I did not transfer anything: not today.")
    child.expect_exact("you> ")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (tmp_path / "demo.db").exists()


async def test_demo_serves_the_api_and_console_with_the_printed_token_and_stops_on_sigint(tmp_path):
    args = ["--model", "scripted", "--port", "0", "--no-open", "--db", str(tmp_path / "demo.db")]
    with running("demo", *args) as printed:
        match = re.search(r"API +(http://127\.0\.0\.1:\d+) +\(Authorization: Bearer (\S+);", printed)
        assert match, printed
        base, token = match[1], match[2]
        if HAS_CONSOLE:
            assert f"console  {base}/console/#token={token}" in printed

        async with Client(base, token=token) as client:
            chat = client.agent("bankingAgent").chat()
            res = await chat.send("Transfer $500 to savings.")
            [pause] = res.interrupts
            assert pause.name == "userApproval"
            res = await chat.resume(respond=[pause.respond({"approved": True})])
            assert res.text == "Transferred $500 to savings."
        async with httpx.AsyncClient() as http:
            refused = await http.get(f"{base}/v1/agents/bankingAgent/sessions")
            assert refused.status_code == 401
            if HAS_CONSOLE:
                console = await http.get(f"{base}/console/")
                assert console.status_code == 200 and "<html" in console.text.lower()


@pytest.mark.slow
def test_demo_in_the_terminal_on_the_default_local_model_which_decides_by_itself(tmp_path, terminals):
    # No --model and nothing steering it: Qwen2.5-Coder-1.5B greets, asks for approval, then transfers.
    pytest.importorskip("xllamacpp")
    db = str(tmp_path / "demo.db")
    child = spawn("demo", "--terminal", "--threads", "1", "--db", db, timeout=900)
    terminals.append(child)
    child.expect_exact("loaded local/qwen2.5-coder-1.5b in")
    child.expect_exact("bankingAgent on local/qwen2.5-coder-1.5b (Qwen2.5 Coder 1.5B Instruct GGUF (qwen2, Q4_K_M)")
    child.expect_exact("you> ")
    assert "GUIDED" not in child.before
    child.sendline("Hello!")
    child.expect(r"agent> \w")  # a greeting streams in: no tool, no pause
    child.expect_exact("you> ")
    assert "paused" not in child.before
    child.sendline("Transfer $500 to savings.")
    child.expect_exact("paused: userApproval")
    child.expect_exact("choice> ")
    assert "✓ transfer_money" not in child.before  # nothing moved before the approval (the card names it)
    child.sendline("a")
    child.expect_exact("[y/N] ")  # the demo's approvals are high risk
    child.sendline("y")
    child.expect_exact("✓ transfer_money")
    child.expect(r"agent> \S")  # the model's final text streams in
    child.expect_exact("you> ")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


@pytest.mark.slow
def test_demo_on_smollm2_is_guided_and_says_so(tmp_path, terminals):
    pytest.importorskip("xllamacpp")
    db = str(tmp_path / "demo.db")
    child = spawn("demo", "--terminal", "--model", "local/smollm2", "--threads", "1", "--db", db, timeout=600)
    terminals.append(child)
    child.expect_exact("bankingAgent on local/smollm2 (guided, local, offline)")
    child.expect_exact("GUIDED: SmolLM2-135M cannot decide when to ask for approval, so this demo picks each tool call")
    child.expect_exact("you> ")
    child.sendline("Transfer $500 to savings.")
    child.expect_exact("paused: userApproval")
    child.expect_exact("choice> ")
    child.sendline("a")
    child.expect_exact("[y/N] ")  # a transfer is high risk: the approval is confirmed
    child.sendline("y")
    # The yes grants the transfer the question described. When the small model's question does
    # not name exactly one transfer (it often does not), transfer_money's own requires_approval
    # pauses the call itself: the person approves the exact call, and only then does it run.
    if child.expect_exact(["✓ transfer_money", "paused: transfer_money"]) == 1:
        child.expect_exact("choice> ")
        child.sendline("a")
        child.expect_exact("[y/N] ")
        child.sendline("y")
        child.expect_exact("✓ transfer_money")
    child.expect(r"agent> \S")
    child.expect_exact("you> ")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


# -- issue 42: the first run, as a newcomer tries it --------------------------------------------------


def _readme_pipes() -> list[tuple[str, str]]:
    """The README's scripted runs: (what printf writes, the command it is piped into)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.findall(r"printf '([^']*)' \| ([^`\n]+)", text)
    assert found, "the README shows no scripted (piped) run"
    return [(data.encode().decode("unicode_escape"), command.strip()) for data, command in found]


@pytest.mark.parametrize("data,command", [pytest.param(d, c, id=" ".join(c.split()[:3])) for d, c in _readme_pipes()])
def test_the_readmes_piped_runs_work_as_written(data: str, command: str, tmp_path):
    from tests.docs.blocks import blocks

    for block in blocks(ROOT / "README.md"):  # the tutorial's myapp.py, as a reader saves it
        if block.directive == "file":
            (tmp_path / block.argument).write_text(block.code, encoding="utf-8")
    words = shlex.split(command)
    if words[:3] == ["python3", "dev.py", "demo"]:
        words = ["pausepoint", *words[2:]]  # dev.py runs `pausepoint demo` in its .venv
    assert words[0] == "pausepoint", command
    env = {k: v for k, v in cli_env().items() if k != "PYTHONPATH"} | {"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, "-m", "pausepoint", *words[1:]],
        input=data,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    asked = re.search(r"Transfer \$(\d+) to (\w+)", data)
    assert asked, data
    assert f"agent> Transferred ${asked[1]} to {asked[2]}." in done.stdout, done.stdout  # approved, and done


def _demo(db: Path, *args: str, data: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pausepoint", "demo", "--terminal", "--model", "scripted", "--db", str(db), *args],
        input=data,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=cli_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_new_demo_run_says_what_earlier_runs_left_open_and_offers_to_clear_it(tmp_path, terminals):
    db = tmp_path / "demo.db"
    first = _demo(db, data="Transfer $500 to savings.\ns\n")  # skipped: the pause stays open
    assert "left open" in first
    second = _demo(db, data="/quit\n")
    assert f"{db} holds 1 open pause from earlier runs" in second
    assert "“Transfer $500 to savings” (session " in second
    assert "Start with --fresh to clear them" in second

    child = spawn("demo", "--terminal", "--model", "scripted", "--db", str(db))  # on a terminal: asked
    terminals.append(child)
    child.expect_exact("holds 1 open pause from earlier runs")
    child.expect_exact("Clear them? They are recorded as cancelled, and nothing of them runs. [y/N] ")
    child.sendline("")
    child.expect_exact("Kept: they wait in the inbox.")
    child.expect_exact("you> ")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    child = spawn("demo", "--terminal", "--model", "scripted", "--db", str(db))  # Ctrl+D at the question: no
    terminals.append(child)
    child.expect_exact("[y/N] ")
    child.sendeof()
    child.expect_exact("Kept: they wait in the inbox.")
    child.expect_exact("you> ")
    child.sendline("/quit")
    child.expect(pexpect.EOF)

    third = _demo(db, "--fresh", data="/quit\n")
    assert "Cleared 1 open pause (recorded as cancelled: cleared when a new demo started)." in third
    fourth = _demo(db, data="/quit\n")
    assert "open pause" not in fourth  # a clean start


def test_a_piped_a_without_its_y_says_what_the_script_must_send(tmp_path):
    out = _demo(tmp_path / "demo.db", data="Transfer $500 to savings.\na\n")
    assert "not approved: a high-risk approval needs y on the line after a" in out
    assert "Transferred" not in out


def test_the_session_a_terminal_demo_names_is_continued_as_it_says(tmp_path):
    """The end of a terminal demo says how to continue its session: that works (found by a probe:
    it named a --session flag the demo did not have)."""
    db = tmp_path / "demo.db"
    first = _demo(db, data="Hello!\n")
    said = re.search(r"session (\w+): continue it with --session (\w+)", first)
    assert said and said[1] == said[2], first
    again = _demo(db, "--session", said[1], data="Hello again!\n")
    assert f"continuing session {said[1]}" in again
    assert again.count("agent> ") == 1  # the earlier turn is not replayed as new
    done = subprocess.run(
        [sys.executable, "-m", "pausepoint", "demo", "--model", "scripted", "--db", str(db), "--session", said[1]],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=cli_env(),
        timeout=120,
    )
    assert done.returncode == 2 and "--session continues a chat in the terminal" in done.stderr
