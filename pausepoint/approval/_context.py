"""What an answer is, and who gives it, when and through what (recorded on every claim)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..content._jsondata import DEFAULT_LIMITS, JsonLimits
from ..session._interrupts import ToolResponse, ToolRestart

__all__ = ["Answer", "AnswerContext"]

Answer = ToolResponse | ToolRestart


@dataclass(frozen=True, slots=True)
class AnswerContext:
    """Who answers, when, through what — recorded on every claim."""

    now: datetime
    principal: str | None
    via: str
    metadata: dict[str, Any] | None
    idempotency_key: str | None
    request_hash: str | None
    limits: JsonLimits = field(default=DEFAULT_LIMITS)


