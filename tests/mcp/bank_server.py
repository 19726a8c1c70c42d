"""A real MCP server for the tests, written with the ``mcp`` SDK: a small bank.

Run over stdio (``python -m tests.mcp.bank_server``) or streamable HTTP
(``python -m tests.mcp.bank_server --http PORT``; it prints its URL). Every call that reaches a tool is appended
to the file named by ``BANK_LEDGER`` (one JSON line), so tests count what reached the server.
``BANK_VERSION=2`` changes ``transfer``'s schema (a required ``memo``); ``BANK_VERSION=currency``
adds a ``currency`` that defaults to euros (so a call made for the first version still runs);
``BANK_VERSION=untyped`` leaves ``amount``'s type out of its schema; ``BANK_VERSION=dated`` takes the
day a transfer is made on (a string of ``format: date``); ``BANK_VERSION=changing`` has a
``require_memos`` tool that changes ``transfer`` and tells the listening clients so (and
``require_memos_quietly`` that tells nobody). With ``BANK_KEY`` set,
the server seals its questions' state with that key, so a restarted server accepts them.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import date
from typing import Annotated, Any

from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, RequestStateSecurity, Resolve
from pydantic import BaseModel, Field

KEY = os.environ.get("BANK_KEY")
mcp = MCPServer(
    "bank",
    request_state_security=RequestStateSecurity(keys=[KEY.encode().ljust(32, b"k")]) if KEY else None,
)


def record(tool: str, **arguments: object) -> None:
    path = os.environ.get("BANK_LEDGER")
    if path:
        with open(path, "a", encoding="utf-8") as ledger:
            ledger.write(json.dumps({"tool": tool, **arguments}) + "\n")


@mcp.tool()
def balance(account: str) -> str:
    """The balance of an account."""
    record("balance", account=account)
    return f"{account}: $1,000"


if os.environ.get("BANK_VERSION") == "2":

    @mcp.tool()
    def transfer(amount: int, to_account: str, memo: str) -> str:
        """Transfer money between accounts (with a memo)."""
        record("transfer", amount=amount, to_account=to_account, memo=memo)
        return f"Transferred ${amount} to {to_account} ({memo})."

elif os.environ.get("BANK_VERSION") == "currency":

    @mcp.tool()
    def transfer(amount: int, to_account: str, currency: str = "EUR") -> str:
        """Transfer money between accounts (in a currency)."""
        record("transfer", amount=amount, to_account=to_account, currency=currency)
        return f"Transferred {amount} {currency} to {to_account}."

elif os.environ.get("BANK_VERSION") == "changing":

    @mcp.tool()
    def transfer(amount: int, to_account: str) -> str:
        """Transfer money between accounts."""
        record("transfer", amount=amount, to_account=to_account)
        return f"Transferred ${amount} to {to_account}."

    def transfer_with_memo(amount: int, to_account: str, memo: str) -> str:
        """Transfer money between accounts (with a memo)."""
        record("transfer", amount=amount, to_account=to_account, memo=memo)
        return f"Transferred ${amount} to {to_account} ({memo})."

    @mcp.tool()
    async def require_memos(ctx: Context) -> str:
        """From now on, a transfer needs a memo: the server tells its listeners."""
        record("require_memos")
        mcp.remove_tool("transfer")
        mcp.add_tool(transfer_with_memo, name="transfer")
        await ctx.notify_tools_changed()
        return "Transfers need a memo now."

    @mcp.tool()
    def require_memos_quietly() -> str:
        """From now on, a transfer needs a memo, and the server tells nobody (a redeploy would)."""
        record("require_memos_quietly")
        mcp.remove_tool("transfer")
        mcp.add_tool(transfer_with_memo, name="transfer")
        return "Transfers need a memo now."

elif os.environ.get("BANK_VERSION") == "dated":

    @mcp.tool()
    def transfer(amount: int, to_account: str, on: date) -> str:
        """Transfer money between accounts on a day."""
        record("transfer", amount=amount, to_account=to_account, on=on.isoformat())
        return f"Transferred ${amount} to {to_account} on {on}."

elif os.environ.get("BANK_VERSION") == "untyped":

    @mcp.tool()
    def transfer(amount: Any, to_account: str) -> str:  # a schema that names no type
        """Transfer money between accounts (the amount's schema names no type)."""
        record("transfer", amount=amount, to_account=to_account)
        return f"Transferred ${amount} to {to_account}."

else:

    @mcp.tool()
    def transfer(amount: int, to_account: str) -> str:
        """Transfer money between accounts."""
        record("transfer", amount=amount, to_account=to_account)
        return f"Transferred ${amount} to {to_account}."


class Holder(BaseModel):
    holder: str = Field(description="Name of the account holder")
    overdraft: bool = Field(default=False, description="Allow an overdraft?")
    opens_on: date = Field(default=date(2026, 1, 1), description="The day the account opens")


async def ask_holder(kind: str) -> Elicit[Holder]:
    return Elicit(f"Who holds the new {kind} account?", Holder)


@mcp.tool()
async def open_account(kind: str, holder: Annotated[ElicitationResult[Holder], Resolve(ask_holder)]) -> str:
    """Open an account; the bank asks who holds it."""
    if holder.action != "accept":
        record("open_account", kind=kind, action=holder.action)
        return f"No {kind} account opened ({holder.action})."
    record("open_account", kind=kind, action="accept", holder=holder.data.holder)
    return f"Opened a {kind} account for {holder.data.holder}."


@mcp.tool()
def crash(reason: str) -> str:
    """Dies in the middle of the call."""
    record("crash", reason=reason)
    sys.stdout.flush()
    os._exit(3)


def serve_http(port: int) -> None:
    """Listen on loopback (port 0: a free one), print the endpoint's URL, serve until killed."""
    import asyncio
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)  # connections queue from now on: the URL may be used at once
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    config = uvicorn.Config(mcp.streamable_http_app(), log_level="warning")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        serve_http(int(sys.argv[2]))
    else:
        mcp.run()
