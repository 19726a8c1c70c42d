"""The bank of the banking example as an MCP server, written with the ``mcp`` SDK.

``python -m examples.bank_mcp_server`` speaks MCP over stdin/stdout (an MCP client starts it);
``examples/banking_mcp.py`` is an agent that uses it. ``transfer_money`` moves money — the agent
lets it run only once a person approved the call; ``open_account`` asks who holds the new
account (an elicitation: the agent's call pauses until a person answers). Every transfer is
appended to the file named by ``BANK_LEDGER``, when set.
"""

from __future__ import annotations

import json
import os
from decimal import Decimal
from typing import Annotated

from mcp.server.mcpserver import Elicit, ElicitationResult, MCPServer, Resolve
from pydantic import BaseModel, Field

bank = MCPServer("bank", instructions="A small bank: balances, transfers, new accounts.")

_BALANCES = {"checking": Decimal("2500.00"), "savings": Decimal("10000.00")}


def _record(entry: dict[str, object]) -> None:
    path = os.environ.get("BANK_LEDGER")
    if path:
        with open(path, "a", encoding="utf-8") as ledger:
            ledger.write(json.dumps(entry, default=str) + "\n")


@bank.tool()
def get_balance(account: str) -> str:
    """The balance of an account (checking or savings)."""
    if account not in _BALANCES:
        raise ValueError(f"no account named {account!r}")
    return f"{account}: ${_BALANCES[account]:,.2f}"


@bank.tool()
def transfer_money(amount: Decimal, to_account: str) -> str:
    """Transfer money from checking to another account. Needs the customer's approval."""
    if amount <= 0:
        raise ValueError("the amount must be positive")
    _BALANCES["checking"] -= amount
    _BALANCES[to_account] = _BALANCES.get(to_account, Decimal(0)) + amount
    _record({"transfer": str(amount), "to": to_account})
    return f"Transferred ${amount:,.2f} to {to_account}."


class Holder(BaseModel):
    holder: str = Field(description="Full name of the account holder")


async def _ask_holder(kind: str) -> Elicit[Holder]:
    return Elicit(f"Who will hold the new {kind} account?", Holder)


@bank.tool()
async def open_account(kind: str, holder: Annotated[ElicitationResult[Holder], Resolve(_ask_holder)]) -> str:
    """Open a new account of a kind (e.g. savings); the bank asks who holds it."""
    if holder.action != "accept":
        return f"No {kind} account was opened."
    _BALANCES[kind] = Decimal(0)
    _record({"opened": kind, "holder": holder.data.holder})
    return f"Opened a {kind} account for {holder.data.holder}."


if __name__ == "__main__":
    bank.run()
