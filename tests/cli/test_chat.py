"""``pausepoint chat``: a pause shown as a card and answered from the keyboard, in a pseudo-terminal."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pexpect
import pytest

from examples import banking
from pausepoint.stores import SqliteSessionStore
from tests.approval_apps import build as build_bank
from tests.approval_apps import treasury
from tests.cli.conftest import ROOT, cli_env, spawn

BANK = "tests.cli.apps:bank_agent"


def session_of(output: str) -> str:
    match = re.search(r"--session (\S+)", output)
    assert match, output
    return match[1]


async def recorded(db: str, session_id: str) -> tuple[list[str], list[tuple[str, str | None, str]]]:
    """The ledger-free view of what the chat wrote: the model's texts and the audit trail."""
    store = SqliteSessionStore(db)
    _, agent = banking.build(store)
    chat = agent.chat(session_id)
    texts = [m.text for m in await chat.history() if m.role == "model" and m.text]
    audit = [(e.decision, e.reason, e.via) for e in await chat.audit_trail()]
    await store.close()
    return texts, audit


async def test_approve_from_the_keyboard_runs_the_transfer(tmp_path, terminals):
    db = str(tmp_path / "chat.db")
    child = spawn("chat", BANK, "--db", db, "--principal", "carol")
    terminals.append(child)
    child.expect_exact("you> ")
    child.sendline("Transfer $500 to savings.")
    child.expect_exact("paused: userApproval")
    child.expect_exact("Transfer $500 to savings")  # the title the console shows too
    child.expect_exact("The agent asks before it runs transfer_money.")
    child.expect_exact("high risk: approving asks you to confirm")
    child.expect_exact('"details": "Transfer $500 to savings"')  # the input, as pretty JSON
    child.expect_exact("[a]pprove  [d]eny  [r]espond with JSON  [s]kip")
    child.expect_exact("choice> ")
    child.sendline("and thanks")  # a sentence is not a choice, whatever letter it starts with
    child.expect_exact("type one of: [a]pprove")
    child.expect_exact("choice> ")
    child.sendline("a")
    child.expect_exact("approve “Transfer $500 to savings”? [y/N] ")
    child.sendline("no")
    child.expect_exact("not approved")
    child.expect_exact("choice> ")
    child.sendline("a")
    child.expect_exact("[y/N] ")
    child.sendline("y")
    child.expect_exact("✓ transfer_money")
    child.expect(r"agent> Transferred \$500 to savings\.")
    child.expect_exact("you> ")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0

    texts, audit = await recorded(db, session_of(child.before))
    assert texts[-1] == "Transferred $500 to savings."
    assert audit == [
        ("message", None, "terminal"),
        ("respond", None, "terminal"),
        ("grant", None, "terminal"),  # the yes grants the one transfer it asked about ...
        ("approve", None, "policy"),  # ... and the transfer runs on that grant (granted by an unnamed caller)
    ]


async def test_deny_with_a_reason_the_model_sees(tmp_path, terminals):
    db = str(tmp_path / "chat.db")
    child = spawn("chat", BANK, "--db", db)
    terminals.append(child)
    child.expect_exact("you> ")
    child.sendline("Transfer $90 to checking.")
    child.expect_exact("paused: userApproval")
    child.expect_exact("choice> ")
    child.sendline("d")
    child.expect_exact("reason> ")
    child.sendline("over budget this month")
    child.expect_exact("agent> I did not transfer anything: over budget this month.")
    child.expect_exact("you> ")
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0

    texts, audit = await recorded(db, session_of(child.before))
    assert "transfer_money" not in str(texts) and texts[-1] == "I did not transfer anything: over budget this month."
    assert audit == [("message", None, "terminal"), ("deny", "over budget this month", "terminal")]


async def test_respond_with_json_over_several_lines_after_a_typo(tmp_path, terminals):
    child = spawn("chat", BANK, "--db", str(tmp_path / "chat.db"))
    terminals.append(child)
    child.expect_exact("you> ")
    child.sendline("Transfer $7 to alice.")
    child.expect_exact("choice> ")
    child.sendline("r")
    child.expect_exact("answer JSON> ")
    child.sendline("{approved: no}")
    child.expect_exact("not JSON")
    child.expect_exact("answer JSON> ")
    child.sendline('{"approved": false,')
    child.expect_exact("... ")
    child.sendline(' "feedback": "ask Bob first"}')
    # every decision on a high-risk pause is confirmed, an answer too (found by a probe: only
    # approving asked, so a pasted JSON line decided a transfer)
    child.expect_exact("answer “Transfer $7 to alice”? [y/N] ")
    child.sendline("y")
    child.expect_exact("agent> I did not transfer anything: ask Bob first.")
    child.expect_exact("you> ")
    child.sendline("/quit")
    child.expect(pexpect.EOF)


async def test_an_invalid_answer_is_refused_and_asked_again(tmp_path, terminals):
    child = spawn("chat", BANK, "--db", str(tmp_path / "chat.db"))
    terminals.append(child)
    child.expect_exact("you> ")
    child.sendline("Transfer $7 to alice.")
    child.expect_exact("choice> ")
    child.sendline("r")
    child.expect_exact("answer JSON> ")
    child.sendline('{"approved": "maybe"}')  # not the output schema: refused at once, nothing written
    child.expect_exact("refused: approved: Input should be a valid boolean")
    child.expect_exact("answer JSON> ")  # the JSON asked again, as after malformed JSON (found by a probe)
    child.sendline("")  # an empty line: back to the choices, for the same pause
    child.expect_exact("choice> ")
    child.sendline("a")
    child.expect_exact("[y/N] ")
    child.sendline("y")
    child.expect_exact("agent> Transferred $7 to alice.")


async def test_edit_input_only_where_the_tool_allows_it(tmp_path, terminals):
    child = spawn("chat", "tests.cli.apps:shell_ai", "--db", str(tmp_path / "chat.db"))
    terminals.append(child)
    child.expect_exact("you> ")
    child.sendline("Run: rm -rf build/")
    child.expect_exact("paused: run_shell")
    child.expect_exact('"reason": "The command can modify files."')  # the metadata
    child.expect_exact("[a]pprove  [d]eny  [r]espond with JSON  [e]dit input  [s]kip")
    child.sendline("e")
    child.expect_exact('current input: {"command": "rm -rf build/"}')
    child.expect_exact("new input JSON> ")
    child.sendline("null")  # no input: refused, asked again (found by a probe: the call ran as it was)
    child.expect_exact("null is no input")
    child.expect_exact("new input JSON> ")  # the input again, not the choice (found by a probe)
    # An edit approves the edited input, as the console's does: a risky command edited runs at
    # once, rather than pausing again for a second yes (found by a probe).
    child.sendline('{"command": "rm -rf dist/"}')
    child.expect_exact("✓ run_shell")
    child.expect_exact("agent> Result: {'stdout': \"(simulated) ran 'rm -rf dist/'\"")
    child.expect_exact("you> ")
    child.sendline("/quit")
    child.expect(pexpect.EOF)


async def test_skip_leaves_the_pause_open_for_a_later_session(tmp_path, terminals):
    db = str(tmp_path / "chat.db")
    child = spawn("chat", "tests.cli.apps:shell_agent", "--db", db)
    terminals.append(child)
    child.expect_exact("you> ")
    child.sendline("Run: rm -rf build/")
    child.expect_exact("choice> ")
    child.sendline("s")
    child.expect_exact("left open")
    child.expect_exact("you> ")
    child.sendline("Run: ls")
    child.expect_exact("Some pauses are still open")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    session = session_of(child.before)

    child = spawn("chat", "tests.cli.apps:shell_agent", "--db", db, "--session", session)
    terminals.append(child)
    child.expect_exact(f"continuing session {session}")
    child.expect_exact("paused: run_shell")
    child.expect_exact("choice> ")
    child.sendline("a")  # a self-pausing tool: approve = restart with tool_approved
    child.expect_exact("agent> Result: {'stdout': \"(simulated) ran 'rm -rf build/'\"")
    child.expect_exact("you> ")
    child.sendline("/quit")
    child.expect(pexpect.EOF)


def test_json_no_reader_could_read_is_refused_and_asked_again(tmp_path):
    """An integer of over 4,300 digits, nesting deeper than a parser goes: refused and asked
    again as the server refuses them (found by a probe: the chat died with a traceback)."""
    huge = '{"approved": false, "feedback": "x", "n": ' + "1" * 5000 + "}"
    deep = "[" * 3000 + "]" * 3000
    twice = '{"approved": true, "feedback": "go", "approved": false}'  # every HTTP surface refuses it (a probe)
    answer = '{"approved": false, "feedback": "ask Bob first"}'
    lines = f"Transfer $7 to alice.\nr\n{huge}\n{deep}\n{twice}\n{answer}\ny\n"
    done = subprocess.run(
        [sys.executable, "-m", "pausepoint", "chat", BANK, "--db", str(tmp_path / "chat.db")],
        input=lines, capture_output=True, text=True, cwd=ROOT, env=cli_env(), timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "not JSON this chat can read: an integer of over 4,300 digits; try again" in done.stdout
    assert "not JSON this chat can read: nested too deeply to read; try again" in done.stdout
    assert "not JSON this chat can read: the name 'approved' is given twice in one object; try again" in done.stdout
    assert "agent> I did not transfer anything: ask Bob first." in done.stdout


def test_scripted_from_a_pipe_without_a_terminal(tmp_path):
    lines = "Transfer $500 to savings.\na\ny\nTransfer $3 to bob.\nd\nno\n"
    done = subprocess.run(
        [sys.executable, "-m", "pausepoint", "chat", BANK, "--db", str(tmp_path / "chat.db")],
        input=lines,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=cli_env(),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.count("paused: userApproval") == 2
    assert "agent> Transferred $500 to savings." in out
    assert "agent> I did not transfer anything: no." in out
    assert "\x1b" not in out  # no spinner or colours when not on a terminal


def test_an_expired_pause_is_settled_not_offered(tmp_path):
    """Found by a probe: a pause whose time ran out (not yet settled) was offered with [a]pprove,
    refused, and offered again."""

    def chat(lines: str, *session: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "pausepoint", "chat", "tests.cli.apps:quick_agent", "--db", db, *session],
            input=lines, capture_output=True, text=True, cwd=ROOT, env=cli_env(), timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    db = str(tmp_path / "chat.db")
    first = chat("go\ns\ns\n")
    assert "paused: hold" in first and "paused: note" in first
    # its deadline as every surface writes a time (found by a probe: "2026-12-07 01:38:14+00:00")
    assert re.search(r"expires \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d): ", first), first
    time.sleep(1.2)  # hold's pause expires
    again = chat("s\n/quit\n", "--session", session_of(first))
    assert "a pause expired unanswered: the agent's expiry policy settled it" in again, again
    assert "paused: hold" not in again and "paused: note" in again and "refused" not in again


def test_a_session_kept_in_memory_is_not_offered_to_be_continued(tmp_path):
    """``--store memory:`` keeps nothing past the process: no "continue it with --session" for
    a session that is gone (found by a probe); a file's session is offered."""
    said = {}
    for store in ("memory:", f"sqlite:///{tmp_path / 'chat.db'}"):
        done = subprocess.run(
            [sys.executable, "-m", "pausepoint", "chat", BANK, "--store", store],
            input="Hello\n", capture_output=True, text=True, cwd=ROOT, env=cli_env(), timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        said[store.split(":")[0]] = done.stdout + done.stderr
    assert "continue it with --session" not in said["memory"]
    assert "continue it with --session" in said["sqlite"]


@pytest.mark.parametrize(
    ("session", "said"),
    [
        ("nope", "no session 'nope'"),
        # One no session can have: why (found by a probe: "no session", as for an unknown one).
        ("bad/id", "session id 'bad/id' is not valid: 1 to 128 characters, letters, digits and . _ : @ -"),
    ],
)
def test_an_unknown_or_invalid_session_is_a_clear_error(tmp_path, session, said):
    done = subprocess.run(
        [sys.executable, "-m", "pausepoint", "chat", BANK, "--db", str(tmp_path / "x.db"), "--session", session],
        input="",
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=cli_env(),
        timeout=60,
    )
    assert done.returncode == 2
    assert f"pausepoint chat: error: {said}" in done.stderr


def _quit(child: pexpect.spawn) -> str:
    child.expect_exact("you> ")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    return str(child.before)


async def test_a_quorum_is_approved_from_two_terminals_and_shows_its_progress(tmp_path, terminals):
    """dave asks; alice approves (1 of 2: she is told who is left, and not asked again); bob,
    in another process on the same file, sees alice's approval and runs the transfer."""
    db = str(tmp_path / "chat.db")
    asker = spawn("chat", "tests.cli.apps:quorum_agent", "--db", db, "--principal", "dave")
    terminals.append(asker)
    asker.expect_exact("you> ")
    asker.sendline("pay 500 to savings")
    asker.expect_exact("paused: transfer_money")
    asker.expect_exact("approval 0 of 2 approvals")
    asker.expect_exact("Waiting for 2 more approvals from treasury (alice, bob or carol).")
    asker.expect_exact("Approving this call takes treasury, which you do not hold.\r\n└─ [s]kip")  # an auditor
    asker.sendline("s")
    session = session_of(_quit(asker))

    alice = spawn("chat", "tests.cli.apps:quorum_agent", "--db", db, "--principal", "alice", "--session", session)
    terminals.append(alice)
    alice.expect_exact("approval 0 of 2 approvals")
    alice.expect_exact("└─ [a]pprove  [d]eny  [s]kip\r\nchoice> ")  # a call paused for approval: no made-up result
    alice.sendline("a")
    alice.expect_exact("transfer_money (")
    alice.expect_exact("): 1 of 2 approvals. Waiting for 1 more approval from treasury (bob or carol).")
    alice.expect_exact("you> ")
    assert "approvals. Waiting" not in alice.before  # said once (found by a probe: twice)
    alice.sendline("/quit")
    alice.expect(pexpect.EOF)

    bob = spawn("chat", "tests.cli.apps:quorum_agent", "--db", db, "--principal", "bob", "--session", session)
    terminals.append(bob)
    bob.expect_exact("approval 1 of 2 approvals (approved by alice)")
    bob.expect_exact("choice> ")
    bob.sendline("approve")
    bob.expect_exact("agent> sent 500 to savings")
    _quit(bob)

    store = SqliteSessionStore(db)
    agent, _, _ = build_bank(store, treasury(quorum={"transfer_money": 2}))
    trail = await agent.chat(session).audit_trail()
    await store.close()
    assert [(e.decision, e.principal, e.via, e.approvals) for e in trail[1:]] == [
        ("approve", "alice", "terminal", 1),
        ("approve", "bob", "terminal", 2),
    ]


async def test_grant_for_this_session_from_the_terminal(tmp_path, terminals):
    db = str(tmp_path / "chat.db")
    asker = spawn("chat", "tests.cli.apps:grant_agent", "--db", db, "--principal", "dave")
    terminals.append(asker)
    asker.expect_exact("you> ")
    asker.sendline("pay 500 to savings")
    asker.expect_exact("not from dave, who asked for it.")
    asker.expect_exact("An approval may also approve later calls of transfer_money in this session.")
    # dave, an auditor who asked for it, may not approve it (nor deny it): offered none, as in the console
    asker.expect_exact("You asked for this call: someone else approves it.\r\n└─ [s]kip")
    asker.sendline("g")
    asker.expect_exact("type one of: [s]kip")
    asker.sendline("s")
    session = session_of(_quit(asker))

    alice = spawn("chat", "tests.cli.apps:grant_agent", "--db", db, "--principal", "alice", "--session", session)
    terminals.append(alice)
    alice.expect_exact("[a]pprove  [g]rant: approve for this session  [d]eny  [s]kip")
    alice.sendline("grant")
    alice.expect_exact("agent> sent 500 to savings")
    _quit(alice)

    store = SqliteSessionStore(db)
    agent, _, _ = build_bank(store, treasury(grantable=["transfer_money"], separation_of_duties=True))
    chat = agent.chat(session, principal="dave")
    assert (await chat.send("pay 20 to x")).text == "sent 20 to x"  # approved by alice's grant
    [grant] = await chat.grants()
    await store.close()
    assert (grant.principal, grant.via, grant.bounds, grant.used) == ("alice", "terminal", None, 1)


def chat_with_app(tmp_path, source: str, lines: str, *, own_store: bool = False) -> subprocess.CompletedProcess[str]:
    """``pausepoint chat`` on the app ``source`` (its ``agent``; on ``chat.db``, or on the agent's
    own store), fed ``lines``; it must end well."""
    (tmp_path / "chat_app.py").write_text(source)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pausepoint",
            "chat",
            "chat_app:agent",
            *([] if own_store else ["--db", str(tmp_path / "chat.db")]),
        ],
        input=lines,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**cli_env(), "PYTHONPATH": f"{tmp_path}:{ROOT}"},
        timeout=60,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return done


HOSTILE_APP = """
from pausepoint import Pausepoint
from pausepoint.testing import ScriptedModel, tool_call

ai = Pausepoint()

@ai.tool()
def report(to: str) -> str:
    \"\"\"A report whose text came from somewhere else.\"\"\"
    return "ok\\x1b[2J\\x9b31m \\u202eevil"

SAID = "Done.\\x1b[1A\\x1b[2K\\ryou> approve\\x07\\x1b]52;c;ZXZpbA==\\x07 sent to gnivas\\u202e."
CALL = tool_call("report", {"to": "evil\\u202egnivas"})
agent = ai.define_agent(name="hostile", model=ScriptedModel([[CALL], SAID]), tools=[report])
"""


def test_model_text_and_tool_output_cannot_drive_the_terminal(tmp_path):
    """A model's text or a tool's output written as it is could clear the screen, move the
    cursor and print a prompt of its own over the chat (or set the clipboard), or reorder what
    it reads (a bidi override): every such character reaches the terminal as a marker."""
    done = chat_with_app(tmp_path, HOSTILE_APP, "go\n")
    out = done.stdout
    assert not any(c in out for c in "\x1b\x9b\x07\r\u202e"), repr(out)
    said = "Done.⟨U+001B⟩[1A⟨U+001B⟩[2K⟨U+000D⟩you> approve⟨U+0007⟩⟨U+001B⟩]52;c;ZXZpbA==⟨U+0007⟩"
    assert f"agent> {said} sent to gnivas⟨U+202E⟩." in out
    # A bidi override would reorder what the call's line and its result read: JSON, escaped.
    assert 'report {"to": "evil\\u202egnivas"}' in out
    assert 'report: "ok\\u001b[2J\\u009b31m \\u202eevil"' in out


CHOICES_APP = """
from pydantic import BaseModel
from pausepoint import Pausepoint
from pausepoint.testing import ScriptedModel, tool_call

ai = Pausepoint()

class Pick(BaseModel):
    options: list[str]

class Picked(BaseModel):
    choice: str

ask = ai.define_interrupt(name="pick", description="Pick one.", input_schema=Pick, output_schema=Picked)

@ai.tool(requires_approval=True)
def deploy(env: str) -> str:
    "Deploy."
    return "deployed " + env

STEPS = [[tool_call("pick", {"options": ["blue", "green"]})], [tool_call("deploy", {"env": "prod"})], "Done."]
agent = ai.define_agent(name="chooser", model=ScriptedModel(STEPS), tools=[ask, deploy])
"""


def test_a_card_offers_only_the_choices_that_can_answer_its_pause(tmp_path):
    """A question asking for a value takes no plain yes, and a call paused for approval takes no
    made-up result: the card offers neither, and typing one is not taken (found by a probe: the
    card offered approve, then refused it; and took a respond it did not offer)."""
    done = chat_with_app(tmp_path, CHOICES_APP, 'go\na\nr\n{"choice": "green"}\nr\na\n')
    out = done.stdout
    question, approval = out.split("paused: deploy")
    assert "└─ [d]eny  [r]espond with JSON  [s]kip\nchoice> a\ntype one of: [d]eny  [r]espond" in question
    assert "└─ [a]pprove  [d]eny  [s]kip\nchoice> r\ntype one of: [a]pprove  [d]eny  [s]kip" in approval
    assert '✓ pick: {"choice": "green"}' in question and '✓ deploy: "deployed prod"' in approval
    assert "agent> Done." in out


def chat_with_the_bank(lines: str, *args: str) -> str:
    """What ``pausepoint chat`` on the banking agent (in memory) prints, fed ``lines``; it must end well."""
    done = subprocess.run(
        [sys.executable, "-m", "pausepoint", "chat", BANK, "--store", "memory:", *args],
        input=lines, capture_output=True, text=True, cwd=ROOT, env=cli_env(), timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return done.stdout


def test_a_pause_skipped_beside_one_answered_is_left_open_not_asked_about_again_at_once():
    """Found by a probe: the turn came back interrupted with the skipped pause still open, its card
    was shown again at once, and the next line typed (a message) was taken as its choice."""
    out = chat_with_the_bank("Transfer $5 to bob and $7 to carl.\na\ny\ns\nhello there\n")
    assert out.count("paused: userApproval") == 2, out  # one card a pause
    assert "choice> hello there" not in out and "left open: /pending answers it later" in out
    assert "so “hello there” was not sent: /pending answers them" in out  # a message, refused as documented


def test_session_before_the_first_message_says_nothing_is_made_yet_and_after_it_names_it_plainly():
    """Found by a probe: /session printed an id as if a session were there; --session with it then
    failed ("no session"), nothing having been sent."""
    before, after = re.findall(r"session [0-9a-f]{32}.*", chat_with_the_bank("/session\nHello\n/session\n"))[:2]
    assert before.endswith("(nothing yet: the first message makes it)") and after == before.split(" (")[0]


def test_piped_input_is_echoed_with_what_a_terminal_would_obey_made_visible_as_a_m_message_is():
    """Found by a probe: the same line given with -m was shown as ⟨U+202E⟩..., read from a pipe
    it was echoed as it was (an ESC sequence, a bidi override reached the terminal)."""
    line = "pay gnivas\u202e now \x1b[2J"
    outs = [chat_with_the_bank("", "-m", line), chat_with_the_bank(line + "\n")]
    shown = "you> pay gnivas⟨U+202E⟩ now ⟨U+001B⟩[2J"
    assert all(shown in out and "\u202e" not in out and "\x1b" not in out for out in outs), outs


SMALL_RECORDS_APP = """
import os
from pydantic import BaseModel
from pausepoint import Pausepoint
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, tool_call

class Ask(BaseModel):
    q: str

class Said(BaseModel):
    data: str

ai = Pausepoint()
ask = ai.define_interrupt(name="ask", description="Ask.", input_schema=Ask, output_schema=Said)

def script(request):
    if request.messages[-1].role == "tool":
        return "answers: " + ", ".join(p.output["data"][:9] for p in request.messages[-1].tool_responses)
    return [tool_call("ask", {"q": "one"}), tool_call("ask", {"q": "two"})]

store = SqliteSessionStore(os.path.join(os.path.dirname(__file__), "small.db"), max_record_bytes=4096)
agent = ai.define_agent(name="asker", model=ScriptedModel(script), tools=[ask], store=store)
"""


def test_an_answer_whose_record_the_store_would_refuse_is_asked_for_again_on_its_own(tmp_path):
    """Each string within the agent's JSON limits, the answer's record over the store's (which
    only the resume measures): found by a probe, the chat said it was taken, then "refused", then
    asked about every pause again, the other pause's answer dropped. The README's promise: asked
    for again, on its own, the other answers kept."""
    lines = ["go", "r", '{"data": "first"}', "r", '{"data": "%s"}' % ("z" * 4_000), "r", '{"data": "second"}']
    done = chat_with_app(tmp_path, SMALL_RECORDS_APP, "\n".join(lines) + "\n", own_store=True)
    out = done.stdout
    before, after = out.split("refused: the answer cannot be recorded: its record of ")
    assert "exceeds the store's limit of 4096 bytes; try again" in after
    assert after.count("paused: ask") == 1 and "✓" not in before  # only that one asked again; nothing said taken
    assert "agent> answers: first, second" in after


GRANTABLE_QUESTION_APP = """
from pydantic import BaseModel
from pausepoint import ApprovalPolicy, Pausepoint, Rule
from pausepoint.testing import ScriptedModel, tool_call

class Q(BaseModel):
    question: str

class Answer(BaseModel):
    account: str
    amount: int

ai = Pausepoint()
pick = ai.define_interrupt("pick", input_schema=Q, output_schema=Answer)
policy = ApprovalPolicy(rules=[Rule.ask("ask pick", ["pick"])], grantable={"pick": None})
steps = [[tool_call("pick", {"question": "which?"})], "done"]
agent = ai.define_agent(name="c", model=ScriptedModel(steps), tools=[pick], approval=policy)
"""


def test_a_grant_is_no_choice_where_a_yes_cannot_answer_the_pause(tmp_path):
    """The policy allows a grant, but a grant is a yes, and the question asks for an account and
    an amount (found by a probe: g crashed the chat with a traceback)."""
    done = chat_with_app(tmp_path, GRANTABLE_QUESTION_APP, "go\ng\nd\nno thanks\n")
    assert "└─ [d]eny  [s]kip\nchoice> g\ntype one of: [d]eny  [s]kip" in done.stdout
    assert "agent> done" in done.stdout


HIGH_RISK_EDIT_APP = """
from pausepoint import Pausepoint, PauseDisplay
from pausepoint.testing import ScriptedModel, tool_call

ai = Pausepoint()

@ai.tool(requires_approval=True, allow_input_edits=True, display=PauseDisplay(title="Pay {to}", risk="high"))
def pay(amount: int, to: str) -> str:
    "Pay."
    return f"paid {amount} to {to}"

agent = ai.define_agent(name="payer", model=ScriptedModel([[tool_call("pay", {"amount": 5, "to": "al"})], "Done."]),
                        tools=[pay])
"""


def test_an_edit_of_a_high_risk_pause_is_confirmed_before_it_runs(tmp_path):
    """As the console confirms it (found by a probe: a pasted input line ran a high-risk payment
    with another input at once); a "no" decides nothing, and the card is asked about again."""
    edited = '{"amount": 5, "to": "bob"}'
    done = chat_with_app(tmp_path, HIGH_RISK_EDIT_APP, f"go\ne\n{edited}\nn\ne\n{edited}\ny\n")
    out = done.stdout
    # what runs is named: the edited input's title (found by a probe: the original's was)
    assert out.count("approve “Pay bob” (your edit of “Pay al”)? [y/N]") == 2
    assert "not decided: a decision on a high-risk pause needs y on the line after its JSON" in out
    assert out.count('✓ pay: "paid 5 to bob"') == 1 and "paid 5 to al" not in out


BATCH_APP = """
from pydantic import BaseModel
from pausepoint import Pausepoint
from pausepoint.testing import ScriptedModel, tool_call

ai = Pausepoint()

class Q(BaseModel):
    question: str

class Count(BaseModel):
    n: int

count = ai.define_interrupt(name="count", description="How many?", input_schema=Q, output_schema=Count)
drink = ai.define_interrupt(name="drink", description="Which drink?", input_schema=Q)

def script(request):
    last = request.messages[-1]
    if last.role == "user":
        return [tool_call("count", {"question": "how many?"}), tool_call("drink", {"question": "which?"})]
    return str(sorted((p.name, str(p.output)) for p in last.tool_responses))

agent = ai.define_agent(name="asker", model=ScriptedModel(script), tools=[count, drink])
"""


def test_a_bad_answer_among_several_pauses_is_refused_when_given_and_the_others_kept(tmp_path):
    """Found by a probe: the first pause's bad answer was refused only once the last pause was
    answered, and the good answers given meanwhile were thrown away."""
    done = chat_with_app(tmp_path, BATCH_APP, 'go\nr\n{"n": "many"}\n{"n": 2}\nr\n"tea"\n')
    out = done.stdout
    assert "refused: n: Input should be a valid integer" in out
    assert out.count("paused: count") == 1 and out.count("paused: drink") == 1  # nothing asked twice
    assert "[('count', \"{'n': 2}\"), ('drink', 'tea')]" in out


def test_a_session_of_another_agent_says_whose_it_is(tmp_path):
    """As the REST API's 404 does (found by a probe: "no session 'x' in the agent's store", which
    the store did hold, and read as an id that exists nowhere)."""
    import asyncio

    from examples import banking
    from pausepoint.stores import SqliteSessionStore

    async def bank_session() -> str:
        store = SqliteSessionStore(tmp_path / "shared.db")
        _, agent = banking.build(store)
        session = (await agent.chat().send("Hello")).session_id
        await store.close()
        return session

    session = asyncio.run(bank_session())
    done = subprocess.run(
        [sys.executable, "-m", "pausepoint", "chat", "tests.cli.apps:shell_agent", "--db", str(tmp_path / "shared.db"),
         "--session", session],
        input="", capture_output=True, text=True, cwd=ROOT, env=cli_env(), timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert (
        f"pausepoint chat: error: no session {session!r} of agent 'shellAgent': the id names a session of agent "
        "'bankingAgent'" in done.stderr
    ), done.stderr


def test_bytes_that_are_no_utf8_read_the_same_from_a_pipe_and_from_a_file(tmp_path):
    """Found by a probe: piped, a stray byte became U+FFFD and the message was sent; redirected
    from a file, it became a lone surrogate and the message was refused."""
    data = "Hello \udcff there\n".encode("utf-8", "surrogateescape")
    (tmp_path / "in.txt").write_bytes(data)
    command = [sys.executable, "-m", "pausepoint", "chat", BANK, "--store", "memory:"]
    env = {**cli_env(), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    piped = subprocess.run(command, input=data, capture_output=True, cwd=ROOT, env=env, timeout=60)
    with (tmp_path / "in.txt").open("rb") as redirected:
        filed = subprocess.run(command, stdin=redirected, capture_output=True, cwd=ROOT, env=env, timeout=60)
    for done in (piped, filed):
        out = done.stdout.decode("utf-8", "backslashreplace")
        assert done.returncode == 0 and "cannot be recorded" not in out, out
    assert piped.stdout == filed.stdout
