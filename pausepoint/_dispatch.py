"""Running tool calls: concurrently, each to one outcome — a result, a pause, or an error.

Nothing here writes to the store; the turn loop turns outcomes into records.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ._messages import ToolRequestPart
from ._tools import Interrupt, Tool, ToolRunContext, jsonable

__all__ = ["CallJob", "Completed", "Outcome", "Paused", "dispatch"]


@dataclass(slots=True)
class CallJob:
    """One call to run: the model's request, and what a restart adds."""

    request: ToolRequestPart
    input: Any
    resumed_metadata: dict[str, Any] | None = None
    original_input: Any = None


@dataclass(slots=True)
class Completed:
    job: CallJob
    output: Any
    is_error: bool = False
    error: BaseException | None = None


@dataclass(slots=True)
class Paused:
    job: CallJob
    input: Any
    signal: Interrupt


Outcome = Completed | Paused


async def dispatch(
    jobs: list[CallJob],
    tools: Mapping[str, Tool],
    *,
    session_id: str,
    principal: str | None,
    on_progress: Callable[[CallJob, Any], None] | None = None,
    on_outcome: Callable[[Outcome], None] | None = None,
    traced: Callable[[CallJob], AbstractContextManager[Any]] | None = None,
) -> list[Outcome]:
    """Run every job concurrently; outcomes come back in the jobs' order.

    ``on_outcome`` is called as each call finishes (streaming shows a pause the moment it
    happens). Errors raised by tools become ``Completed(is_error=True)``; ``Interrupt`` becomes
    ``Paused``. Cancellation propagates. ``traced(job)`` wraps each call (a span; its handle's
    ``done`` gets the outcome), and ``on_outcome`` runs inside it.
    """
    loop = asyncio.get_running_loop()
    thread = threading.get_ident()

    async def run(job: CallJob) -> Outcome:
        with traced(job) if traced is not None else nullcontext() as span:
            outcome = await _run_one(job, tools.get(job.request.name), session_id, principal, on_progress, loop, thread)
            if span is not None:
                span.done(outcome)
            if on_outcome is not None:
                on_outcome(outcome)
        return outcome

    if len(jobs) == 1:
        return [await run(jobs[0])]
    return list(await asyncio.gather(*(run(job) for job in jobs)))


async def _run_one(
    job: CallJob,
    tool: Tool | None,
    session_id: str,
    principal: str | None,
    on_progress: Callable[[CallJob, Any], None] | None,
    loop: asyncio.AbstractEventLoop,
    thread: int,
) -> Outcome:
    name = job.request.name
    if tool is None:
        return Completed(job, {"error": f"unknown tool {name!r}"}, is_error=True)
    try:
        validated = tool.validate_input(job.input)
    except ValidationError as exc:
        detail = exc.errors(include_url=False, include_context=False, include_input=False)
        return Completed(
            job, {"error": f"invalid input for tool {name!r}", "details": detail}, is_error=True, error=exc
        )
    ctx = ToolRunContext(
        session_id=session_id,
        ref=job.request.ref,
        principal=principal,
        resumed_metadata=job.resumed_metadata,
        original_input=job.original_input,
        _progress=None if on_progress is None else (lambda data: on_progress(job, data)),
        _loop=loop,
        _loop_thread=thread,
    )
    try:
        output = await tool.run(validated, ctx)
    except Interrupt as signal:
        try:
            signal.metadata = jsonable(signal.metadata)
        except (TypeError, ValueError) as exc:  # PydanticSerializationError is a ValueError
            return Completed(job, {"error": f"Interrupt metadata is not JSON data: {exc}"}, is_error=True, error=exc)
        return Paused(job, validated.model_dump(mode="json"), signal)
    except Exception as exc:  # a tool's failure is data for the model (or fails the turn)
        return Completed(job, {"error": f"{type(exc).__name__}: {exc}"}, is_error=True, error=exc)
    return Completed(job, output)
