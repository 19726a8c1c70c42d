"""The JSON of what callers see — responses, pending interrupts, the audit trail, summaries,
messages, grants: snake_case, the same dataclasses the Python API returns. One pydantic adapter
per type, used to write (the server, events, traces) and by ``pausepoint.client`` to read back
the very objects a local agent returns.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from ..content._messages import Message
from ..stores import SessionSummary
from ._grants import GrantInfo
from ._interrupts import AuditEntry, PendingInterrupt
from ._response import AgentResponse

__all__ = ["AUDIT", "GRANTS", "INTERRUPTS", "MESSAGES", "RESPONSE", "SUMMARY", "dump"]

RESPONSE: TypeAdapter[AgentResponse] = TypeAdapter(AgentResponse)
INTERRUPTS: TypeAdapter[list[PendingInterrupt]] = TypeAdapter(list[PendingInterrupt])
AUDIT: TypeAdapter[list[AuditEntry]] = TypeAdapter(list[AuditEntry])
SUMMARY: TypeAdapter[SessionSummary] = TypeAdapter(SessionSummary)
MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
GRANTS: TypeAdapter[list[GrantInfo]] = TypeAdapter(list[GrantInfo])


def dump(adapter: TypeAdapter[Any], value: Any) -> Any:
    """``value`` as plain JSON data."""
    return adapter.dump_python(value, mode="json")
