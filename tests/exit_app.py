"""A job agent for ``test_detach_exit``, imported by the test and by the processes it starts:
``slow`` makes the model call ``slow_job``, which takes ten minutes (it must not run twice)."""

from __future__ import annotations

import asyncio
from typing import Any

from pausepoint import Agent, Pausepoint
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, tool_call


def agent(path: str, started: asyncio.Event | None = None) -> Agent:
    ai = Pausepoint()

    @ai.tool()
    async def slow_job(seconds: float) -> str:
        """A job that takes its time (it must not run twice)."""
        if started is not None:
            started.set()
        await asyncio.sleep(seconds)
        return "done"

    def script(request: Any) -> Any:
        if request.messages[-1].text == "slow":
            return [tool_call("slow_job", {"seconds": 600})]
        return "Hello." if request.messages[-1].role == "user" else "The job stopped."

    return ai.define_agent(name="jobs", model=ScriptedModel(script), tools=[slow_job], store=SqliteSessionStore(path))
