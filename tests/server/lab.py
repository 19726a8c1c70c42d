"""The lab agent the wire tests drive: the reference bench's scripted banking model (one
message can ask for a balance beside an approval, or for two approvals), a shell tool that
pauses itself and takes no edited input, and a slow step for detached turns.

Its model, given the last message:

- user "Run: <cmd>" → ``run_shell(cmd)`` (pauses unless restarted with ``tool_approved``);
- user "Slow: <text>" → waits until cancelled (a model call to abort), noting it in ``events``;
- user "Crash: <text>" → raises a ``RuntimeError`` of its own (a model function's bug);
- user "Crash after: check balance of <account>" → ``get_balance``, then raises as above when given
  its result;
- user "[Check balance of A and] transfer $X to Y [and $Z to W]" → ``get_balance`` and one
  ``userApproval`` per transfer, in one message;
- a tool message approving transfers → ``transfer_money`` for each; otherwise a summary text.

``events`` (a ``LabEvents``) sees the slow step start and be cancelled, and every tool run —
in this process (thread-served tests) and, with ``events_path``, in a file (process tests).
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pausepoint import Interrupt, Message, ModelRequest, ModelResponse, Pausepoint, TextPart, ToolRunContext
from pausepoint.stores import SessionStore
from pausepoint.testing import last_tool_results, tool_call

TRANSFER = re.compile(r"\$(\d+) to (\w+)")
BALANCE = re.compile(r"[Cc]heck balance of (\w+)")


class LabEvents:
    """What the lab's model and tools did, readable from another thread (or a file)."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self.lines: list[str] = []
        self.slow_started = threading.Event()
        self.slow_cancelled = threading.Event()

    def note(self, line: str) -> None:
        self.lines.append(line)
        if line == "slow:started":
            self.slow_started.set()
        elif line == "slow:cancelled":
            self.slow_cancelled.set()
        if self.path is not None:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, f"{line}\n".encode())
            finally:
                os.close(fd)


def read_events(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


class Approval(BaseModel):
    action: str
    details: str


class ApprovalOutput(BaseModel):
    approved: bool
    feedback: str = ""


class Transfer(BaseModel):
    amount: Decimal
    to_account: str


def build(store: SessionStore, events: LabEvents, *, abandon_after: timedelta = timedelta(minutes=15)) -> Pausepoint:
    ai = Pausepoint()

    async def model(request: ModelRequest) -> ModelResponse:
        last = request.messages[-1]
        if last.role == "user":
            text = last.text
            if text.startswith("Slow:"):
                events.note("slow:started")
                try:
                    await asyncio.Event().wait()  # until cancelled
                except asyncio.CancelledError:
                    events.note("slow:cancelled")
                    raise
            if text.startswith("Crash:"):
                raise RuntimeError(f"lab model bug, internal detail {text!r}")
            if text.startswith("Run:"):
                return _reply([tool_call("run_shell", {"command": text.removeprefix("Run:").strip()})])
            parts: list[Any] = []
            balance = BALANCE.search(text)
            if balance:
                parts.append(tool_call("get_balance", {"account": balance[1]}))
            for amount, account in TRANSFER.findall(text):
                details = f"Transfer ${amount} to {account}"
                parts.append(tool_call("userApproval", {"action": "transfer_money", "details": details}))
            return _reply(parts or [TextPart(f"You said: {text}")])
        if request.messages[-3].role == "user" and request.messages[-3].text.startswith("Crash after"):
            raise RuntimeError("lab model bug after a tool ran, internal detail")
        asked = {p.ref: p for p in request.messages[-2].tool_requests}
        transfers = []
        for response in last.tool_responses:
            if response.name == "userApproval" and (response.output or {}).get("approved"):
                found = TRANSFER.search(asked[response.ref].input["details"])
                if found:
                    transfers.append(tool_call("transfer_money", {"amount": found[1], "to_account": found[2]}))
        if transfers:
            return _reply(transfers)
        results = last_tool_results(request)
        return _reply([TextPart("Done. " + " | ".join(f"{name} -> {output}" for name, output in results.items()))])

    ai.define_model(name="lab", fn=model)

    user_approval = ai.define_interrupt(
        name="userApproval",
        description="Ask the user for approval.",
        input_schema=Approval,
        output_schema=ApprovalOutput,
    )

    @ai.tool()
    async def get_balance(account: str) -> str:
        """Read a balance (never pauses)."""
        events.note(f"get_balance:{account}")
        return f"{account}: $1234.56"

    @ai.tool()
    async def transfer_money(input: Transfer) -> str:
        """Transfer money after approval."""
        events.note(f"transfer:{input.amount}->{input.to_account}")
        return f"Transferred ${input.amount} to {input.to_account}."

    @ai.tool()
    async def run_shell(command: str, ctx: ToolRunContext) -> dict[str, Any]:
        """Run a command after approval (no edited input)."""
        if not (ctx.resumed_metadata or {}).get("tool_approved"):
            raise Interrupt({"command": command, "reason": "The command can modify files."})
        events.note(f"run_shell:{command}")
        return {"stdout": f"(simulated) ran {command!r}"}

    ai.define_agent(
        name="labAgent",
        model="lab",
        tools=[user_approval, get_balance, transfer_money, run_shell],
        store=store,
        abort_poll=0.05,
        abandon_after=abandon_after,
    )
    return ai


def _reply(parts: list[Any]) -> ModelResponse:
    return ModelResponse(Message("model", parts))
