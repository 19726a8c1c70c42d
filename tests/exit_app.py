"""A job agent for ``test_detach_exit``, imported by the test and by the processes it starts:
``slow`` makes the model call ``slow_job``, which takes ten minutes (it must not run twice);
``note, then think`` makes it call ``note`` (which writes ``noted``, a file), then take a
minute over its result."""

from __future__ import annotations

import asyncio
from typing import Any

from pausepoint import Agent, Pausepoint
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, tool_call


def agent(path: str, started: asyncio.Event | None = None, noted: str | None = None) -> Agent:
    ai = Pausepoint()

    @ai.tool()
    def note() -> str:
        """Note that the turn got this far."""
        if noted is not None:
            with open(noted, "a") as file:
                file.write("noted\n")
        return "noted"

    @ai.tool()
    async def slow_job(seconds: float) -> str:
        """A job that takes its time (it must not run twice)."""
        if started is not None:
            started.set()
        await asyncio.sleep(seconds)
        return "done"

    async def script(request: Any) -> Any:
        last = request.messages[-1]
        if last.text == "slow":
            return [tool_call("slow_job", {"seconds": 600})]
        if last.text == "note, then think":
            return [tool_call("note", {})]
        if last.role == "tool" and "noted" in str(last.tool_responses[0].output):
            await asyncio.sleep(60)  # the model takes its time over the note's result
            return "Thought."
        return "Hello." if last.role == "user" else "The job stopped."

    tools = [slow_job, note]
    return ai.define_agent(name="jobs", model=ScriptedModel(script), tools=tools, store=SqliteSessionStore(path))
