"""What an approver is told when an answer is refused, found by a probe: a grant given with one
approval of a quorum is refused for the quorum, not for the tool it names; and the terminal chat,
which knows no one's roles unless the policy names its members, says so rather than that the
person holds none."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pausepoint import Grant
from pausepoint.errors import InvalidGrant

from .approval_apps import build, treasury
from .cli.conftest import ROOT, cli_env
from .helpers import version


async def test_a_grant_with_one_approval_of_a_quorum_is_refused_for_the_quorum_not_the_granted_tool(store):
    """The probe's grant named another tool, which needs one approval; it was refused as
    "calls of 'deploy' need several approvals", false of deploy."""
    agent, _, ledger = build(store, treasury(quorum={"transfer_money": 2}, grantable=["deploy"]))
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 5 to a")).interrupts
    before = await version(store, chat.session_id)
    with pytest.raises(InvalidGrant) as refused:
        await chat.resume(restart=[pause.restart(grant=Grant(tool="deploy"))], principal="alice")
    assert "'deploy'" not in str(refused.value)
    assert str(refused.value).startswith("this call of 'transfer_money' needs several approvals (2)")
    assert "a grant never stands in for a quorum" in str(refused.value)
    assert await version(store, chat.session_id) == before and ledger == [] and await chat.grants() == []


def test_the_terminal_chat_says_it_knows_no_roles_when_the_policy_names_no_members():
    """``tests.cli.apps:pay_ai`` leaves who holds treasury to ``serve``: the chat cannot tell
    whether alice holds it, and says so (it said "'alice' holds none of the roles")."""
    typed = "pay 500 to savings\na\ns\n/quit\n"
    ran = subprocess.run(
        [sys.executable, "-m", "pausepoint", "chat", "tests.cli.apps:pay_ai", "--principal", "alice"],
        input=typed,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=cli_env(),
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert "holds none of the roles" not in ran.stdout
    assert (
        "refused: this chat knows no one's roles, so 'alice' cannot decide 'transfer_money' here: the roles that "
        "decide it (treasury) are given to people where the agent is served" in ran.stdout
    )
