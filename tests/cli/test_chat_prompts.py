"""``pausepoint chat`` at its edges: Ctrl+C at a prompt, what cannot work (a model without its
key, a store that cannot be reached, an app without agents, a port that is not one) refused
before any prompt, a denial without a reason, and the shape an answer must have."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pexpect
import pytest

from pausepoint.cli import main
from pausepoint.stores import SqliteSessionStore
from tests.cli.conftest import ROOT, cli_env, spawn

BANK = "tests.cli.apps:bank_agent"


def chat(*args: str, stdin: str = "Hello\n") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pausepoint", "chat", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=cli_env(),
        timeout=120,
    )


# -- Ctrl+C ------------------------------------------------------------------------------------


@pytest.mark.parametrize("prompt", ["you> ", "choice> ", "answer JSON> ", "reason> "])
def test_ctrl_c_at_a_prompt_exits_at_once(prompt, tmp_path, terminals):
    child = spawn("chat", BANK, "--db", str(tmp_path / "chat.db"))
    terminals.append(child)
    child.expect_exact("you> ")
    if prompt != "you> ":
        child.sendline("Transfer $500 to savings.")
        child.expect_exact("choice> ")
        if prompt != "choice> ":
            child.sendline({"answer JSON> ": "r", "reason> ": "d"}[prompt])
            child.expect_exact(prompt)
    child.sendintr()  # nothing typed after it: no Enter is needed to leave
    child.expect(pexpect.EOF, timeout=30)
    child.close()
    assert child.exitstatus == 130
    if prompt == "you> ":
        assert "--session" not in child.before  # nothing was written
    else:
        assert "continue it with --session" in child.before  # the pause waits in the file
    assert "Traceback" not in child.before


# -- refused before any prompt -------------------------------------------------------------------


def test_a_cloud_model_without_its_key_exits_2_before_prompting():
    done = chat("tests.cli.apps:cloud_agent")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pausepoint chat: error: the model openai/gpt-4o-mini cannot be used" in done.stderr
    assert "OPENAI_API_KEY" in done.stderr
    assert "you>" not in done.stdout and "--session" not in done.stdout


@pytest.mark.parametrize("url", ["postgresql://user:pw@127.0.0.1:1/db", "redis://127.0.0.1:1/0"])
def test_a_store_that_cannot_be_reached_exits_2_before_prompting(url):
    done = chat(BANK, "--store", url)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pausepoint chat: error: the session store cannot be used" in done.stderr
    assert "you>" not in done.stdout and "--session" not in done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["chat", BANK, "--db", ""], "pausepoint chat: error: --db is empty: give a SQLite file's path"),
        (["chat", BANK, "--db", ":memory:"], "pausepoint chat: error: --db ':memory:' is a database that ends"),
        (["demo", "--terminal", "--model", "scripted", "--db", ""], "pausepoint demo: error: --db is empty"),
        (["demo", "--terminal", "--model", "scripted", "--db", ":memory:"], "pausepoint demo: error: --db ':memory:'"),
        (["demo", "--terminal", "--model", "scripted", "--session", "a b"],
         "pausepoint demo: error: session id 'a b' is not valid: 1 to 128 characters"),
    ],
)  # fmt: skip
def test_a_db_or_session_nothing_could_continue_is_refused_before_anything_is_printed(argv, said, tmp_path):
    """Found by a probe: ``--db ''`` (an unset variable) ran the chat on the agent's own store, and
    the demo on a database gone at its end, which offered a ``--session`` that then failed; the
    demo's ``--session 'a b'`` said "no session" after its banner, where chat says why."""
    done = subprocess.run(
        [sys.executable, "-m", "pausepoint", *argv], input="Hello\n", capture_output=True, text=True,
        cwd=tmp_path, env={**cli_env(), "PYTHONPATH": str(ROOT)}, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(said) and done.stderr.count("\n") == 1, done.stderr
    assert done.stdout == "" and not list(tmp_path.iterdir())  # no banner, no prompt, no file


@pytest.mark.parametrize(
    ("user", "logname", "said"),
    [
        ("bad\nname", "bad\nname", "your user name (from $LOGNAME) names who you are by default: 'bad\\nname' is not"),
        ("u" * 129, "", "your user name (from $USER) names who you are by default: 'uuu"),
    ],
)
def test_a_user_name_no_session_could_record_is_refused_as_principal_is(user, logname, said):
    """Found by a probe: ``--principal`` was checked up front, the default (your user name) not:
    the chat started and refused every message after it ("the message's sender cannot be
    recorded"), and exited 0."""
    done = subprocess.run(
        [sys.executable, "-m", "pausepoint", "chat", BANK, "--store", "memory:"], input="Hello\n",
        capture_output=True, text=True, cwd=ROOT, env={**cli_env(), "USER": user, "LOGNAME": logname}, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"pausepoint chat: error: {said}" in done.stderr, done.stderr
    assert done.stderr.rstrip().endswith("say who you are with --principal NAME") and done.stdout == ""
    with_flag = subprocess.run(
        [sys.executable, "-m", "pausepoint", "chat", BANK, "--store", "memory:", "--principal", "alice"],
        input="Hello\n", capture_output=True, text=True, cwd=ROOT, env={**cli_env(), "USER": user}, timeout=60,
    )  # fmt: skip
    assert with_flag.returncode == 0 and "agent> " in with_flag.stdout, with_flag.stderr


def test_a_failed_turn_does_not_offer_a_session_that_was_never_written():
    done = chat("tests.cli.apps:failing_agent")
    assert done.returncode == 0, done.stderr
    assert "error: the model is down for maintenance" in done.stdout
    assert "--session" not in done.stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["chat", "tests.cli.apps:empty_ai"], "the app defines no agents: define one with ai.define_agent"),
        (["chat", "tests.cli.apps:empty_ai", "--agent", "bank"], "the app defines no agents"),
        (["demo", "--model", "scripted", "--port", "80000"], "argument --port: 80000 is not a port: use 1-65535"),
        (["demo", "--model", "scripted", "--port", "-1"], "argument --port: -1 is not a port"),
        (["serve", "tests.cli.apps:bank_ai", "--port", "65536"], "argument --port: 65536 is not a port"),
    ],
)
def test_what_cannot_work_exits_2_with_a_clear_message(argv, message, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's own errors
        status = exit_.code
    assert status == 2
    err = capsys.readouterr().err
    assert message in err
    assert "pick one with --agent ()" not in err


# -- answering ---------------------------------------------------------------------------------


def test_a_denial_needs_a_reason(tmp_path, terminals):
    child = spawn("chat", BANK, "--db", str(tmp_path / "chat.db"))
    terminals.append(child)
    child.expect_exact("you> ")
    child.sendline("Transfer $90 to checking.")
    child.expect_exact("choice> ")
    child.sendline("d")
    for empty in ("", "   "):
        child.expect_exact("reason> ")
        child.sendline(empty)
        child.expect_exact("a denial needs a reason: the model is told it")
    child.expect_exact("reason> ")
    child.sendline("over budget")
    child.expect_exact("agent> I did not transfer anything: over budget.")
    child.expect_exact("you> ")
    child.sendline("/quit")
    child.expect(pexpect.EOF)


def test_respond_shows_the_expected_shape_first(tmp_path, terminals):
    child = spawn("chat", BANK, "--db", str(tmp_path / "chat.db"))
    terminals.append(child)
    child.expect_exact("you> ")
    child.sendline("Transfer $7 to alice.")
    child.expect_exact("choice> ")
    child.sendline("r")
    child.expect_exact('expected: {"approved": boolean, "feedback"?: string}')
    child.expect_exact("answer JSON> ")
    child.sendline('{"approved": false, "feedback": "not now"}')
    child.expect_exact("[y/N] ")  # a transfer is high risk: the answer is confirmed
    child.sendline("n")
    child.expect_exact("not decided")
    child.expect_exact("choice> ")  # nothing decided: asked again
    child.sendline("r")
    child.expect_exact("answer JSON> ")
    child.sendline('{"approved": false, "feedback": "not now"}')
    child.expect_exact("[y/N] ")
    child.sendline("y")
    child.expect_exact("agent> I did not transfer anything: not now.")
    child.expect_exact("you> ")
    child.sendline("/quit")
    child.expect(pexpect.EOF)


async def _sessions_in(db):
    store = SqliteSessionStore(db)
    try:
        return await store.list_sessions()
    finally:
        await store.close()


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGHUP"])
def test_sigterm_or_a_closed_terminal_while_a_tool_runs_stops_as_ctrl_c_does(stop, tmp_path, terminals):
    """Found by a probe: the process died of the signal with the call left "running in another
    process" for abandon_after (15 min): the session refused every message meanwhile."""
    import signal

    db = tmp_path / "chat.db"
    child = spawn("chat", "tests.cli.apps:slow_ai", "--db", str(db))
    terminals.append(child)
    child.expect_exact("you> ")
    child.sendline("wait, please")
    child.expect_exact("wait_a_minute")
    child.kill(getattr(signal, stop))
    child.expect(pexpect.EOF, timeout=30)
    child.close()
    assert child.exitstatus == 130 and "Traceback" not in child.before
    [session] = asyncio.run(_sessions_in(db))
    # the way back is said, cut short in the first turn too (found by a probe: it was not)
    assert f"continue it with --session {session.session_id}" in child.before
    again = chat("tests.cli.apps:slow_ai", "--db", str(db), "--session", session.session_id, stdin="hello\n")
    assert again.returncode == 0, again.stderr
    assert "its last turn ended aborted" in again.stdout  # said on the way in
    assert "Noted: it may or may not have finished." in again.stdout  # taken at once, not refused


def test_a_reader_that_goes_away_ends_the_chat_without_a_traceback():
    """``pausepoint chat ... | head -1`` (found by a probe: BrokenPipeError, a traceback)."""
    command = f"{sys.executable} -m pausepoint chat {BANK} --store memory: | head -1"
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command], input="Hello\n" * 200, capture_output=True, text=True,
        cwd=ROOT, env=cli_env(), timeout=60,
    )  # fmt: skip
    assert done.stdout.startswith("you> Hello") and "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1  # the chat's status: it could not say all it had to


@pytest.mark.parametrize(
    ("app", "lines", "done"),
    [
        (BANK, 'Transfer $6 to bob.\nr\n{"approved": 5}\n{"approved": true}\ny\n', "agent> Transferred $6 to bob."),
        ("tests.cli.apps:shell_ai", 'Run: rm -rf build/\ne\n{"command": 5}\n{"command": "ls"}\n',
         "(simulated) ran 'ls'"),
    ],
)  # fmt: skip
def test_json_the_schema_refuses_is_asked_for_again_not_read_as_a_choice(app, lines, done):
    """Found by a probe: after "refused: ...; try again" the chat went back to choice>, so the
    corrected JSON a script sent next was read as a choice and the pause was left open."""
    out = chat(app, "--store", "memory:", stdin=lines).stdout
    assert "refused: " in out and "; try again" in out, out
    assert "type one of" not in out and "left open" not in out, out
    assert done in out, out


def test_messages_given_with_m_are_shown_and_one_not_sent_is_named():
    """Found by a probe: ``-m`` messages were not in the transcript, and one that could not go
    (a pause left open) was dropped without a word."""
    done = chat("tests.cli.apps:shell_agent", "--store", "memory:", "-m", "Run: rm -rf build/", "-m", "Run: ls",
                stdin="s\n")  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "you> Run: rm -rf build/\n" in out and out.index("you> Run: rm -rf build/") < out.index("paused: run_shell")
    assert "you> Run: ls\n" in out, out
    assert "Some pauses are still open, so “Run: ls” was not sent: /pending answers them" in out, out
