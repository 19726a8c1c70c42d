"""pausepoint: LLM agents whose tools pause for people and resume later, exactly once."""

from ._agent import Agent, deny_on_expiry
from ._app import Pausepoint
from ._chat import Chat
from ._detach import DetachedTurn, TurnStatus
from ._grants import Grant, GrantInfo
from ._interrupts import ApprovalStatus, AuditEntry, PendingInterrupt, ToolResponse, ToolRestart
from ._jsondata import JsonLimits
from ._messages import MediaPart, Message, Part, TextPart, ToolRequestPart, ToolResponsePart
from ._models import (
    FunctionModel,
    Model,
    ModelChunk,
    ModelRequest,
    ModelResponse,
    Plugin,
    TextDelta,
    ToolCallDelta,
    ToolDefinition,
    Usage,
)
from ._policy import ApprovalPolicy, Escalation, Role, Rule
from ._presentation import ApprovalView, PauseDisplay, PauseField, PauseView
from ._response import AgentFinishReason, AgentResponse
from ._streaming import (
    InterruptChunk,
    TextChunk,
    ToolCallDeltaChunk,
    ToolProgressChunk,
    ToolRequestChunk,
    ToolResultChunk,
    TurnChunk,
    TurnEndChunk,
    TurnStream,
)
from ._tools import Interrupt, Tool, ToolRunContext

__all__ = [
    "Agent",
    "AgentFinishReason",
    "AgentResponse",
    "ApprovalPolicy",
    "ApprovalStatus",
    "ApprovalView",
    "AuditEntry",
    "Chat",
    "DetachedTurn",
    "Escalation",
    "FunctionModel",
    "Grant",
    "GrantInfo",
    "Interrupt",
    "InterruptChunk",
    "JsonLimits",
    "MediaPart",
    "Message",
    "Model",
    "ModelChunk",
    "ModelRequest",
    "ModelResponse",
    "Part",
    "PauseDisplay",
    "PauseField",
    "PauseView",
    "Pausepoint",
    "PendingInterrupt",
    "Plugin",
    "Role",
    "Rule",
    "TextChunk",
    "TextDelta",
    "TextPart",
    "Tool",
    "ToolCallDelta",
    "ToolCallDeltaChunk",
    "ToolDefinition",
    "ToolProgressChunk",
    "ToolRequestChunk",
    "ToolRequestPart",
    "ToolResponse",
    "ToolResponsePart",
    "ToolRestart",
    "ToolResultChunk",
    "ToolRunContext",
    "TurnChunk",
    "TurnEndChunk",
    "TurnStatus",
    "TurnStream",
    "Usage",
    "deny_on_expiry",
]
