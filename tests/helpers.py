"""Small agents shared by the runtime tests (public API only)."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from pausepoint import Agent, Interrupt, Pausepoint, ToolRunContext
from pausepoint.stores import SessionStore
from pausepoint.testing import ScriptedModel, Step, tool_call


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


def late_and_early_pauses(ai: Pausepoint) -> tuple[list[Any], list[Step]]:
    """Two tools on ``ai`` and the calls of them a model makes in one message: ``slow_check``,
    asked first, pauses after a while; ``quick_check``, asked second, pauses at once."""

    @ai.tool()
    async def slow_check(what: str) -> str:
        """Asked first; pauses after a while."""
        await asyncio.sleep(0.05)
        raise Interrupt({"what": what})

    @ai.tool()
    async def quick_check(what: str) -> str:
        """Asked second; pauses at once."""
        raise Interrupt({"what": what})

    return [slow_check, quick_check], [tool_call("slow_check", {"what": "a"}), tool_call("quick_check", {"what": "b"})]


def stop(proc: subprocess.Popen[Any]) -> None:
    """End a process a test started: SIGTERM, then SIGKILL if it is still there after 10 s."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
