"""What "approve" means for a pause, for the people-facing tools (console, terminal chat).

Three kinds of pause exist. An interrupt-only tool (``define_interrupt``) does no work: approving
it means answering with an output that says yes. A tool that paused itself (``raise
Interrupt``) does the work once allowed: approving it means running it again with
``resumed_metadata={"tool_approved": True}`` — the convention of Genkit's documentation, which
such tools check (``ctx.resumed_metadata.get("tool_approved")``). A call the runtime paused for
approval (``requires_approval``) is approved the same way: it runs, with exactly the input shown.

``approval_by_ref`` is that answer for a call known only by its ref (``Chat.approve``): built from
the session as it stands under the session's lock, never from a read made before it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from ..errors import InputEditNotAllowed, InvalidAnswer
from ..session._grants import Grant
from ..session._interrupts import PendingInterrupt, ToolResponse, ToolRestart
from ..tools._tool import Tool

__all__ = ["APPROVED_METADATA", "approval_by_ref", "approval_for", "approving_output", "yes_or_no"]

APPROVED_METADATA = {"tool_approved": True}


def approving_output(tool: Tool) -> Any:
    """The output that approves an interrupt-only tool: ``{"approved": True}`` fitted to its
    output schema (booleans named approved/approve/ok/confirmed set true, other fields left to
    their defaults). Raises ``ValueError`` when the schema has no such yes/no field."""
    schema = tool.output_schema or {}
    properties = schema.get("properties", {}) if schema.get("type") == "object" else {}
    if not schema:
        return {"approved": True}
    flags = [n for n, p in properties.items() if p.get("type") == "boolean" and n in _YES_FIELDS]
    if not flags:
        raise ValueError(f"the output schema of {tool.name!r} has no yes/no field to approve with")
    output = {name: True for name in flags}
    try:
        return tool.validate_output(output)
    except ValidationError as exc:
        raise ValueError(f"approving {tool.name!r} needs more than a yes: {exc}") from exc


def approval_for(tool: Tool, interrupt: PendingInterrupt, grant: Grant | None = None) -> ToolResponse | ToolRestart:
    """The answer that approves ``interrupt``, a pause of ``tool`` (see the module docstring),
    granting ``grant`` too when given."""
    return _approving(tool, interrupt.ref, interrupt.pause_id or None, grant)


def approval_by_ref(
    tools: Mapping[str, Tool],
    ref: str,
    name: str,
    *,
    pause_id: str | None = None,
    replace_input: Any = ...,
    grant: Grant | None = None,
) -> ToolResponse | ToolRestart:
    """The answer approving the pause of call ``ref``, a call of the tool ``name`` (as
    ``approval_for`` builds it), for the pause ``pause_id`` when given, else the one live now;
    with ``replace_input`` (unless ``...``), an approval of that edited input.

    It depends on the tool only, never on whether the pause is open: a ref answered already
    gets the same answer again (so a retry under the same idempotency key matches the first
    request and gets its outcome), and resuming with it is refused with the core's own reason
    (already resolved, unknown, not paused, ...). For a tool the agent does not have (``name``
    is ``""`` for a ref the session has no call of) it is a bare response, refused the same way.
    Raises ``InvalidAnswer`` when a yes cannot answer the tool, ``InputEditNotAllowed`` for an
    edited input of a tool that only asks a question.
    """
    tool = tools.get(name)
    if tool is None:
        return ToolResponse(ref, name, None, pause_id=pause_id, grant=grant)
    try:
        approval = _approving(tool, ref, pause_id, grant)
    except ValueError as exc:
        raise InvalidAnswer(f"cannot approve {name!r} with a yes: {exc}", ref=ref, name=name) from None
    if replace_input is ...:
        return approval
    if not isinstance(approval, ToolRestart):
        raise InputEditNotAllowed(
            f"{name!r} only asks a question: answer it, its input cannot be edited", ref=ref, name=name
        )
    if replace_input is None:  # a restart's None means "no edit": an edit to None is no input
        raise InvalidAnswer(
            f"replace_input=None is no input for {name!r}: leave replace_input out to approve the input shown",
            ref=ref,
            name=name,
        )
    return replace(approval, replace_input=replace_input)


def _approving(tool: Tool, ref: str, pause_id: str | None, grant: Grant | None) -> ToolResponse | ToolRestart:
    if tool.pauses_only:
        return ToolResponse(ref, tool.name, approving_output(tool), pause_id=pause_id, grant=grant)
    return ToolRestart(ref, tool.name, resumed_metadata=dict(APPROVED_METADATA), pause_id=pause_id, grant=grant)


def yes_or_no(tool: Tool, output: Any) -> bool | None:
    """Whether ``output``, an answer to an interrupt-only tool, says yes (True) or no (False) in
    the yes/no fields ``approving_output`` fills (approved, ok, ...); None when it says neither."""
    if not isinstance(output, dict):
        return None
    flags = [output[name] for name in _YES_FIELDS if isinstance(output.get(name), bool)]
    if not flags:
        return None
    return all(flags)


_YES_FIELDS = frozenset({"approved", "approve", "ok", "confirmed", "allowed"})
