"""What a turn reads of the agent it runs for (``TurnHost``: an ``Agent`` is one), apart from
the turn itself so that what a turn hands work to (``_waiting``) reads it too.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

from ..approval._approvals import Approvals
from ..content._jsondata import JsonLimits
from ..models._model import Model, ToolDefinition
from ..stores import SessionStore
from ..tools._tool import Tool
from ._telemetry import Telemetry

__all__ = ["TurnHost"]


class TurnHost(Protocol):
    """What a turn reads of the agent it runs for (an ``Agent`` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def model(self) -> Model: ...
    @property
    def system(self) -> str | None: ...
    @property
    def config(self) -> dict[str, Any]: ...
    @property
    def max_turns(self) -> int: ...
    @property
    def tool_errors(self) -> Literal["model", "fail"]: ...
    @property
    def tools(self) -> dict[str, Tool]: ...
    @property
    def tool_definitions(self) -> list[ToolDefinition]: ...
    @property
    def approvals(self) -> Approvals: ...
    @property
    def json_limits(self) -> JsonLimits: ...
    @property
    def store(self) -> SessionStore: ...
    @property
    def clock(self) -> Callable[[], datetime]: ...
    @property
    def telemetry(self) -> Telemetry: ...
    @property
    def wait_timeout(self) -> float: ...
    @property
    def abandon_after(self) -> timedelta: ...
