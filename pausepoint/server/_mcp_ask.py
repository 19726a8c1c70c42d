"""``send_message(ask=true)``'s rounds (``_mcp``): the pauses a person at the MCP client can
answer in a form, put to the client as MCP elicitations — a server's question with its own
schema, a pause a yes approves as approve-or-deny — and the state a round leaves for the next.
"""

from __future__ import annotations

import json
from typing import Any

import mcp.types as types
from mcp.server.mcpserver import Context
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..errors import InvalidAnswer
from ..runtime._agent import Agent
from ..session._interrupts import PendingInterrupt
from ..tools._display import lets_approve, lets_deny

__all__ = ["can_ask", "carried_state", "decision_of", "dismissed", "questions"]

_MODERN = frozenset(MODERN_PROTOCOL_VERSIONS)
_DECISION = {
    "type": "object",
    "properties": {"decision": {"type": "string", "enum": ["approve", "deny"], "title": "Approve or deny"},
                   "reason": {"type": "string", "title": "Reason (for a denial)"}},
    "required": ["decision"],
}  # fmt: skip


def can_ask(ctx: Context) -> bool:
    """Whether this call may return questions: a 2026-07-28 connection (the tool returns them;
    nothing is held open) from a client that answers form elicitations."""
    if ctx.protocol_version not in _MODERN:
        return False
    capabilities = ctx.client_capabilities
    return capabilities is not None and capabilities.elicitation is not None


def questions(
    agent: Agent, session_id: str, who: str, pauses: list[PendingInterrupt], *, refused: str | None = None
) -> types.InputRequiredResult | None:
    """The pauses a person at the client can answer in a form, as MCP elicitations (None: none
    can be: they stay listed for answer_pause). A server's question keeps its own schema; a
    pause that a yes approves asks approve or deny. ``refused``: why the last answers were not
    accepted (said in each question asked again)."""
    asked: dict[str, Any] = {}
    requests: dict[str, types.InputRequest] = {}
    for index, pause in enumerate(pauses):
        question = (pause.metadata or {}).get("elicitation")
        view = agent.view(pause)
        if isinstance(question, dict):
            if "requested_schema" not in question:
                continue  # a URL to visit: listed, not asked
            kind, schema, message = "respond", question["requested_schema"], str(question.get("message", view.title))
        else:
            if pause.approval is not None and who in pause.approval.approved_by:
                continue  # this caller's approval is counted: the others' are awaited
            shown = view.approval
            if shown is not None and not (lets_approve(shown, who) or lets_deny(shown, who)):
                continue  # neither approved nor denied by this caller (found by a probe): listed, for those who do
            try:
                agent.approval(pause)
            except ValueError:
                continue  # more than a yes: answered with answer_pause
            kind, schema = "approve", _DECISION
            progress = f", {view.approval.progress.lower()}" if view.approval and view.approval.required > 1 else ""
            message = f"{view.title}: {view.summary} (risk: {view.risk}{progress}). Approve?"
        if refused is not None:
            message = f"Your answer was not accepted ({refused}). {message}"
        key = f"pause{index}"
        asked[key] = {"ref": pause.ref, "pause_id": pause.pause_id, "tool": pause.name, "kind": kind}
        requests[key] = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
        )
    if not requests:
        return None
    state = json.dumps({"agent": agent.name, "session_id": session_id, "principal": who, "pauses": asked})
    return types.InputRequiredResult(input_requests=requests, request_state=state)


def carried_state(state: str | None, agent: str) -> dict[str, Any] | None:
    """What a round of ``send_message(ask=true)`` left for the next one (sealed by the SDK on the
    wire, so it is what this server wrote), or None on a first round."""
    if not state:
        return None
    try:
        carried = json.loads(state)
    except ValueError:
        return None
    if not isinstance(carried, dict) or carried.get("agent") != agent:
        return None
    return carried


def dismissed(carried: dict[str, Any] | None, responses: dict[str, Any]) -> set[str]:
    """The pauses (their ids) the person dismissed in this round (MCP cancel, or no answer):
    they stay open and are listed in the reply, never asked again in it — even when the round
    answered others and the turn went on."""
    if carried is None:
        return set()
    return {
        str(asked["pause_id"])
        for key, asked in carried["pauses"].items()
        if not isinstance(answer := responses.get(key), types.ElicitResult) or answer.action == "cancel"
    }


def decision_of(content: dict[str, Any], asked: dict[str, Any]) -> tuple[str, str]:
    """The decision and reason a person gave in the approve-or-deny form (``_DECISION``), checked
    against it as a server's question is checked against its schema; ``InvalidAnswer`` otherwise."""
    decision, reason = content.get("decision"), content.get("reason")
    if decision not in ("approve", "deny"):
        raise InvalidAnswer(
            f"the answer to {asked['tool']!r} must be a decision, 'approve' or 'deny'", ref=asked["ref"]
        )
    if reason is not None and not isinstance(reason, str):
        raise InvalidAnswer(f"the reason given for {asked['tool']!r} must be text", ref=asked["ref"])
    if decision == "approve" and reason:  # never dropped unsaid: 'approve' takes none, as on REST
        raise InvalidAnswer(
            f"a reason is given with a denial of {asked['tool']!r}; an approval takes none", ref=asked["ref"]
        )
    return decision, reason or ""
