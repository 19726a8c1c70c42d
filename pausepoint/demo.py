"""The banking demo: ``transfer_money`` guarded by a ``userApproval`` interrupt.

This is the agent ``pausepoint demo`` serves (and ``examples/banking.py`` re-exports):
``build(store, ledger, model=..., plugins=...)`` gives the app and its ``bankingAgent``. With no
model it runs on ``ScriptedModel(banking_script)``, an offline stand-in that does what the
system prompt asks. ``steered(model)`` wraps a very small local model (SmolLM2-135M) that
follows the tool-call format but cannot decide by itself when to call which tool.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from pydantic import BaseModel

from ._agent import Agent
from ._app import Pausepoint
from ._models import ChunkSink, Model, ModelRequest, ModelResponse, Plugin
from ._presentation import PauseDisplay
from .stores import InMemorySessionStore, SessionStore
from .testing import ScriptedModel, Step, last_tool_results, tool_call

__all__ = [
    "AGENT_NAME",
    "ApprovalOutput",
    "DESCRIPTION",
    "SYSTEM",
    "TransferMoneyInput",
    "UserApprovalInput",
    "banking_script",
    "next_tool_choice",
    "build",
    "steered",
]

AGENT_NAME = "bankingAgent"
SYSTEM = "If the user wants to transfer money, ALWAYS use userApproval before transfer_money."
DESCRIPTION = "Moves money between accounts. Every transfer waits for your approval."


class UserApprovalInput(BaseModel):
    action: str
    details: str


class ApprovalOutput(BaseModel):
    approved: bool
    feedback: str = ""


class TransferMoneyInput(BaseModel):
    amount: Decimal
    to_account: str


TRANSFER = re.compile(r"\$(\d+(?:\.\d+)?) to (\w+)")
_MONEY_WORDS = re.compile(r"\$|\b(transfer|send|pay|move|wire)\b", re.IGNORECASE)


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


def next_tool_choice(request: ModelRequest) -> str:
    """Which call the banking flow allows next: approval for a money request, the transfer once
    approved, otherwise a plain answer (so a denial is never followed by a transfer)."""
    last = request.messages[-1]
    if last.role == "user":
        return "userApproval" if _MONEY_WORDS.search(last.text) else "none"
    approval = last_tool_results(request).get("userApproval")
    if isinstance(approval, dict) and approval.get("approved") is True:
        return "transfer_money"
    return "none"


class _Steered:
    def __init__(self, model: Model) -> None:
        self.name = model.name
        self._model = model

    async def generate(self, request: ModelRequest, on_chunk: ChunkSink | None = None) -> ModelResponse:
        # A one-entry list applies to every call of the turn (a bare name only to its first call).
        config = {**request.config, "tool_choice": [next_tool_choice(request)]}
        return await self._model.generate(dataclasses.replace(request, config=config), on_chunk)


def steered(model: Model) -> Model:
    """``model`` with its ``tool_choice`` set per call by the banking flow (``next_tool_choice``).

    For models too small to choose tools themselves: the local provider constrains each call
    to the chosen tool's schema, so the model only fills in the arguments and the answer.
    """
    return _Steered(model)


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
    ``agent_options`` go to ``define_agent`` (``config=``, ``abandon_after=``, ...).
    """
    ai = Pausepoint(plugins=plugins)

    user_approval = ai.define_interrupt(
        name="userApproval",
        description="Ask the user for approval before proceeding with a sensitive action.",
        input_schema=UserApprovalInput,
        output_schema=ApprovalOutput,
        display=PauseDisplay(title="{details}", summary="The agent asks before it runs {action}.", risk="high"),
    )

    @ai.tool()
    async def transfer_money(input: TransferMoneyInput) -> str:  # noqa: A002 - the reference's name
        """Transfer money after approval."""
        if ledger is not None:
            ledger.append(f"{input.amount}->{input.to_account}")
        return f"Transferred ${input.amount} to {input.to_account}."

    agent = ai.define_agent(
        name=AGENT_NAME,
        model=model if model is not None else ScriptedModel(banking_script),
        system=SYSTEM,
        description=DESCRIPTION,
        tools=[user_approval, transfer_money],
        store=store if store is not None else InMemorySessionStore(),
        **agent_options,
    )
    return ai, agent
