"""Running tool calls: concurrently, each to one outcome — a result, a pause, or an error.

Nothing here writes to the store; the turn loop turns outcomes into records. What a tool hands
back — its result, its ``Interrupt``'s metadata, its error's message — is checked against the
JSON rules of ``_jsondata`` here: a value a session cannot keep becomes an error result the
model sees, never a record that cannot be written or read back.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_core import to_json

from ..content._jsondata import DEFAULT_LIMITS, JsonLimits, NotJsonData, json_data, printable
from ..content._messages import ToolRequestPart
from ..stores._base import DEFAULT_MAX_RECORD_BYTES
from ._tool import Interrupt, Tool, ToolRunContext

__all__ = ["CallJob", "Completed", "Outcome", "Paused", "dispatch"]


@dataclass(slots=True)
class CallJob:
    """One call to run: the model's request, and what a restart adds. A call with a
    ``refusal`` does not run: the refusal is its (error) result."""

    request: ToolRequestPart
    input: Any
    resumed_metadata: dict[str, Any] | None = None
    original_input: Any = None
    refusal: dict[str, Any] | None = None


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
    limits: JsonLimits = DEFAULT_LIMITS,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    traced: Callable[[CallJob], AbstractContextManager[Any]] | None = None,
) -> list[Outcome]:
    """Run every job concurrently; outcomes come back in the jobs' order.

    ``on_outcome`` is called as each call finishes (the turn records the outcomes in the
    jobs' order). Errors raised by tools become ``Completed(is_error=True)``; ``Interrupt`` becomes
    ``Paused``. A cancellation of the caller propagates; a ``CancelledError`` the tool raised
    itself (nothing cancelled this task) is the tool's failure, as any error. ``traced(job)``
    wraps each call (a span; its handle's ``done`` gets the outcome), and ``on_outcome`` runs
    inside it. A result (or a pause's input and metadata) that makes a record over
    ``max_record_bytes`` — the store's limit, past which nothing of the batch could be written
    once its tools ran — is an error result instead.
    """
    loop = asyncio.get_running_loop()
    thread = threading.get_ident()

    async def run(job: CallJob) -> Outcome:
        with traced(job) if traced is not None else nullcontext() as span:
            outcome = await _run_one(
                job, tools.get(job.request.name), session_id, principal, on_progress, loop, thread, limits
            )
            outcome = _recordable(outcome, max_record_bytes)
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
    limits: JsonLimits,
) -> Outcome:
    name = job.request.name
    if job.refusal is not None:
        return Completed(job, job.refusal, is_error=True)
    if tool is None:
        return Completed(job, {"error": f"unknown tool {name!r}"}, is_error=True)
    try:
        validated = tool.validate_input(job.input)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_context=False, include_input=False)
        detail = [{**error, "loc": list(error["loc"])} for error in errors]  # JSON, as every process reads it
        said = f"invalid input for tool {name!r}"
        if isinstance(job.input, str):  # the model's arguments, kept as text: they were no JSON object
            said += ": the arguments must be a JSON object of the tool's parameters, and were not"
        return Completed(job, {"error": said, "details": detail}, is_error=True, error=exc)
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
            signal.metadata = json_data(signal.metadata, limits)
            paused_input = json_data(tool.input_json(validated), limits)
        except NotJsonData as exc:
            problem = f"tool {name!r} paused with data this session cannot keep ({exc})"
            return Completed(job, _error(problem, exc), is_error=True, error=exc)
        return Paused(job, paused_input, signal)
    except asyncio.CancelledError as exc:
        if _cancelled_here():
            raise  # the caller (its timeout, a shutdown) cut the call short: the turn records that
        return _failed(job, exc, str(exc) or "something the tool awaited was cancelled")  # the tool's own
    except Exception as exc:  # a tool's failure is data for the model (or fails the turn)
        return _failed(job, exc)
    try:
        return Completed(job, json_data(output, limits))
    except NotJsonData as exc:
        problem = f"tool {name!r} ran (what it did took effect), but returned a result this session cannot keep ({exc})"
        return Completed(job, _error(problem, exc), is_error=True, error=exc)


def _failed(job: CallJob, exc: BaseException, said: str | None = None) -> Completed:
    """A tool's failure: data for the model (or, under ``tool_errors="fail"``, the turn's end)."""
    text = f"{type(exc).__name__}: {exc if said is None else said}"
    return Completed(job, {"error": printable(text)}, is_error=True, error=exc)


def _cancelled_here() -> bool:
    """Whether a ``CancelledError`` out of a tool is this task being cancelled — a caller's
    timeout, a shutdown, ``gather`` cancelling the batch — and not the tool's own: a tool that
    awaits a task something else cancelled gets one too, and that is the tool failing, which
    taken for the caller's cancellation answered a running server's request 503
    ``shutting_down`` and raised ``CancelledError`` into a caller nobody cancelled."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


# What a call's record holds besides its result (its ref, name, kind; a pause's fingerprint,
# times, trace): room left for it under the store's record limit (a quarter of a small limit).
_RECORD_HEADROOM = 16 * 1024


def _recordable(outcome: Outcome, max_record_bytes: int) -> Outcome:
    """``outcome``, or — when the record it makes would not fit the store's limit — an error
    result saying so: the tool ran, and a result that cannot be written would leave its batch
    unwritten and the call presumed lost, its result never known."""
    room = max_record_bytes - min(_RECORD_HEADROOM, max_record_bytes // 4)
    if isinstance(outcome, Completed):
        value: Any = outcome.output
    elif isinstance(outcome, Paused):
        value = [outcome.input, outcome.signal.metadata]
    else:  # pragma: no cover - every outcome is one of the two
        return outcome
    if type(value) is str and len(value) * 6 <= room:  # the commonest result: no need to measure
        return outcome
    size = len(to_json(value))
    if size <= room:
        return outcome
    name = outcome.job.request.name
    what = "result" if isinstance(outcome, Completed) else "pause's input and metadata"
    problem = f"the {what} of tool {name!r} is {size} bytes of JSON: more than a record of this store holds"
    if isinstance(outcome, Completed):
        problem += " (the tool ran: what it did took effect)"  # never to be run again on this error's word
    return Completed(
        outcome.job, {"error": problem, "size": size, "limit": room}, is_error=True, error=ValueError(problem)
    )


def _error(problem: str, exc: NotJsonData) -> dict[str, Any]:
    return {"error": problem, "details": [{**exc.details(), "message": exc.problem}]}
