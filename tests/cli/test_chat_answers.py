"""``pausepoint chat``: an answer is checked as the resume checks it when it is given, and a card
offers only the choices the pause's view lets the person typing give (as the console's card)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.cli.conftest import ROOT, cli_env

# Three pauses in one turn, on the app's own store: strings of at most 500 bytes, records of 4000.
BATCH_APP = """
import os
from pydantic import BaseModel
from pausepoint import JsonLimits, Pausepoint
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, tool_call

ai = Pausepoint()

class Pay(BaseModel):
    amount: int
    to: str

class Answer(BaseModel):
    approved: bool
    note: str = ""
    notes: list[str] = []

@ai.tool(requires_approval=True, allow_input_edits=True)
def pay(input: Pay) -> str:
    "Pay."
    return f"paid {input.amount} to {input.to}"

ask = ai.define_interrupt(name="ask", description="Ask.", input_schema=Pay, output_schema=Answer)

def script(request):
    last = request.messages[-1]
    if last.role == "user":
        return [tool_call("pay", {"amount": 1, "to": "a"}), tool_call("pay", {"amount": 2, "to": "b"}),
                tool_call("ask", {"amount": 9, "to": "z"})]
    return "Done."

store = SqliteSessionStore(os.environ["CHAT_DB"], max_record_bytes=4000)
agent = ai.define_agent(name="payer", model=ScriptedModel(script), tools=[pay, ask], store=store,
                        json_limits=JsonLimits(max_string_bytes=500))
"""

LONG = "x" * 600
NOTES = ", ".join(['"' + "n" * 450 + '"'] * 10)


def chat(*args: str, stdin: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pausepoint", "chat", *args],
        input=stdin, capture_output=True, text=True, cwd=ROOT, env=env or cli_env(), timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return done


@pytest.mark.parametrize(
    ("given", "said"),
    [
        # an edit with a lone surrogate written as a JSON escape (found by a probe)
        ('e\n{"amount": 2, "to": "\\ud800"}\n{"amount": 2, "to": "b"}\nr\n{"approved": true}\n',
         "refused: to: a lone surrogate ('\\ud800') at character 0: not encodable as UTF-8; try again"),
        # an answer with a string over the agent's JSON limits
        (f'a\nr\n{{"approved": true, "note": "{LONG}"}}\n{{"approved": true}}\n',
         "refused: note: a string of 600 bytes; the limit is 500; try again"),
        # a denial whose reason is over them
        (f"d\n{LONG}\nnot now\nr\n{{\"approved\": true}}\n",
         "refused: the reason: a string of 600 bytes; the limit is 500; try again"),
        # each string under the limit, the answer over what one record of the store holds
        (f'a\nr\n{{"approved": true, "notes": [{NOTES}]}}\n{{"approved": true}}\n',
         "refused: the answer: 4557 bytes of JSON, more than the session's store keeps in one record (4000 bytes); "
         "try again"),
    ],
)  # fmt: skip
def test_an_answer_the_resume_would_refuse_is_asked_for_again_and_the_others_kept(given, said, tmp_path):
    """Found by a probe: the answer was taken when typed, then the resume refused the whole batch
    (naming ``$.restart[1]...``, a path the person never wrote): the other answers were dropped,
    and every pause asked again. Now only that answer is asked again, and the turn goes on."""
    (tmp_path / "batch_app.py").write_text(BATCH_APP)
    env = {**cli_env(), "PYTHONPATH": f"{tmp_path}:{ROOT}", "CHAT_DB": str(tmp_path / "chat.db")}
    out = chat("batch_app:agent", stdin="go\na\n" + given, env=env).stdout
    assert said in out, out
    assert "$." not in out and "left open" not in out, out
    assert out.count("paused: pay") == 2 and out.count("paused: ask") == 1  # nothing asked twice
    assert '✓ pay: "paid 1 to a"' in out and "agent> Done." in out, out


@pytest.mark.parametrize(
    ("agent", "who", "card", "lines", "then"),
    [
        # the requester under separation of duties, holding no deciding role: only skip
        ("grant_agent", "dave", "You asked for this call: someone else approves it.\n└─ [s]kip", "a\ns\n",
         "choice> a\ntype one of: [s]kip\nchoice> s\nleft open"),
        # the requester holding treasury: may still deny
        ("grant_agent", "alice", "You asked for this call: someone else approves it (you may still deny).\n"
         "└─ [d]eny  [s]kip", "g\nd\nnot mine to approve\n", "choice> g\ntype one of: [d]eny  [s]kip\nchoice> d"),
        # someone whose roles decide nothing of it (no separation of duties)
        ("quorum_agent", "erin", "Approving this call takes treasury, which you do not hold.\n└─ [s]kip", "e\ns\n",
         "choice> e\ntype one of: [s]kip"),
        # someone the view lets approve (no separation of duties): no why-not line, every choice
        ("quorum_agent", "alice", "Waiting for 2 more approvals from treasury (alice, bob or carol).\n"
         "└─ [a]pprove  [d]eny  [s]kip", "s\n", "choice> s\nleft open"),
    ],
)  # fmt: skip
def test_a_card_offers_only_what_the_pauses_view_lets_this_person_give(agent, who, card, lines, then):
    """As the console's card (found by a probe: the requester was offered approve, grant and edit,
    each refused only once chosen, an edit after the whole input was typed)."""
    out = chat(
        f"tests.cli.apps:{agent}", "--store", "memory:", "--principal", who, stdin=f"pay 500 to savings\n{lines}"
    ).stdout
    assert card in out and then in out, out
    assert "refused" not in out, out
    if "not mine" in lines:  # the denial is given
        assert "agent> " in out and "not mine to approve" in out.split("agent> ")[1], out


# A question decided by a role: deciders (alice) answer it, auditors (dave) may only deny it, bob
# holds neither role.
DECIDED_APP = """
from pydantic import BaseModel
from pausepoint import ApprovalPolicy, Pausepoint, Role
from pausepoint.testing import ScriptedModel, tool_call

ai = Pausepoint()

class Ask(BaseModel):
    payee: str

class Source(BaseModel):
    account: str

pick = ai.define_interrupt(name="pick", description="Ask which account pays.", input_schema=Ask, output_schema=Source)

def script(request):
    last = request.messages[-1]
    if last.role == "user":
        return tool_call("pick", {"payee": last.text})
    return "Done."

policy = ApprovalPolicy(
    roles={"deciders": Role(tools=["pick"]), "auditors": Role(tools=["pick"], decisions=["deny"])},
    members={"alice": ["deciders"], "bob": [], "dave": ["auditors"]},
)
agent = ai.define_agent(name="picker", model=ScriptedModel(script), tools=[pick], approval=policy)
"""


@pytest.mark.parametrize(
    ("who", "lines", "card", "then"),
    [
        # no role that decides it: nothing to give
        ("bob", "r\ns\n", "Approving this call takes deciders, which you do not hold.\n└─ [s]kip",
         "choice> r\ntype one of: [s]kip\nchoice> s\nleft open"),
        # a role that may only deny it (a role that cannot answer it is not named as one that does)
        ("dave", "r\ns\n", "Approving this call takes deciders, which you do not hold (you may still deny).\n"
         "└─ [d]eny  [s]kip", "choice> r\ntype one of: [d]eny  [s]kip\nchoice> s\nleft open"),
        # a decider: answers it
        ("alice", 'r\n{"account": "ops"}\n', "Waiting for an answer from deciders (alice).\n"
         "└─ [d]eny  [r]espond with JSON  [s]kip", "agent> Done."),
    ],
)  # fmt: skip
def test_a_question_offers_respond_only_to_whom_its_view_lets_answer_it(who, lines, card, then, tmp_path):
    """Found by a probe: the card offered "[r]espond" to anyone, and the server refused the
    answer of someone holding none of the roles that decide it (403 ``approval_forbidden``)."""
    (tmp_path / "decided_app.py").write_text(DECIDED_APP)
    env = {**cli_env(), "PYTHONPATH": f"{tmp_path}:{ROOT}"}
    out = chat("decided_app:agent", "--store", "memory:", "--principal", who, stdin=f"ACME\n{lines}", env=env).stdout
    assert card in out and then in out, out
    assert "refused" not in out, out
