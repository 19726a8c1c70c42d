"""What ``send`` and ``resume`` return."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from ..content._messages import Message
from ._interrupts import PendingInterrupt

__all__ = ["AgentFinishReason", "AgentResponse"]


class AgentFinishReason(StrEnum):
    STOP = "stop"
    INTERRUPTED = "interrupted"
    LENGTH = "length"
    BLOCKED = "blocked"
    MAX_TURNS = "max_turns"
    FAILED = "failed"
    ABORTED = "aborted"


@dataclass(frozen=True, slots=True)
class AgentResponse:
    """The outcome of one call of ``send`` / ``resume``.

    ``interrupts`` lists the calls still paused (empty unless ``finish_reason`` is
    ``INTERRUPTED``, or ``FAILED`` with paused siblings); ``error`` describes a failure.
    ``version`` is the session's log version at the end of this call (0 when not known): it
    names this turn end, so a caller can tell whether the session has moved on since.
    """

    session_id: str
    finish_reason: AgentFinishReason
    message: Message | None = None
    interrupts: list[PendingInterrupt] = field(default_factory=list)
    error: str | None = None
    turn: int = 0
    version: int = 0

    @property
    def text(self) -> str:
        """The text of the model's last message in this turn ("" when it had none)."""
        return self.message.text if self.message is not None else ""
