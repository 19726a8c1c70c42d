"""Whether an answer fits a pause — the one place that decides.

One identity for a pause: an answer names the call by its ref (the one ref every surface shows)
and, when it was built from a pending interrupt, the pause of that call by its ``pause_id``.
``locate`` finds the pause an answer names, and refuses a bare ref that could stand for a pause
showing something else than the one its approver saw (``PauseChanged``); ``fit`` then checks the
pause is live and the answer one its tool takes, and returns the claim the answer makes. Pure:
nothing here reads a store or writes a record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from ..content._jsondata import JsonLimits, NotJsonData, json_data, time_text
from ..errors import (
    AlreadyResolved,
    InputEditNotAllowed,
    InterruptExpired,
    InterruptNameMismatch,
    InvalidAnswer,
    NotPaused,
    PauseChanged,
    StaleInterrupt,
    ToolDefinitionChanged,
    UnknownInterrupt,
)
from ..session._interrupts import ToolResponse, ToolRestart
from ..session._records import ApprovalPaused, CallAnswered
from ..session._state import Pause, SessionState
from ..session._views import approving
from ..tools._tool import Tool
from ._context import Answer, AnswerContext

__all__ = ["ANSWER_THEM", "BY_PAUSE_ID", "call_name", "fit", "locate", "unknown_call"]


def call_name(state: SessionState, ref: Any) -> str:
    """The tool name of the call ``ref`` names (by the call's ref, or by the pause's own ref that
    logs written before refs were per call showed), whether or not it is paused now; ``""``
    when the session has no such call (an answer by that name is refused as unknown)."""
    if not isinstance(ref, str):
        return ""
    call = state.calls.get(ref)
    if call is not None:
        return call.request.name
    legacy = state.pauses.get(ref)
    return "" if legacy is None else legacy.record.name


def unknown_call(ref: str, session_id: str) -> UnknownInterrupt:
    """The refusal of an answer to ``ref``, a call session ``session_id`` does not have — also
    ``pausepoint.client``'s for a ref no request path can carry, in the same words."""
    return UnknownInterrupt(f"no paused call with ref {ref!r} in session {session_id!r}", ref=ref)


def locate(state: SessionState, answer: Answer, via: str) -> Pause:
    """The pause ``answer`` names: by the call's ref (its ``pause_id``, or the live pause), or by
    the pause's own ref that logs written before refs were per call showed; a refusal otherwise."""
    ref, name = answer.ref, answer.name
    legacy = state.pauses.get(ref) if answer.pause_id is None else None
    if legacy is not None:
        return legacy
    call = state.calls.get(ref)
    if call is None:
        raise unknown_call(ref, state.session_id)
    if call.request.name != name:
        raise InterruptNameMismatch(
            f"ref {ref!r} is a call of {call.request.name!r}, not {name!r}", ref=ref, actual=call.request.name
        )
    if answer.pause_id is not None:  # that pause only: "" names none
        pause = state.pauses.get(answer.pause_id)
        if pause is None or pause.record.call_ref != ref:
            raise UnknownInterrupt(
                f"call {ref!r} has no pause {answer.pause_id!r} in session {state.session_id!r}",
                ref=ref,
                pause_id=answer.pause_id,
            )
        return pause
    if call.pause is None:
        if call.turn != state.turn:
            raise StaleInterrupt(
                f"call {ref!r} belongs to turn {call.turn}; the session is at turn {state.turn}", ref=ref
            )
        raise NotPaused(f"call {ref!r} of {name!r} is not paused (status: {call.status})", ref=ref)
    pause = state.pauses[call.pause]
    if call.changed and not _binds_itself(answer):
        raise _changed(pause, via)
    return pause


def _binds_itself(answer: Answer) -> bool:
    """Whether a bare ref's answer says what it decides without the pause it was meant for: a
    denial widens nothing, and a restart carrying an input runs that input (``_edit``
    refuses it when it is neither the live input nor an edit the tool takes)."""
    if isinstance(answer, ToolResponse):
        return answer.decision == "deny"
    return answer.replace_input is not None


#: how an answer names the live pause, said on each surface (``AnswerContext.via``)
BY_PAUSE_ID = {
    "python": "PendingInterrupt.respond/restart carry it",
    "http": "pause_id in the request body",
    "link": "the link to the live pause",
    "slack": "the live pause's card",
    "genkit": "answer from the snapshot that shows it",
    "mcp": "answer_pause's pause_id",
    "terminal": "the chat asks about the live pause",
}

# What a message sent while calls are paused is told to do, in the words of the surface it came
# through (its ``via``): the same refusal (``PendingInterrupts``) everywhere.
ANSWER_THEM = {
    "python": "answer them with resume() or drop them with cancel_pending()",
    "http": "answer them (POST .../interrupts/{ref}/approve, /deny, /respond, or .../resume) or drop them "
    "(POST .../cancel)",
    "genkit": "answer them first (a resume with a toolResponse or a restart for each ref the output marks)",
    "mcp": "answer them with answer_pause (list_pending shows them)",
    "terminal": "answer them first (the chat asks about each pause)",
}


def _decided(pause: Pause) -> str:
    """How an answered pause was decided, as the audit trail names it: "approve by bob at ..."."""
    done = pause.answer
    assert done is not None
    decision = "approve" if approving(pause, done) else done.decision
    by = f" by {done.principal}" if done.principal else ""
    return f"{decision}{by} at {time_text(done.at)}"


def _changed(pause: Pause, via: str) -> PauseChanged:
    record = pause.record
    how = BY_PAUSE_ID.get(via, BY_PAUSE_ID["python"])
    return PauseChanged(
        f"call {record.call_ref!r} of {record.name!r} paused again and its live pause shows another input or "
        f"metadata than an earlier one: an answer by the ref alone may be meant for what the earlier pause "
        f"showed. Answer the live pause by its pause_id {record.ref!r} ({how})",
        ref=record.call_ref,
        pause_id=record.ref,
    )


def fit(
    state: SessionState,
    answer: Answer,
    tools: Mapping[str, Tool],
    ctx: AnswerContext,
    allow_changed_tools: bool,
) -> tuple[Pause, CallAnswered]:
    """The pause ``answer`` answers, and the claim of it the answer makes — or the
    ``ResumeRefused`` that says why it does not fit: the one place that decides. The pause is
    found by identity (``locate``), must be live now (``_live``), and the answer must be one its
    tool takes (``_claim``)."""
    pause = locate(state, answer, ctx.via)
    tool = _live(state, pause, answer, tools, ctx, allow_changed_tools)
    return pause, _claim(state, pause, answer, tool, ctx)


def _live(
    state: SessionState,
    pause: Pause,
    answer: Answer,
    tools: Mapping[str, Tool],
    ctx: AnswerContext,
    allow_changed_tools: bool,
) -> Tool | None:
    """The tool of ``pause``, if the pause may be answered now by an answer of that name: not
    answered yet, of this turn, not expired, its tool defined as it was when it paused — or, for
    a denial (which runs nothing), None when the tool is no longer defined."""
    paused = pause.record
    ref, name = paused.call_ref, answer.name
    if paused.name != name:
        raise InterruptNameMismatch(
            f"ref {ref!r} is a call of {paused.name!r}, not {name!r}", ref=ref, actual=paused.name
        )
    if pause.answer is not None:
        done = pause.answer
        if done.decision == "expire":  # settled by the expiry sweep: the same refusal as before it ran
            expired = pause.expires_at or done.at
            raise InterruptExpired(f"the pause of {name!r} {ref!r} expired at {time_text(expired)}", ref=ref)
        latest = state.calls[ref].pause
        newer = state.pauses.get(latest) if latest is not None and latest != paused.ref else None
        # named only while it can be answered: not answered, nor expired (unsettled yet)
        live = newer is not None and newer.answer is None and not (newer.expires_at and newer.expires_at <= ctx.now)
        if newer is None:
            again = ""
        elif live:
            again = f"; the call paused again since: answer its new pause {latest!r}"
        elif newer.answer is None and newer.expires_at is not None:
            again = f"; the call paused again since, and that pause expired at {time_text(newer.expires_at)}"
        else:
            again = f"; the call paused again since, and that pause was resolved too ({_decided(newer)})"
        raise AlreadyResolved(
            f"the pause of {name!r} {ref!r} was already resolved ({_decided(pause)}){again}",
            ref=ref,
            decision="approve" if approving(pause, done) else done.decision,  # as the audit trail names it
            pause_id=paused.ref,
            **({"live_pause_id": latest} if live else {}),
        )
    if paused.turn != state.turn:
        raise StaleInterrupt(
            f"the pause of call {ref!r} belongs to turn {paused.turn}; the session is at turn {state.turn}", ref=ref
        )
    if pause.expires_at is not None and pause.expires_at <= ctx.now:
        raise InterruptExpired(f"the pause of {name!r} {ref!r} expired at {time_text(pause.expires_at)}", ref=ref)
    tool = tools.get(name)
    denial = isinstance(answer, ToolResponse) and answer.decision == "deny"  # runs nothing, checks no output
    if tool is None:
        if denial:
            return None  # a deploy removed the tool: its pause may still be denied, one by one
        raise ToolDefinitionChanged(
            f"tool {name!r} paused in this session is no longer defined on the agent; deny the pause, or "
            "cancel_pending drops every open one",
            ref=ref,
        )
    if tool.fingerprint != paused.fingerprint and not tool.runs_changed and not denial:
        raise ToolDefinitionChanged(  # allow_changed_tools or not: its call would not be sent, its answer lost
            f"tool {name!r} changed since it paused, and its calls are not sent while it differs (an MCP "
            "server's tool); deny the pause, or cancel_pending drops every open one",
            ref=ref,
        )
    if tool.fingerprint != paused.fingerprint and not allow_changed_tools and not denial:
        raise ToolDefinitionChanged(
            f"tool {name!r} changed since it paused (its name or schemas differ); define the agent with "
            "allow_changed_tools=True to answer it anyway, or drop the pause with cancel_pending",
            ref=ref,
        )
    return tool


def _claim(state: SessionState, pause: Pause, answer: Answer, tool: Tool | None, ctx: AnswerContext) -> CallAnswered:
    """The claim ``answer`` makes of the live ``pause``: an answer handed back to a question the
    call asked mid-way, a restart (perhaps of an edited input), a denial, or a result."""
    paused = pause.record
    ref, name = paused.call_ref, answer.name
    claim = CallAnswered(
        ref=paused.ref,
        call_ref=ref,
        name=name,
        decision="restart",
        at=ctx.now,
        principal=ctx.principal,
        via=ctx.via,
        metadata=_merge(ctx.metadata, answer.metadata if isinstance(answer, ToolResponse) else None),
        idempotency_key=ctx.idempotency_key,
        request_hash=ctx.request_hash,
    )
    try:
        handed = None if tool is None else tool.answer_restart(paused.metadata, answer)
    except ValueError as exc:
        raise InvalidAnswer(f"the answer to {name!r} is not valid for its question: {_why(exc)}", ref=ref) from exc
    if handed is not None:  # the call asked a question mid-way: the answer goes back to it
        claim.resumed_metadata = _kept(handed, ctx.limits, ref, f"the answer to {name!r}")
        claim.reason = answer.reason if isinstance(answer, ToolResponse) else None
        return claim
    if isinstance(answer, ToolRestart):
        assert tool is not None  # only a denial goes on without its tool (``_live``)
        claim.resumed_metadata = dict(answer.resumed_metadata or {})
        if answer.replace_input is not None:
            claim.replace_input = _edit(state, pause, answer, tool, ctx)
        return claim
    claim.decision = answer.decision
    if answer.decision == "deny" or tool is None:
        claim.reason = answer.reason or ""  # one record for a denial without a reason, however given
        claim.output = {"denied": True, "reason": claim.reason}
        return claim
    if isinstance(pause.record, ApprovalPaused) and pause.record.approval.gated:  # paused before it ran: it
        claim.output = _kept(answer.output, ctx.limits, ref, f"the answer to {name!r}")  # takes no result
        return claim  # (the policy refuses it: DecisionNotAllowed), whatever its shape
    try:
        output = tool.validate_output(answer.output)
    except (ValidationError, TypeError, ValueError) as exc:  # a PydanticSerializationError is a ValueError
        given = "" if answer.output is not None else " (no output was given)"
        raise InvalidAnswer(
            f"the answer to {name!r} is not valid for its output schema{given}: {_why(exc)}", ref=ref
        ) from exc
    # The schema may make new values (a float field reads "nan" as NaN): check what is kept.
    claim.output = output if tool.output_adapter is None else _kept(output, ctx.limits, ref, f"the answer to {name!r}")
    return claim


def _why(exc: Exception) -> str:
    """What is wrong, a person's words: each field's problem (not pydantic's report of the
    model's name, the input echoed and a documentation URL)."""
    if not isinstance(exc, ValidationError):
        return str(exc)
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'the value'}: {e['msg']}" for e in exc.errors(include_url=False)
    )


def _edit(state: SessionState, pause: Pause, answer: ToolRestart, tool: Tool, ctx: AnswerContext) -> Any:
    """The input a restart replaces the paused one with (None: the same input again, no edit),
    validated; refused where the tool takes no edits."""
    paused = pause.record
    ref, name = paused.call_ref, answer.name
    try:
        validated = tool.validate_input(answer.replace_input)
    except ValidationError as exc:
        if not tool.allow_input_edits:
            raise InputEditNotAllowed(
                f"tool {name!r} does not accept edited input (define it with allow_input_edits=True)", ref=ref
            ) from None
        raise InvalidAnswer(f"replacement input for {name!r} is invalid: {_why(exc)}", ref=ref) from exc
    replaced = tool.input_json(validated)
    if replaced == paused.input or answer.replace_input == paused.input or _reads_as(tool, paused.input, validated):
        return None  # the same input again is no edit (Genkit's clients send it that way)
    if not tool.allow_input_edits:
        if answer.pause_id is None and state.calls[ref].changed:
            raise _changed(pause, ctx.via)  # the input an earlier pause showed, not an edit
        raise InputEditNotAllowed(
            f"tool {name!r} does not accept edited input (define it with allow_input_edits=True)", ref=ref
        )
    return _kept(replaced, ctx.limits, ref, f"replacement input for {name!r}")


def _reads_as(tool: Tool, given: Any, validated: BaseModel) -> bool:
    """Whether the tool reads ``given`` as the values ``validated`` holds ("500.0" as "500": the
    same Decimal) — the same input spelled otherwise is no edit either."""
    try:
        return bool(tool.validate_input(given) == validated)
    except ValidationError:
        return False


def _kept(value: Any, limits: JsonLimits, ref: str, what: str) -> Any:
    try:
        return json_data(value, limits)
    except NotJsonData as exc:
        raise InvalidAnswer(f"{what} cannot be recorded: {exc}", ref=ref, **exc.details()) from None


def _merge(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    if a is None or b is None:
        return a if b is None else b
    return {**a, **b}
