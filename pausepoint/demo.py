"""The banking demo: ``transfer_money`` guarded twice — by the seed's ``userApproval`` interrupt,
which the model is asked to call first, and by ``requires_approval``, which the runtime enforces.

This is the agent ``pausepoint demo`` serves (and ``examples/banking.py`` re-exports):
``build(store, ledger, model=..., plugins=...)`` gives the app and its ``bankingAgent``. With no
model it runs on ``ScriptedModel(banking_script)``, an offline stand-in that does what the
system prompt asks. Any real model decides by itself when to ask for approval: the system
prompt and the tools' descriptions are all it is told.

The two guards work together. A model that follows the prompt asks ``userApproval`` about the
transfer ("Transfer $500 to savings"); a yes to it also grants that one transfer — exactly that
amount to exactly that account, once, within 15 minutes (``transfer_it_describes``) — so the
person is not asked twice for the same thing. A model that skips the question, calls
``transfer_money`` after a denial, or with other arguments than were approved, gets its call
paused for approval by the runtime: the transfer itself is shown, and nothing moves unless a
person approves it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, Field

from .models._model import Model, ModelRequest, Plugin
from .runtime._agent import Agent
from .runtime._app import Pausepoint
from .session._grants import Grant
from .stores import InMemorySessionStore, SessionStore
from .testing import ScriptedModel, Step, last_tool_results, tool_call
from .tools._display import PauseDisplay

__all__ = [
    "AGENT_NAME",
    "ApprovalOutput",
    "DESCRIPTION",
    "SYSTEM",
    "TransferMoneyInput",
    "UserApprovalInput",
    "banking_script",
    "build",
    "transfer_it_describes",
]

AGENT_NAME = "bankingAgent"
SYSTEM = (
    "You are a banking assistant. Answer greetings and questions in plain text. You cannot see balances or "
    "transactions: say so in plain text. When the user asks to transfer, send or move money, your first call is "
    'userApproval, to ask the user. Then, only if its answer has "approved": true, call transfer_money. If the answer '
    'has "denied": true, the transfer is cancelled: call no tool, say it was not done. Never ask for approval in plain '
    "text.\n\n"
    'For example, the user says "Send $75 to Alice": call userApproval with details "Transfer $75 to Alice". If it '
    'returns {"approved": true}, call transfer_money with amount 75 and to_account "Alice". If it returns '
    '{"denied": true, "reason": "Not today"}, call no tool and answer "The $75 was not sent to Alice: you declined '
    '(Not today)."\n\n'
    'If the user asks "How much did I spend last week?", answer "Sorry, I cannot see your transactions or balances."'
)
DESCRIPTION = "Moves money between accounts. Every transfer waits for your approval."
# The scripted model serves as long as the demo (or a benchmark's server) runs: it keeps only
# its latest requests, so the process does not grow with every turn.
_KEEP_REQUESTS = 100


class UserApprovalInput(BaseModel):
    action: str
    # what the card's title shows; bounded, so a small model that repeats itself still ends its call
    details: str = Field(max_length=160)


class ApprovalOutput(BaseModel):
    approved: bool
    feedback: str = ""


class TransferMoneyInput(BaseModel):
    amount: Decimal
    to_account: str


TRANSFER = re.compile(r"\$(\d+(?:\.\d+)?) to (\w+)")

# A transfer as people (and models) write one: "$500 to savings", "20 dollars to Bob",
# "$1,000 from checking to the savings account", "$500 to your savings account". The amount is
# read strictly (``_AMOUNT``).
_DESCRIBED = re.compile(
    r"(?:\$\s*(?P<a>\d(?:[\d,.]*\d)?)|(?P<b>\d(?:[\d,.]*\d)?)\s*(?:dollars|usd|\$))"
    r"(?:\s+from\s+(?:the\s+|my\s+|your\s+)?[\w-]+(?:\s+account)?)?\s+to\s+(?:the\s+|my\s+|your\s+)?(?P<to>[\w-]+)",
    re.IGNORECASE,
)
# An amount with one reading only: digits, or commas between groups of three, and cents after a
# point. "$5,00" (five in a comma-decimal locale? five hundred?) and "$1.000,50" have two.
_AMOUNT = re.compile(r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
#: how long a yes to userApproval keeps the transfer it described approved
GRANT_TTL = timedelta(minutes=15)


def transfer_it_describes(approval: UserApprovalInput) -> Grant | None:
    """The one transfer a ``userApproval`` asks about, as a grant: that amount, to that account,
    once, within ``GRANT_TTL``; None when its details do not name exactly one transfer, or name
    its amount in a way that reads two ways ("$5,00"): then the transfer itself is asked about."""
    found = list(_DESCRIBED.finditer(approval.details)) or list(_DESCRIBED.finditer(approval.action))
    if len(found) != 1:
        return None
    match = found[0]
    written = match["a"] or match["b"]
    if not _AMOUNT.fullmatch(written):
        return None
    amount = Decimal(written.replace(",", ""))
    return Grant(
        tool="transfer_money",
        bounds={"amount": {"equals": str(amount)}, "to_account": {"equals": match["to"]}},
        uses=1,
        ttl=GRANT_TTL,
    )


def _dollars(amount: Decimal) -> str:
    """An amount as the transfer's result says it, grouped as the card shows it: ``5000`` →
    ``"5,000"``, ``1250.5`` → ``"1,250.50"``, ``500.00`` → ``"500.00"`` (cents as given, at least two)."""
    exponent = amount.as_tuple().exponent
    if isinstance(exponent, int) and exponent >= 0:
        return f"{amount:,}"
    places = max(2, -exponent) if isinstance(exponent, int) else 2
    return f"{amount:,.{places}f}"


def banking_script(request: ModelRequest) -> Step:
    """A stand-in for a real model that behaves as the system prompt asks."""
    last = request.messages[-1]
    if last.role == "user":
        found = TRANSFER.findall(last.text)
        if not found:
            return f"You said: {last.text}"
        return [
            tool_call("userApproval", {"action": "transfer_money", "details": f"Transfer ${amount} to {account}"})
            for amount, account in found
        ]
    results = last_tool_results(request)
    approval = results.get("userApproval")
    if approval is not None:
        requested = {p.ref: p for p in request.messages[-2].tool_requests}
        calls = []
        for response in last.tool_responses:
            if response.name == "userApproval" and (response.output or {}).get("approved"):
                match = TRANSFER.search(requested[response.ref].input["details"])
                if match:
                    calls.append(tool_call("transfer_money", {"amount": match[1], "to_account": match[2]}))
        if calls:
            return calls
        return f"I did not transfer anything: {approval.get('feedback') or approval.get('reason') or 'not approved'}."
    return " ".join(str(output) for output in results.values())


def build(
    store: SessionStore | None = None,
    ledger: list[str] | None = None,
    *,
    model: str | Model | None = None,
    plugins: Sequence[Plugin] = (),
    **agent_options: Any,
) -> tuple[Pausepoint, Agent]:
    """The app and its banking agent; ``ledger`` (if given) records every transfer made.

    ``model`` defaults to the offline scripted model; any model name a plugin serves works too.
    ``agent_options`` go to ``define_agent`` (``config=``, ``abandon_after=``, ``system=`` instead
    of ``SYSTEM``, ...).
    """
    ai = Pausepoint(plugins=plugins)

    user_approval = ai.define_interrupt(
        name="userApproval",
        description=(
            'First step of every transfer: shows the user the transfer and returns their answer, {"approved": true} '
            'or {"denied": true, "reason": "..."}. A denied transfer is cancelled: then answer the user in plain text.'
        ),
        input_schema=UserApprovalInput,
        output_schema=ApprovalOutput,
        display=PauseDisplay(title="{details}", summary="The agent asks before it runs {action}.", risk="high"),
        approves=transfer_it_describes,
    )

    @ai.tool(
        requires_approval=True,
        display=PauseDisplay(
            title="Transfer ${amount} to {to_account}", summary="The transfer itself, as the model asked for it.",
            risk="high",
        ),
    )  # fmt: skip
    async def transfer_money(input: TransferMoneyInput) -> str:  # noqa: A002 - the reference's name
        """Second step of a transfer: move the money, only right after userApproval returned "approved": true.
        Never after a denial."""
        if ledger is not None:
            ledger.append(f"{input.amount}->{input.to_account}")
        return f"Transferred ${_dollars(input.amount)} to {input.to_account}."

    agent = ai.define_agent(
        name=AGENT_NAME,
        model=model if model is not None else ScriptedModel(banking_script, keep_requests=_KEEP_REQUESTS),
        tools=[user_approval, transfer_money],
        store=store if store is not None else InMemorySessionStore(),
        **{"system": SYSTEM, "description": DESCRIPTION, **agent_options},
    )
    return ai, agent
