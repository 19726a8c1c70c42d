"""pausepoint: LLM agents whose tools pause for people and resume later, exactly once."""

from .approval._policy import ApprovalPolicy, Escalation, Role, Rule
from .content._jsondata import JsonLimits
from .content._messages import MediaPart, Message, Part, TextPart, ToolRequestPart, ToolResponsePart
from .models._model import (
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
from .runtime._agent import Agent, deny_on_expiry
from .runtime._app import Pausepoint
from .runtime._chat import Chat, DetachedTurn, SyncChat
from .runtime._launch import TurnStatus
from .runtime._portal import SyncTurnStream, run_sync
from .session._grants import Grant, GrantInfo
from .session._interrupts import ApprovalStatus, AuditEntry, PendingInterrupt, ToolResponse, ToolRestart
from .session._response import AgentFinishReason, AgentResponse
from .tools._display import ApprovalView, PauseDisplay, PauseField, PauseView
from .tools._tool import Interrupt, Tool, ToolRunContext
from .turn._streaming import (
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
    "SyncChat",
    "SyncTurnStream",
    "Usage",
    "deny_on_expiry",
    "run_sync",
]
