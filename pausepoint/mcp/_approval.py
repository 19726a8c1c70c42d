"""Which MCP tool calls pause for approval before they reach the server.

``requires_approval`` (given to ``Pausepoint.mcp_tools``) is turned, per tool, into the
``requires_approval`` every ``Tool`` takes: ``True`` (every call), ``False`` (none), or a check
of the call. From there the runtime's approval gate does everything, exactly as for
``@ai.tool(requires_approval=...)``: the call pauses before it runs — so before anything
reaches the server — and the agent's ``ApprovalPolicy`` (rules, grants, quorum, separation of
duties, roles, escalation) decides who approves it, or approves or denies it without a person.
Approving runs the call once, with exactly the arguments shown. There is no other gate.

A predicate given here receives the call's arguments as the JSON object the server would get
(a predicate that raises makes a person decide, as the gate does for every tool).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeAlias

from pydantic import BaseModel

from ..errors import DefinitionError

__all__ = ["ApprovalSpec", "needs_approval", "unknown_names"]

#: per tool: every call, none, or a predicate on the call's arguments
_PerTool: TypeAlias = bool | Callable[[dict[str, Any]], bool]

#: what ``mcp_tools(requires_approval=...)`` takes: see ``needs_approval``
ApprovalSpec: TypeAlias = bool | Collection[str] | Mapping[str, _PerTool] | Callable[[str, dict[str, Any]], bool]


def needs_approval(spec: ApprovalSpec, mcp_name: str) -> bool | Callable[[BaseModel], bool]:
    """The ``Tool.requires_approval`` of the server's tool ``mcp_name`` under ``spec``: a bool
    (every call or none), a collection of the server's tool names (those tools, every call), a
    mapping from tool name to a bool or a predicate on the arguments (tools not named: no
    approval), or a function ``(tool_name, arguments) -> bool`` deciding each call."""
    if isinstance(spec, bool):
        return spec
    if isinstance(spec, Mapping):
        rule = spec.get(mcp_name, False)
        if isinstance(rule, bool):
            return rule
        if not callable(rule):
            raise DefinitionError(f"requires_approval[{mcp_name!r}] must be a bool or a predicate, not {rule!r}")
        return _on_arguments(rule)
    if callable(spec):
        decide = spec
        return _on_arguments(lambda arguments: decide(mcp_name, arguments))
    if isinstance(spec, str):
        raise DefinitionError("requires_approval takes a collection of tool names, not one string")
    return mcp_name in spec


def _on_arguments(predicate: Callable[[dict[str, Any]], bool]) -> Callable[[BaseModel], bool]:
    """A check of the validated input (what the gate calls) asking ``predicate`` about the
    arguments as JSON (what the server gets)."""

    def check(validated: BaseModel) -> bool:
        return bool(predicate(validated.model_dump(mode="json")))

    return check


def unknown_names(spec: ApprovalSpec) -> set[str]:
    """The tool names ``spec`` mentions (for checking them against the server's tools)."""
    if isinstance(spec, bool) or (callable(spec) and not isinstance(spec, Mapping)):
        return set()
    return set(spec)
