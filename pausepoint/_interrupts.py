"""What a caller sees of a pause (``PendingInterrupt``) and the answers it can give.

Answers are plain values: they name the pause by ``ref`` and tool ``name`` and carry the
decision. They can be built from a ``PendingInterrupt`` (``i.respond(...)``) or directly, for
example by a process that learned the ref from an approval inbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from ._messages import Message

__all__ = ["AuditEntry", "PendingInterrupt", "ToolResponse", "ToolRestart"]


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


@dataclass(frozen=True, slots=True)
class ToolRestart:
    """Answer a pause by running the tool again, optionally with edited input.

    The tool sees ``ctx.resumed_metadata`` (``{}`` when none is given); with ``replace_input``
    it runs on the new input (only for tools defined with ``allow_input_edits=True``) and sees
    the old one as ``ctx.original_input``.
    """

    ref: str
    name: str
    replace_input: Any = None
    resumed_metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class PendingInterrupt:
    """A tool call that is paused now, waiting for an answer."""

    name: str
    ref: str
    input: Any
    metadata: dict[str, Any] | None
    paused_at: datetime
    expires_at: datetime | None = None
    turn: int = 0
    #: the ref of the tool request this pause belongs to (``ToolRequestPart.ref`` in the history);
    #: a restarted call that pauses again keeps its ``call_ref`` and gets a new ``ref``
    call_ref: str = ""

    def respond(self, output: Any, *, metadata: dict[str, Any] | None = None) -> ToolResponse:
        """An answer giving ``output`` as the call's result (validated against the output schema)."""
        return ToolResponse(self.ref, self.name, output, metadata)

    def deny(self, reason: str = "", *, metadata: dict[str, Any] | None = None) -> ToolResponse:
        """An answer refusing the call; the model sees the denial and the reason."""
        return ToolResponse(self.ref, self.name, None, metadata, decision="deny", reason=reason)

    def restart(self, *, replace_input: Any = None, resumed_metadata: dict[str, Any] | None = None) -> ToolRestart:
        """An answer that runs the tool again (a restarted tool may pause again, with a new ref)."""
        return ToolRestart(self.ref, self.name, replace_input, resumed_metadata)


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One entry of a session's audit trail: who did what, when, through what.

    Most entries are answers to a pause (``ref`` and ``name`` name it; ``input`` is the paused
    call's input as it was shown to whoever answered, ``call_ref`` the tool request it belongs
    to, ``ToolRequestPart.ref`` in the history). A user message is an
    entry too, with ``decision="message"``: ``principal`` sent ``message`` (``ref`` and
    ``name`` are empty; ``via`` is ``"unknown"`` for messages recorded before senders were).
    """

    ref: str
    name: str
    decision: Literal["respond", "deny", "restart", "cancel", "expire", "message"]
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
