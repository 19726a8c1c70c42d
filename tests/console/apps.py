"""The console tests' own app, ``treasury`` (public API only): what the examples do not have.

- ``transfer_money`` requires approval under an approval policy: treasury (alice, bob) approves,
  an approval may grant later transfers for the session, and the card's title says the currency
  the input does not carry ("Transfer $700.00 to savings"); high risk.
- ``chooseAccount`` is a question a plain yes cannot answer: the person responds with a value
  (which account pays); high risk.
- ``hold_funds`` pauses itself, and the pause expires after ``HOLD_TTL`` (denied: nobody answered).
- a message containing "fail" calls ``check_ledger``, which raises: the agent's tool errors end
  the turn ``failed``.

The scripted model reads "pay 700 to savings", "which account pays ACME GmbH?", "hold 50 for
ACME GmbH" and "fail".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, Field

from pausepoint import ApprovalPolicy, Interrupt, ModelRequest, PauseDisplay, Pausepoint, Role, ToolRunContext
from pausepoint.stores import SessionStore
from pausepoint.testing import ScriptedModel, Step, last_tool_results, tool_call
from pausepoint.webhooks import Webhook

__all__ = ["build"]

PAY = re.compile(r"pay (\d+(?:\.\d+)?) to ([\w-]+)")
WHICH = re.compile(r"which account pays (.+?)\?", re.IGNORECASE)
HOLD = re.compile(r"hold (\d+) for (.+)")
#: how long a ``hold_funds`` pause waits before it expires
HOLD_TTL = timedelta(seconds=2)


class Transfer(BaseModel):
    amount: Decimal
    to_account: str


class Question(BaseModel):
    payee: str


class Choice(BaseModel):
    account: Literal["operating", "reserve"] = Field(description="The account the payment leaves from.")
    note: str = ""


class Hold(BaseModel):
    amount: Decimal
    currency: Literal["EUR", "USD"] = "EUR"
    payee: str


def script(request: ModelRequest) -> Step:
    last = request.messages[-1]
    if last.role == "user":
        if "fail" in last.text:
            return tool_call("check_ledger", {})
        calls = [tool_call("transfer_money", {"amount": a, "to_account": t}) for a, t in PAY.findall(last.text)]
        calls += [tool_call("chooseAccount", {"payee": p}) for p in WHICH.findall(last.text)]
        calls += [tool_call("hold_funds", {"amount": a, "payee": p}) for a, p in HOLD.findall(last.text)]
        return calls or f"You said: {last.text}"
    results = last_tool_results(request)
    return "; ".join(f"{name}: {value}" for name, value in results.items())


def build(store: SessionStore, ledger: list[str], webhooks: Sequence[Webhook] = ()) -> Pausepoint:
    """The app and its ``treasury`` agent; every transfer that runs is appended to ``ledger``;
    ``webhooks`` are told about its events."""
    ai = Pausepoint(webhooks=webhooks)
    choose = ai.define_interrupt(
        name="chooseAccount",
        description="Ask which account a payment leaves from.",
        input_schema=Question,
        output_schema=Choice,
        display=PauseDisplay(title="Which account pays {payee}?", risk="high"),
    )

    @ai.tool(requires_approval=True, display=PauseDisplay(title="Transfer ${amount} to {to_account}", risk="high"))
    async def transfer_money(input: Transfer) -> str:
        """Move money between accounts."""
        ledger.append(f"{input.amount}->{input.to_account}")
        return f"sent {input.amount} to {input.to_account}"

    @ai.tool(display=PauseDisplay(title="Hold {amount} for {payee}"))
    async def hold_funds(input: Hold, ctx: ToolRunContext) -> str:
        """Put money aside for a payee, once a person agrees."""
        if not (ctx.resumed_metadata or {}).get("tool_approved"):
            reason = f"Money set aside for {input.payee} is not available to pay others."  # the model's words in it
            raise Interrupt({"reason": reason}, ttl=HOLD_TTL)
        return f"held {input.amount} {input.currency} for {input.payee}"

    @ai.tool()
    async def check_ledger() -> str:
        """Check the ledger is in balance."""
        raise RuntimeError("the ledger service did not answer")

    policy = ApprovalPolicy(
        roles={"treasury": Role(tools=["transfer_money"])},
        members={"alice": ["treasury"], "bob": ["treasury"]},
        grantable={"transfer_money": timedelta(hours=1)},
    )
    options: dict[str, Any] = {"store": store, "approval": policy, "tool_errors": "fail"}
    ai.define_agent(
        name="treasury",
        model=ScriptedModel(script),
        description="Moves the company's money. Treasury approves every transfer.",
        tools=[transfer_money, choose, hold_funds, check_ledger],
        **options,
    )
    return ai
