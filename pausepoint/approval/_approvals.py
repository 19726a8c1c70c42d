"""``Approvals``: approval composed onto an agent's tools — the one entry point the runtime calls.

The agent holds one, made from its ``ApprovalPolicy`` and its tools. The turn asks it about each
call before the call runs (``before``) and about each pause a call makes (``request``); a resume
asks it whether its answers fit and what they record (``check``); any operation that writes asks
what time has settled (``escalations``, ``expiries``); the people-facing surfaces ask what "approve" means for a pause
(``approval``, ``approval_by_ref``) and how its approval reads (``view``). Everything else in this
package is behind these calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..content._jsondata import JsonLimits
from ..session._grants import Grant
from ..session._interrupts import PendingInterrupt, ToolResponse, ToolRestart
from ..session._records import ApprovalRequest, CallAnswered, PauseEscalated, Record
from ..session._state import SessionState
from ..tools._dispatch import CallJob
from ..tools._display import ApprovalView
from ..tools._tool import Tool
from ._answers import check_answers
from ._approve import approval_by_ref, approval_for
from ._context import Answer, AnswerContext
from ._expiry import cancel_claims, escalations_due, expiry_claims
from ._gate import Verdict, judge, request_for_pause
from ._policy import ApprovalPolicy
from ._roles import NOT_SAID, SessionTenant
from ._view import approval_view, handed_on_note

__all__ = ["Approvals"]


class Approvals:
    """An agent's approval: its ``policy`` applied to its ``tools`` (see the module docstring)."""

    def __init__(self, policy: ApprovalPolicy, tools: Mapping[str, Tool]) -> None:
        self.policy = policy
        self.tools = tools
        #: whether the policy (or a tool) has any say at all: if not, calls run without asking
        self.has_say = policy.has_say(tools)

    async def before(
        self, state: SessionState, job: CallJob, principal: str | None, now: datetime, limits: JsonLimits
    ) -> Verdict:
        """What happens to ``job`` before it runs: run it, approve or deny it without a person
        (a rule, a grant), or pause it for one (``_gate.judge``)."""
        return await judge(self.policy, self.tools.get(job.request.name), state, job, principal, now, limits)

    def request(
        self, tool: Tool, state: SessionState, paused_input: Any, metadata: dict[str, Any] | None
    ) -> ApprovalRequest | None:
        """What answering a pause ``tool`` made itself (on ``paused_input``, with ``metadata``)
        takes, when the policy (or the tool's ``approves``) has a say on it; None when anyone who
        may answer the session decides."""
        if not self.has_say or (tool.approves is None and not self.policy.governs(tool.name)):
            return None
        return request_for_pause(self.policy, tool, state, paused_input, metadata)

    def check(
        self, state: SessionState, answers: Sequence[Answer], ctx: AnswerContext, *, allow_changed_tools: bool
    ) -> list[Record]:
        """The records ``answers`` make, or the ``ResumeRefused`` that says why they cannot be
        given (each fitted to its pause, then the policy's say); all or nothing."""
        return check_answers(
            state, answers, self.tools, ctx, allow_changed_tools=allow_changed_tools, policy=self.policy
        )

    def escalations(self, state: SessionState, now: datetime) -> list[PauseEscalated]:
        """Pauses nobody decided in time, handed to the next approvers the policy names (with the
        pause's ``ApprovalRequest``: the policy they were made with)."""
        return escalations_due(state, now)

    def expiries(
        self, state: SessionState, now: datetime, on_expiry: Callable[[PendingInterrupt], Any], limits: JsonLimits
    ) -> list[CallAnswered]:
        """Pauses whose time ran out and that nobody else decides: resolved by ``on_expiry``."""
        return expiry_claims(state, now, on_expiry, limits=limits)

    def cancellations(
        self,
        state: SessionState,
        now: datetime,
        reason: str,
        principal: str | None,
        via: str,
        on_expiry: Callable[[PendingInterrupt], Any],
        limits: JsonLimits,
    ) -> list[CallAnswered]:
        """What cancelling every open pause records: the expired ones resolved by ``on_expiry``,
        the live ones cancelled (``Chat.cancel_pending``)."""
        return cancel_claims(state, now, reason, principal, via, on_expiry, limits)

    def approval(self, interrupt: PendingInterrupt, grant: Grant | None = None) -> ToolResponse | ToolRestart:
        """The answer that approves ``interrupt`` (``_approve``); ``ValueError`` when its tool is
        unknown or needs more than a yes."""
        tool = self.tools.get(interrupt.name)
        if tool is None:
            raise ValueError(f"no tool {interrupt.name!r}")
        return approval_for(tool, interrupt, grant)

    def approval_by_ref(
        self, ref: str, name: str, *, pause_id: str | None, replace_input: Any, grant: Grant | None
    ) -> ToolResponse | ToolRestart:
        """The answer approving the pause of call ``ref``, a call of ``name`` (``_approve``)."""
        return approval_by_ref(self.tools, ref, name, pause_id=pause_id, replace_input=replace_input, grant=grant)

    def handed_on_note(self, interrupt: PendingInterrupt) -> str | None:
        """What happens to ``interrupt`` if nobody decides it in time, when the policy it paused
        under hands it on to other approvers then (None: the expiry policy answers it)."""
        return handed_on_note(interrupt)

    def view(self, interrupt: PendingInterrupt, tenant: SessionTenant = NOT_SAID) -> ApprovalView:
        """How the approval of ``interrupt`` reads to the people deciding it (``tenant``: its
        session's, whose members the view names as who may decide: ``approval_view``)."""
        return approval_view(interrupt, self.policy, self.tools, tenant)
