"""The one message model every part of pausepoint speaks.

Provider adapters translate to and from these types; the store persists them; the HTTP edge
translates them to the Genkit wire shapes. Parts are plain dataclasses with a literal ``kind``,
so a union of them round-trips through JSON with one pydantic adapter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field

__all__ = [
    "MediaPart",
    "Message",
    "Part",
    "Role",
    "TextPart",
    "ToolRequestPart",
    "ToolResponsePart",
]

Role: TypeAlias = Literal["user", "model", "tool"]


@dataclass(slots=True)
class TextPart:
    """Text. ``provider_metadata`` is opaque data a provider needs back with this part."""

    text: str
    provider_metadata: dict[str, Any] | None = None
    kind: Literal["text"] = "text"


@dataclass(slots=True)
class MediaPart:
    url: str
    content_type: str | None = None
    kind: Literal["media"] = "media"


@dataclass(slots=True)
class ToolRequestPart:
    """The model asks for a tool call.

    ``ref`` is minted by the runtime and unique in the session; ``call_id`` is whatever id the
    provider sent (kept only for the provider round trip, never trusted for identity). Models
    leave ``ref`` empty; the runtime fills it in. ``provider_metadata`` is opaque data the
    provider needs back with this call in later requests (e.g. Gemini's thought signatures).
    """

    name: str
    input: Any
    ref: str = ""
    call_id: str | None = None
    provider_metadata: dict[str, Any] | None = None
    kind: Literal["tool_request"] = "tool_request"


@dataclass(slots=True)
class ToolResponsePart:
    """The result of a tool call, answering the request with the same ``ref``."""

    name: str
    output: Any
    ref: str
    call_id: str | None = None
    is_error: bool = False
    kind: Literal["tool_response"] = "tool_response"


Part: TypeAlias = Annotated[TextPart | MediaPart | ToolRequestPart | ToolResponsePart, Field(discriminator="kind")]


@dataclass(slots=True)
class Message:
    role: Role
    parts: list[Part] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The concatenated text parts of the message."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_requests(self) -> list[ToolRequestPart]:
        return [p for p in self.parts if isinstance(p, ToolRequestPart)]

    @property
    def tool_responses(self) -> list[ToolResponsePart]:
        return [p for p in self.parts if isinstance(p, ToolResponsePart)]
