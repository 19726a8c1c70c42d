"""What a caller sees of a pause (``PendingInterrupt``) and the answers it can give.

One ref per call. A tool call's ``ref`` (minted by the runtime when the model asks for the
call) is the only ref any surface shows — the tool request in the history, the stream's
chunks, the pending interrupt, the audit trail, the Genkit wire — and answers name the call by
it. A call may pause more than once (a restarted tool can pause again); each pause has its own
``pause_id``, which tells the pauses of one call apart:

- an answer built from a ``PendingInterrupt`` (``i.respond(...)``, ``i.restart(...)``) carries
  its ``pause_id``, so it answers that pause only: once the call was restarted and paused
  again, the old answer is refused as ``AlreadyResolved`` instead of answering the new pause;
- an answer built from a bare ref (``ToolResponse(ref, name, output)``, the REST API without a
  ``pause_id``, Genkit's clients by session id) answers the pause that is live now, but only
  while every pause of the call showed the same input and metadata: once the call paused again
  showing something else, a bare ref might approve what its approver never saw, and it is
  refused (``PauseChanged``, naming the live pause) — unless the answer says what it decides
  by itself: a denial, or a restart carrying the input it runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeVar

from ..content._messages import Message
from ._grants import Grant

__all__ = ["ApprovalStatus", "AuditEntry", "PendingInterrupt", "ToolResponse", "ToolRestart", "answers_given"]


@dataclass(frozen=True, slots=True)
class ToolResponse:
    """Answer a pause with the call's result instead of running the tool.

    ``decision="deny"`` records a denial: the model receives ``{"denied": True, "reason": ...}``
    and the output schema is not applied.
    """

    ref: str
    name: str
    output: Any = None
    metadata: dict[str, Any] | None = None
    decision: Literal["respond", "deny"] = "respond"
    reason: str | None = None
    #: the pause this answers (None: the live pause, where the module docstring's rule allows)
    pause_id: str | None = None
    #: later calls this yes approves too (see ``Grant``; only with a yes)
    grant: Grant | None = None


@dataclass(frozen=True, slots=True)
class ToolRestart:
    """Answer a pause by running the tool again, optionally with edited input.

    The tool sees ``ctx.resumed_metadata`` (``{}`` when none is given); with ``replace_input``
    it runs on the new input (only for tools defined with ``allow_input_edits=True``) and sees
    the old one as ``ctx.original_input``. Restarting a call paused for approval approves it;
    ``grant`` approves later calls too (see ``Grant``).
    """

    ref: str
    name: str
    replace_input: Any = None
    resumed_metadata: dict[str, Any] | None = None
    #: the pause this answers (None: the live pause, where the module docstring's rule allows)
    pause_id: str | None = None
    #: later calls this approval approves too (see ``Grant``)
    grant: Grant | None = None


A = TypeVar("A", ToolResponse, ToolRestart)


def answers_given(given: Sequence[A] | None, kind: type[A], keyword: str, build: str) -> list[A]:
    """The answers a resume's ``respond=`` / ``restart=`` (``keyword``) gives: a list of ``kind``,
    or None for none (as Genkit's ``resume(respond=None)``). Raises ``TypeError`` naming what
    to give instead (``build``: how one is made) for anything else — one answer not in a list
    included."""
    if given is None:
        return []
    if isinstance(given, kind):
        raise TypeError(f"{keyword}= takes a list of {kind.__name__} answers: [{build}], not one answer alone")
    if isinstance(given, str | bytes | dict) or not isinstance(given, Sequence | set | frozenset):
        raise TypeError(f"{keyword}= takes a list of {kind.__name__} answers ([{build}]), not {given!r}")
    answers = list(given)
    for answer in answers:
        if not isinstance(answer, kind):
            raise TypeError(f"{keyword}= takes {kind.__name__} answers ({build}), not {answer!r}")
    return answers


@dataclass(frozen=True, slots=True)
class ApprovalStatus:
    """Where the approval of a pause stands (``PendingInterrupt.approval``).

    ``required`` distinct approvals, of which ``approved_by`` are counted; ``roles`` decide it
    (None: whoever may answer the session; after an escalation, the roles it was handed to,
    ``escalated`` times); ``requested_by`` sent the message that led to the call and may not
    approve it when ``separate``; ``gated``: the call has not run, approving runs it;
    ``decisions`` the answers it takes; ``grantable``: an approval may grant later calls;
    ``offer``: the grant a yes gives (``Grant.scope()`` JSON); ``rule``: the rule that asked;
    ``handed_to``: the roles it is handed to next if nobody decides it in time, as the policy
    it paused under said (None: the expiry policy answers it then).
    """

    required: int = 1
    approved_by: list[str] = field(default_factory=list)
    roles: list[str] | None = None
    requested_by: str | None = None
    separate: bool = False
    gated: bool = False
    decisions: list[str] = field(default_factory=list)
    grantable: bool = False
    offer: dict[str, Any] | None = None
    rule: str | None = None
    escalated: int = 0
    handed_to: list[str] | None = None

    @property
    def remaining(self) -> int:
        """How many more approvals it needs."""
        return max(self.required - len(self.approved_by), 0)

    @property
    def progress(self) -> str:
        """ "1 of 2 approvals" for a quorum; "Needs approval" / "Needs an answer" otherwise."""
        if self.required > 1:
            return f"{len(self.approved_by)} of {self.required} approvals"
        return "Needs approval" if self.gated else "Needs an answer"


@dataclass(frozen=True, slots=True)
class PendingInterrupt:
    """A tool call that is paused now, waiting for an answer.

    ``ref`` is the call's ref, the same as its tool request's in the history; ``pause_id``
    names this pause of the call (a restarted call that pauses again keeps its ref and gets a
    new ``pause_id``). Answers built here carry both (see the module docstring). ``call_ref``
    is the same ref again, for readers of versions where a pause had a ref of its own.
    """

    name: str
    ref: str
    input: Any
    metadata: dict[str, Any] | None
    paused_at: datetime
    expires_at: datetime | None = None
    turn: int = 0
    call_ref: str = ""
    pause_id: str = ""
    #: what approving it takes (None: nothing beyond the right to answer the session)
    approval: ApprovalStatus | None = None

    def respond(
        self, output: Any, *, metadata: dict[str, Any] | None = None, grant: Grant | None = None
    ) -> ToolResponse:
        """An answer giving ``output`` as the call's result (validated against the output schema)."""
        return ToolResponse(self.ref, self.name, output, metadata, pause_id=self._pause, grant=grant)

    def deny(self, reason: str = "", *, metadata: dict[str, Any] | None = None) -> ToolResponse:
        """An answer refusing the call; the model sees the denial and the reason."""
        return ToolResponse(self.ref, self.name, None, metadata, decision="deny", reason=reason, pause_id=self._pause)

    def restart(
        self, *, replace_input: Any = None, resumed_metadata: dict[str, Any] | None = None, grant: Grant | None = None
    ) -> ToolRestart:
        """An answer that runs the tool again (a restarted tool may pause again: same ref, new
        pause). For a call paused for approval, this approves it (``grant``: later calls too)."""
        return ToolRestart(self.ref, self.name, replace_input, resumed_metadata, pause_id=self._pause, grant=grant)

    @property
    def _pause(self) -> str | None:
        return self.pause_id or None


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One entry of a session's audit trail: who did what, when, through what.

    Most entries are answers to a pause: ``ref`` is the call's ref (the tool request's in the
    history; ``call_ref`` is the same ref, as on ``PendingInterrupt``), ``pause_id`` the pause
    of that call the answer resolved, ``name`` the tool, ``input`` the paused call's input as it
    was shown to whoever answered, ``paused_at`` when it paused and ``expires_at`` when it would
    have expired (None: no TTL). A user message is an entry
    too, with ``decision="message"``: ``principal`` sent ``message`` (``ref`` and ``name`` are
    empty; ``via`` is ``"unknown"`` for messages recorded before senders were).

    One name per decision: ``approve`` is every approval of a call — a person's (the one that
    resolves the pause, with ``replace_input`` when it approved an edited input, as well as
    each one counted towards a quorum: ``approvals`` of ``required``; a restart that runs a
    call paused for approval, or a tool that paused itself with ``{"tool_approved": True}``),
    or a call approved without a person asked, by the rule named ``rule`` (no ``principal``)
    or by the grant ``grant``, whose ``principal`` is the person who granted it
    (``via="policy"``); ``restart`` is a call run again that was not approved by it (it may
    pause again). The approval policy's decisions are entries too: ``deny`` with a ``rule`` —
    a call a rule denied; ``grant`` — ``principal`` approved later calls of ``name`` (the grant
    ``grant``, its ``scope``: bounds, uses, expiry); ``revoke`` — the grant ``grant`` revoked;
    ``escalate`` — nobody decided the pause in time, and it went to the roles ``escalated_to``.
    The answer that resolves a call paused for approval has ``approvals`` and ``required`` too.
    """

    ref: str
    name: str
    decision: Literal[
        "respond", "deny", "restart", "cancel", "expire", "message", "approve", "grant", "revoke", "escalate"
    ]
    at: datetime
    principal: str | None
    via: str
    output: Any = None
    replace_input: Any = None
    resumed_metadata: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    reason: str | None = None
    idempotency_key: str | None = None
    call_ref: str = ""
    input: Any = None
    message: Message | None = None
    pause_id: str = ""
    rule: str | None = None
    grant: str | None = None
    approvals: int = 0
    required: int = 0
    scope: dict[str, Any] | None = None
    escalated_to: list[str] | None = None
    paused_at: datetime | None = None  # an entry about a pause: when it paused
    expires_at: datetime | None = None  # ... and when it would have expired (None: it had no TTL)
