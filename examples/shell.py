"""The shell example: run_shell pauses itself for risky commands, and runs once approved.

Run it with ``python -m examples.shell`` (offline scripted model).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from pausepoint import Agent, AgentFinishReason, Interrupt, Model, ModelRequest, Pausepoint, Plugin, ToolRunContext
from pausepoint.stores import InMemorySessionStore, SessionStore
from pausepoint.testing import ScriptedModel, Step, last_tool_results, tool_call

RISKY = ("rm", "mv", "dd", "chmod", "chown", "truncate")


class RunShellInput(BaseModel):
    command: str


def is_risky(command: str) -> bool:
    words = command.split()
    return bool(words) and words[0] in RISKY


def shell_script(request: ModelRequest) -> Step:
    """A stand-in model: 'Run: <command>' calls run_shell; a tool result is summarised."""
    last = request.messages[-1]
    if last.role == "user":
        if last.text.startswith("Run:"):
            return tool_call("run_shell", {"command": last.text.removeprefix("Run:").strip()})
        return "Tell me a command to run, as 'Run: <command>'."
    result = last_tool_results(request).get("run_shell")
    return f"Result: {result}"


def build(
    store: SessionStore | None = None,
    executed: list[dict[str, Any]] | None = None,
    *,
    model: str | Model | None = None,
    plugins: Sequence[Plugin] = (),
) -> tuple[Pausepoint, Agent]:
    """The app and its shell agent. Nothing is executed: ``executed`` records what would run."""
    ai = Pausepoint(plugins=plugins)

    @ai.tool(allow_input_edits=True)
    async def run_shell(input: RunShellInput, ctx: ToolRunContext) -> dict[str, Any]:
        """Run a shell command after a safety check."""
        if is_risky(input.command) and not (ctx.resumed_metadata or {}).get("tool_approved"):
            raise Interrupt({"command": input.command, "reason": "The command can modify files."})
        record = {"command": input.command, "resumed_metadata": ctx.resumed_metadata}
        if ctx.original_input is not None:
            record["original_input"] = ctx.original_input
        if executed is not None:
            executed.append(record)
        return {"stdout": f"(simulated) ran {input.command!r}", "exit_code": 0}

    agent = ai.define_agent(
        name="shellAgent",
        model=model if model is not None else ScriptedModel(shell_script),
        system="Use run_shell to run commands.",
        description="Runs shell commands; the risky ones wait for your approval.",
        tools=[run_shell],
        store=store if store is not None else InMemorySessionStore(),
    )
    return ai, agent


async def main() -> None:
    _, agent = build()
    chat = agent.chat()
    res = await chat.send("Run: rm -rf build/")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    pause = res.interrupts[0]
    print(f"paused: {pause.name} {pause.input} because {pause.metadata}")
    res = await chat.resume(restart=[pause.restart()])
    again = res.interrupts[0]
    print(f"restarted without approval: paused again ({res.finish_reason}), same ref {again.ref}, "
          f"new pause_id {again.pause_id}")  # fmt: skip
    assert (again.ref, again.pause_id != pause.pause_id) == (pause.ref, True)  # one ref per call, a new pause
    res = await chat.resume(restart=[again.restart(resumed_metadata={"tool_approved": True})])
    print(f"agent> {res.text}  [{res.finish_reason}]")


if __name__ == "__main__":
    asyncio.run(main())
