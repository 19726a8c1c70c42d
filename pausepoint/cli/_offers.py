"""What a pause's card in the terminal offers the person typing, and the checks what they give
passes before the resume is sent.

The choices are the console card's (``cards.js``), read from the pause's view: approve, grant
and edit only for someone the approval may come from — not the requester under separation of
duties, nor someone holding none of the roles the view names — deny only for someone who
may deny, and a made-up result only for someone who may respond; the card says why
(``Offer.why_not``). Offered anyway, each would be refused only
after it was made (an edit after the whole input was typed), and with other pauses of the turn
answered it would refuse their answers too.

An answer is checked as the resume checks it (``prepare_answers``: data a session can keep, in
the agent's JSON limits) and as the tool's schema takes it, when it is given: the resume sends
every answer of the turn at once, and one it refuses refuses them all.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from pydantic import ValidationError

from ..approval._answers import prepare_answers
from ..errors import InvalidAnswer
from ..runtime._agent import Agent
from ..session._interrupts import PendingInterrupt, ToolResponse, ToolRestart
from ..tools._display import ApprovalView, lets_approve, lets_deny
from ..tools._tool import Tool

__all__ = ["Offer", "answer_refusal", "asked_schema", "offer_for", "schema_refusal", "unkept"]

#: where an answer's value is in a resume of that one answer, as ``prepare_answers`` names it,
#: and what the person calls it (a path inside it is named from there: ``to``, ``items[0]``)
_WHAT_THEY_GAVE = {
    "$.respond[0].output": "the answer",
    "$.respond[0].reason": "the reason",
    "$.restart[0].replace_input": "the input",
}


@dataclass(frozen=True, slots=True)
class Offer:
    """The choices a card offers (``_decide`` takes no other); ``why_not`` says why it offers no
    approval to someone the view says may not give one (as the console's card says it)."""

    approve: bool
    grant: bool
    deny: bool
    respond: bool
    edit: bool
    why_not: str | None = None

    def choices(self) -> str:
        """The card's last line: ``[a]pprove  [d]eny  [s]kip``."""
        offered = [
            (self.approve, "[a]pprove"),
            (self.grant, "[g]rant: approve for this session"),
            (self.deny, "[d]eny"),
            (self.respond, "[r]espond with JSON"),
            (self.edit, "[e]dit input"),
        ]
        return "  ".join([*(label for given, label in offered if given), "[s]kip"])


def offer_for(agent: Agent, interrupt: PendingInterrupt, principal: str | None) -> Offer:
    """What ``principal`` may answer ``interrupt`` with: a yes where one answers it (a question
    asking for a value takes none) and the view lets them give it; a grant and an edit where the
    policy and the tool allow one besides; a made-up result where the pause takes one."""
    may = _who_may(agent.view(interrupt).approval, principal)
    status = interrupt.approval
    tool = agent.tools.get(interrupt.name)
    # a question the call asked mid-way (an MCP server's) takes an answer or a denial, no yes
    # (found by a probe: the card offered one, refused once the resume was asked)
    takes_yes = _question(interrupt) is None and (status is None or "approve" in status.decisions)
    approve = may.approve and takes_yes and _yes_answers(agent, interrupt)
    decisions = status.decisions if status is not None else ["edit", "respond"]
    return Offer(
        approve=approve,
        grant=approve and status is not None and status.grantable,
        deny=may.deny,
        respond=may.respond and "respond" in decisions,
        edit=approve and tool is not None and tool.allow_input_edits and "edit" in decisions,
        why_not=may.why_not,
    )


def _yes_answers(agent: Agent, interrupt: PendingInterrupt) -> bool:
    """Whether a plain yes answers it (``agent.approval``: not a question asking for a value)."""
    try:
        agent.approval(interrupt)
    except ValueError:
        return False
    return True


class _Allowed(NamedTuple):
    """What the view lets the person typing give, and why not approve (None: they may)."""

    approve: bool
    deny: bool
    respond: bool
    why_not: str | None = None


def _who_may(shown: ApprovalView | None, principal: str | None) -> _Allowed:
    """Whether ``principal`` may approve, deny and respond to the pause ``shown`` is the approval
    view of, and why not approve, in the console card's words (``reopen`` in ``cards.js``).
    Nothing is known of an unnamed person, nor of a pause no policy governs: all are offered."""
    if shown is None or not principal:
        return _Allowed(True, True, True)
    may_deny = lets_deny(shown, principal)
    may_respond = _may_respond(shown, principal)
    if lets_approve(shown, principal):
        return _Allowed(True, may_deny, may_respond)
    excluded = principal in shown.excluded
    still = " (you may still deny)." if may_deny else "."
    approvers = " or ".join(shown.approving_roles or ())
    if excluded and shown.requested_by == principal:
        why = f"You asked for this call: someone else approves it{still}"
    elif approvers:
        why = f"Approving this call takes {approvers}, which you do not hold{still}"
    else:
        why = f"Someone else approves this call{still}"
    return _Allowed(False, may_deny, may_respond, why)


def _may_respond(shown: ApprovalView, principal: str) -> bool:
    """Whether the view lets ``principal`` answer in the tool's place (the server refuses anyone
    else 403): one ``may_respond`` names; where it names nobody (members the policy cannot list),
    anyone but the requester under separation of duties — excluded though no approval of theirs
    is counted."""
    if shown.may_respond is not None:
        return principal in shown.may_respond
    separated = principal == shown.requested_by and principal in shown.excluded and principal not in shown.approved_by
    return not separated


def unkept(answer: ToolResponse | ToolRestart, agent: Agent) -> str | None:
    """Why the resume would refuse ``answer`` as data a session cannot keep (a lone surrogate
    written as ``"\\ud800"``, a string over the agent's JSON limits), in the person's terms
    (``to: a lone surrogate ...``, not the path of a batch they never wrote); None: it keeps it."""
    respond, restart = ([answer], []) if isinstance(answer, ToolResponse) else ([], [answer])
    try:
        [prepared], _ = prepare_answers(respond, restart, None, agent.json_limits)
    except InvalidAnswer as exc:
        return _in_their_terms(exc)
    return _too_big(prepared, agent.store.max_record_bytes)


def _too_big(answer: ToolResponse | ToolRestart, limit: int) -> str | None:
    """Why the store would refuse the record ``answer`` makes (``PayloadTooLarge``, each string
    under the limit, all of them over it), once the resume had streamed the batch's results: the
    value given as compact JSON is part of that record, so a value over ``limit`` alone never fits."""
    if isinstance(answer, ToolRestart):
        what, value = "the input", answer.replace_input
    elif answer.decision == "deny":
        what, value = "the reason", answer.reason
    else:
        what, value = "the answer", answer.output
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    if size <= limit:
        return None
    return f"{what}: {size} bytes of JSON, more than the session's store keeps in one record ({limit} bytes)"


def _in_their_terms(exc: InvalidAnswer) -> str:
    path = exc.details.get("path")
    if not isinstance(path, str):
        return exc.message
    problem = exc.message.partition(f"{path}: ")[2] or exc.message
    for root, what in _WHAT_THEY_GAVE.items():
        if path == root:
            return f"{what}: {problem}"
        if path.startswith(root):
            return f"{path.removeprefix(root).removeprefix('.')}: {problem}"
    return exc.message


def _question(interrupt: PendingInterrupt) -> dict[str, Any] | None:
    """The schema of the question an MCP server asked mid-call (``metadata.elicitation``), if
    the pause is one (a URL to visit has none: it is answered as any pause)."""
    asked = (interrupt.metadata or {}).get("elicitation")
    schema = asked.get("requested_schema") if isinstance(asked, dict) else None
    return schema if isinstance(schema, dict) else None


def asked_schema(interrupt: PendingInterrupt, tool: Tool | None) -> dict[str, Any] | None:
    """The shape an answer to ``interrupt`` must have: the question's ``requested_schema`` where
    an MCP server asked one, else the tool's output schema."""
    question = _question(interrupt)
    if question is not None:
        return question
    return tool.output_schema if tool is not None else None


def answer_refusal(interrupt: PendingInterrupt, tool: Tool | None, output: Any) -> str | None:
    """Why the resume would refuse ``output`` as the answer to ``interrupt``, as it checks it:
    against an MCP server's question (its schema, string formats too), else the tool's output type."""
    question = _question(interrupt)
    if question is None:
        return schema_refusal(tool.validate_output if tool is not None else None, output)
    from ..mcp._schema import answer_validator, check_against  # (an MCP server's pause: the extra is there)

    if not isinstance(output, dict):
        return f"the answer is an object with the fields asked for, not {type(output).__name__}"
    validator = answer_validator(question, "the question")
    return schema_refusal(lambda value: check_against(validator, value, "answer"), output)


def schema_refusal(check: Callable[[Any], Any] | None, value: Any) -> str | None:
    """Why ``check`` (the tool's, as the resume runs it) refuses ``value``; None: it takes it."""
    if check is None:
        return None
    try:
        check(value)
    except ValidationError as exc:
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'the value'}: {e['msg']}" for e in exc.errors())
    return None
