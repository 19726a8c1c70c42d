"""What a person sees, in the REST API's JSON: every pending interrupt and audit entry carries
its ``view`` (``Agent.view``: title, summary, fields, risk, what happens on expiry), agents
carry their description (never their system prompt), and a session says what its viewer may do.

The view is rendered here, once per object sent, so the responses, the stream's chunks, the
session reads, the audit trail and the feed all show a pause the same way. Each is given its
session's ``tenant`` (None: none), whose members its approval names as who may decide it
(``Agent.view``). Fields are only added to the core's JSON: clients that do not know them read
the same objects as before.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from ..approval._approve import APPROVED_METADATA, approving_output
from ..runtime._agent import Agent
from ..session._interrupts import AuditEntry, PendingInterrupt
from ..session._json import AUDIT, INTERRUPTS, RESPONSE, dump
from ..session._response import AgentResponse
from ..session._views import answered_pause
from ..stores import SessionSummary
from ..tools._display import PauseView
from ..tools._tool import Tool
from ..turn._streaming import CHUNK, TurnChunk
from ._auth import AccessPolicy

__all__ = [
    "audit_json",
    "chunk_json",
    "describe_agent",
    "interrupts_json",
    "permissions",
    "response_json",
    "view_json",
]


def interrupts_json(agent: Agent, pauses: list[PendingInterrupt], *, tenant: str | None) -> list[dict[str, Any]]:
    """``pauses`` (of a session of ``tenant``) as JSON, each with its ``view``."""
    return _with_views(agent, dump(INTERRUPTS, pauses), pauses, tenant)


def response_json(agent: Agent, response: AgentResponse, *, tenant: str | None) -> dict[str, Any]:
    """An ``AgentResponse`` (of a session of ``tenant``) as JSON, its open interrupts with their views."""
    body: dict[str, Any] = dump(RESPONSE, response)
    _with_views(agent, body["interrupts"], response.interrupts, tenant)
    return body


def chunk_json(agent: Agent, chunk: TurnChunk, *, tenant: str | None) -> dict[str, Any]:
    """A stream chunk (of a session of ``tenant``) as JSON; an ``interrupt`` chunk's pause carries its view."""
    body: dict[str, Any] = dump(CHUNK, chunk)
    if chunk.kind == "interrupt":
        body["interrupt"]["view"] = view_json(agent.view(chunk.interrupt, tenant=tenant))
    elif chunk.kind == "turn_end":
        _with_views(agent, body["response"]["interrupts"], chunk.response.interrupts, tenant)
    return body


def _with_views(
    agent: Agent, items: list[dict[str, Any]], pauses: list[PendingInterrupt], tenant: str | None
) -> list[dict[str, Any]]:
    """``items``, the pauses already written as JSON, each given its ``view`` (the response's
    and the chunk's JSON hold their interrupts already: they are not written twice)."""
    for item, pause in zip(items, pauses, strict=True):
        item["view"] = view_json(agent.view(pause, tenant=tenant))
    return items


def audit_json(agent: Agent, entries: list[AuditEntry], *, tenant: str | None) -> list[dict[str, Any]]:
    """Audit entries as JSON, each answer with the ``view`` of the pause it answered (as it read
    then; None for an entry that answers no pause)."""
    items: list[dict[str, Any]] = dump(AUDIT, entries)
    for item, entry in zip(items, entries, strict=True):
        if not entry.name or entry.decision in ("grant", "revoke"):  # about no call (nothing to show as one)
            item["view"] = None
            continue
        item["view"] = view_json(agent.view(answered_pause(entry), tenant=tenant))
    return items


def view_json(view: PauseView) -> dict[str, Any]:
    """A ``PauseView`` as JSON data: every field of it (what ``dataclasses.asdict`` gives,
    without its deep copies), so a field added to the view reaches every surface."""
    return _VIEW.to_python(view, mode="json")  # type: ignore[no-any-return]


_VIEW = TypeAdapter(PauseView).serializer


def describe_agent(agent: Agent) -> dict[str, Any]:
    """What a UI needs to know about an agent and its tools (``GET /v1/agents/{agent}``).

    ``description`` is the agent's own (``define_agent(description=...)``); the system prompt is
    the model's and never leaves the server.
    """
    return {"name": agent.name, "description": agent.description, "tools": [_tool(t) for t in agent.tools.values()]}


def _tool(tool: Tool) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.input_schema,
        "output_schema": tool.output_schema,
        "pauses_only": tool.pauses_only,
        "allow_input_edits": tool.allow_input_edits,
        "approval": _approval(tool),
    }


def _approval(tool: Tool) -> dict[str, Any] | None:
    """What "approve" answers for this tool (``Agent.approval``), or None when a yes cannot."""
    if not tool.pauses_only:
        return {"kind": "restart", "resumed_metadata": dict(APPROVED_METADATA)}
    try:
        return {"kind": "respond", "output": approving_output(tool)}
    except ValueError:
        return None


def permissions(policy: AccessPolicy, principal: str, summary: SessionSummary) -> dict[str, bool]:
    """What ``principal`` may do in the session: write messages in it, answer its pauses."""
    return {"can_send": policy.can_converse(principal, summary), "can_answer": policy.can_answer(principal, summary)}
