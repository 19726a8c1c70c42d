"""Which MCP tool calls pause for approval before they reach the server — and the gate itself.

``requires_approval`` (given to ``Pausepoint.mcp_tools``) is normalised per tool into a
``Rule``: ``True`` (every call), ``False`` (none), or a predicate on the call's arguments.

``approval_gate`` is the one place where a call is held back today: it raises ``Interrupt``
unless the call was restarted with ``resumed_metadata={"tool_approved": True}`` (the
convention the console, the terminal chat and ``Agent.approval`` answer with; see
``pausepoint._approval``). A restart runs the paused call with exactly its paused arguments
(edited ones only where the tool allows edits), so what reaches the server is what was
approved. When the runtime pauses calls before tools run (``Tool(requires_approval=...)``),
this function is what to replace: hand ``Rule`` to the tool and delete the gate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeAlias

from .._tools import Interrupt, ToolRunContext
from ..errors import DefinitionError

__all__ = ["ApprovalSpec", "Rule", "approval_gate", "rule_for"]

log = logging.getLogger("pausepoint")

#: per tool: always, never, or a predicate on the call's arguments
Rule: TypeAlias = bool | Callable[[dict[str, Any]], bool]

#: what ``mcp_tools(requires_approval=...)`` takes: see ``rule_for``
ApprovalSpec: TypeAlias = bool | Collection[str] | Mapping[str, Rule] | Callable[[str, dict[str, Any]], bool]


def rule_for(spec: ApprovalSpec, mcp_name: str) -> Rule:
    """The rule for the server's tool ``mcp_name`` under ``spec``: a bool (every call or none),
    a collection of the server's tool names (those tools, every call), a mapping from tool name
    to a bool or a predicate on the arguments (tools not named: no approval), or a function
    ``(tool_name, arguments) -> bool`` deciding each call."""
    if isinstance(spec, bool):
        return spec
    if isinstance(spec, Mapping):
        rule = spec.get(mcp_name, False)
        if not isinstance(rule, bool) and not callable(rule):
            raise DefinitionError(f"requires_approval[{mcp_name!r}] must be a bool or a predicate, not {rule!r}")
        return rule
    if callable(spec):
        decide = spec
        return lambda arguments: decide(mcp_name, arguments)
    if isinstance(spec, str):
        raise DefinitionError("requires_approval takes a collection of tool names, not one string")
    return mcp_name in spec


def unknown_names(spec: ApprovalSpec) -> set[str]:
    """The tool names ``spec`` mentions (for checking them against the server's tools)."""
    if isinstance(spec, bool) or (callable(spec) and not isinstance(spec, Mapping)):
        return set()
    return set(spec)


def approval_gate(rule: Rule, arguments: dict[str, Any], ctx: ToolRunContext, about: dict[str, Any]) -> None:
    """Raise ``Interrupt`` (the call pauses before it reaches the server) unless ``rule`` lets
    the call through or the call was restarted with approval (see the module docstring).

    A predicate that raises asks for approval (a broken rule asks for more care, not less).
    ``about`` says what would run (server, tool); it is the pause's metadata.
    """
    if rule is False or (ctx.resumed_metadata or {}).get("tool_approved") is True:
        return
    if callable(rule):
        try:
            needed = bool(rule(arguments))
        except Exception:
            log.warning("the approval rule of MCP tool %r failed; the call waits for approval", about, exc_info=True)
            needed = True
        if not needed:
            return
    raise Interrupt({"approval": "required", "mcp": about})
