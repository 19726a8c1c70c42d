"""Small agents shared by the runtime tests (public API only)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from pausepoint import Agent, Interrupt, Pausepoint, ToolRunContext
from pausepoint.stores import SessionStore
from pausepoint.testing import ScriptedModel, Step


class Approval(BaseModel):
    approved: bool


class Ask(BaseModel):
    question: str


def approvals_agent(
    store: SessionStore, steps: Sequence[Step], *, ledger: list[str] | None = None, **agent_options: Any
) -> tuple[Agent, ScriptedModel]:
    """An agent with an ``ask`` interrupt (validated Approval output), a ``pay`` tool that counts
    its runs in ``ledger``, a ``lookup`` tool that never pauses, and a ``boom`` tool that raises."""
    ai = Pausepoint()
    runs = ledger if ledger is not None else []
    ask = ai.define_interrupt(name="ask", description="Ask a person.", input_schema=Ask, output_schema=Approval)

    @ai.tool()
    def pay(amount: int) -> str:
        """Pay an amount."""
        runs.append(f"pay:{amount}")
        return f"paid {amount}"

    @ai.tool()
    async def lookup(key: str) -> str:
        """Look something up."""
        runs.append(f"lookup:{key}")
        return f"value of {key}"

    @ai.tool()
    async def boom(reason: str) -> str:
        """Always fails."""
        runs.append("boom")
        raise RuntimeError(reason)

    @ai.tool()
    async def guarded(action: str, ctx: ToolRunContext) -> str:
        """Pauses unless restarted with approval."""
        if not (ctx.resumed_metadata or {}).get("ok"):
            raise Interrupt({"action": action})
        runs.append(f"guarded:{action}")
        return f"did {action}"

    model = ScriptedModel(steps)
    agent = ai.define_agent(
        name="approvals", model=model, tools=[ask, pay, lookup, boom, guarded], store=store, **agent_options
    )
    return agent, model


async def version(store: SessionStore, session_id: str) -> int:
    summary = await store.get_summary(session_id)
    assert summary is not None
    return summary.version
