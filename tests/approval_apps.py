"""The apps of the approval tests (public API only): a bank whose ``transfer_money`` requires
approval, a ``deploy`` tool that does not, and a ``lookup`` tool, under an approval policy.

The scripted model reads "pay 500 to savings" and "deploy web" in the user's message, asks for
those calls, and answers with their results ("sent 500 to savings", or the denial), so a test
sees what the model was told.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from pydantic import BaseModel

from pausepoint import Agent, ApprovalPolicy, ModelRequest, Pausepoint, Role
from pausepoint.stores import SessionStore
from pausepoint.testing import ScriptedModel, Step, tool_call

PAY = re.compile(r"pay (\d+(?:\.\d+)?) to ([\w-]+)")
DEPLOY = re.compile(r"deploy (\w+)")


class Transfer(BaseModel):
    amount: Decimal
    to_account: str


def script(request: ModelRequest) -> Step:
    """Calls for what the user asked; then the calls' results, verbatim."""
    last = request.messages[-1]
    if last.role == "user":
        calls = [tool_call("transfer_money", {"amount": a, "to_account": t}) for a, t in PAY.findall(last.text)]
        calls += [tool_call("deploy", {"service": s}) for s in DEPLOY.findall(last.text)]
        return calls or f"You said: {last.text}"
    return "; ".join(p.output if isinstance(p.output, str) else json.dumps(p.output) for p in last.tool_responses)


class Clock:
    """A clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


def build(
    store: SessionStore | None = None,
    policy: ApprovalPolicy | None = None,
    *,
    ledger: list[str] | None = None,
    requires: bool | Callable[..., Any] = True,
    edits: bool = False,
    clock: Clock | None = None,
    app_policy: ApprovalPolicy | None = None,
    steps: Any = None,
    app: Pausepoint | None = None,
) -> tuple[Agent, ScriptedModel, list[str]]:
    """The bank agent (defined on ``app`` when given); every transfer and deploy that runs is
    appended to the ledger."""
    runs = ledger if ledger is not None else []
    ai = app or (Pausepoint(clock=clock, approval=app_policy) if clock else Pausepoint(approval=app_policy))

    @ai.tool(requires_approval=requires, allow_input_edits=edits)
    async def transfer_money(input: Transfer) -> str:
        """Move money."""
        runs.append(f"{input.amount}->{input.to_account}")
        return f"sent {input.amount} to {input.to_account}"

    @ai.tool()
    async def deploy(service: str) -> str:
        """Deploy a service."""
        runs.append(f"deploy:{service}")
        return f"deployed {service}"

    model = ScriptedModel(steps if steps is not None else script)
    agent = ai.define_agent(
        name="bank", model=model, tools=[transfer_money, deploy], store=store, approval=policy
    )  # fmt: skip
    return agent, model, runs


MEMBERS = {"alice": ["treasury"], "bob": ["treasury"], "carol": ["treasury"], "dave": ["auditor"], "erin": ["leads"]}


def treasury(**options: Any) -> ApprovalPolicy:
    """Treasury decides transfers (alice, bob, carol); ``options`` add to it."""
    return ApprovalPolicy(roles={"treasury": Role(tools=["transfer_money"])}, members=MEMBERS, **options)


def told(model: ScriptedModel) -> list[Any]:
    """What the model was last shown as tool results."""
    return [p.output for p in model.requests[-1].messages[-1].tool_responses]
