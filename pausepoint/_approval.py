"""What "approve" means for a pause, for the people-facing tools (console, terminal chat).

Three kinds of pause exist. An interrupt-only tool (``define_interrupt``) does no work: approving
it means answering with an output that says yes. A tool that paused itself (``raise
Interrupt``) does the work once allowed: approving it means running it again with
``resumed_metadata={"tool_approved": True}`` — the convention of Genkit's documentation, which
such tools check (``ctx.resumed_metadata.get("tool_approved")``). A call the runtime paused for
approval (``requires_approval``) is approved the same way: it runs, with exactly the input shown.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ._grants import Grant
from ._interrupts import PendingInterrupt, ToolResponse, ToolRestart
from ._tools import Tool

__all__ = ["APPROVED_METADATA", "approval_for", "approving_output", "yes_or_no"]

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
    if tool.pauses_only:
        return interrupt.respond(approving_output(tool), grant=grant)
    return interrupt.restart(resumed_metadata=dict(APPROVED_METADATA), grant=grant)


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
