"""The REST API's request bodies: pydantic models with unknown fields refused, read by the
server and written by ``pausepoint.client``; the OpenAPI document is generated from them and
from the JSON of what they answer (``session._json``, ``turn._streaming.CHUNK``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StrictFloat,
    StrictInt,
    Tag,
    WithJsonSchema,
)

from .content._messages import MediaPart, Message, TextPart
from .errors import InvalidGrant
from .session._durations import SAID, duration
from .session._grants import Grant
from .session._interrupts import ToolResponse, ToolRestart

__all__ = [
    "ApproveBody",
    "CancelBody",
    "DenyBody",
    "GrantBody",
    "RespondBody",
    "RestartBody",
    "ResumeBody",
    "RevokeBody",
    "SendBody",
    "ValidateBody",
    "grant_of",
    "user_message",
]


def _part_kind(part: Any) -> str | None:
    """A part's ``kind``: as given, or — since the schema gives it a default — what it holds
    (``text``; a ``url``)."""
    if isinstance(part, dict):
        kind = part.get("kind")
        if kind is None:
            return "text" if "text" in part else "media" if "url" in part else None
        return kind if isinstance(kind, str) else None
    return getattr(part, "kind", None)


UserPart: TypeAlias = Annotated[
    Annotated[TextPart, Tag("text")] | Annotated[MediaPart, Tag("media")],
    Discriminator(
        _part_kind,
        custom_error_type="invalid_part",
        custom_error_message='a part is {"kind": "text", "text"} or {"kind": "media", "url"}',
    ),
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @classmethod
    def error_path(cls, loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
        """Where a validation error of ``loc`` is in the body as the client wrote it."""
        return loc


class SendBody(_Body):
    """A user message: a string, or a list of text / media parts."""

    message: Annotated[
        Annotated[str, Tag("text")]
        | Annotated[list[UserPart], Field(json_schema_extra={"minItems": 1}), Tag("parts")],  # [] is refused (422)
        Discriminator(
            lambda message: "text" if isinstance(message, str) else "parts" if isinstance(message, list) else None,
            custom_error_type="invalid_message",
            custom_error_message="a message is a string or a list of parts",
        ),
    ]

    @classmethod
    def error_path(cls, loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
        """Without the tags pydantic puts in ``loc`` for which kind of message (``text`` or
        ``parts``) and of part (``text`` or ``media``) it validated: ``message.0.extra``, not
        ``message.parts.0.text.extra``."""
        if loc[:1] != ("message",) or len(loc) < 2:
            return loc
        if loc[1] != "parts":
            return loc[:1] + loc[2:]
        return loc[:1] + loc[2:3] + loc[4:]


def _whole_number(value: Any) -> Any:
    """A JSON number with nothing after its point (``2.0``) as the integer it is."""
    return int(value) if type(value) is float and value.is_integer() else value


def _bounded(*kinds: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema: one of ``kinds`` of number, each at most 10**9, or null (none)."""
    return {"anyOf": [*({**kind, "maximum": 10**9} for kind in kinds), {"type": "null"}], "default": None}


class GrantBody(_Body):
    """Later calls an approval approves too (``Grant``): calls of ``tool`` (default: the paused
    call's) in this session, within ``bounds`` (input field -> ``equals`` / ``one_of`` / ``min``
    / ``max``; none: any arguments), at most ``uses`` times, for ``ttl_seconds`` (none: as long
    as the approval policy allows). ``{}`` approves the tool's calls for this session."""

    tool: str | None = None
    bounds: dict[str, dict[str, Any]] | None = None
    # Strict: a JSON true is no count and "60" no duration (lax would read them as 1 and 60); 2.0
    # is the count 2, as JSON (and its Schema's "integer") has one kind of number. The ranges are
    # the schema's to say and the core's to check (InvalidGrant, 422, as a local chat's grant is
    # refused): a microsecond at least, as a duration is kept to the microsecond.
    uses: Annotated[
        StrictInt | None, BeforeValidator(_whole_number), WithJsonSchema(_bounded({"type": "integer", "minimum": 1}))
    ] = None
    ttl_seconds: Annotated[
        StrictFloat | StrictInt | None,
        WithJsonSchema(_bounded({"type": "number", "minimum": 1e-6}, {"type": "integer", "exclusiveMinimum": 0})),
    ] = None

    @classmethod
    def of(cls, grant: Grant | None) -> GrantBody | None:
        """``grant`` as a request body's ``grant`` (None stays None)."""
        return None if grant is None else cls.model_validate(grant.scope())

    def to_grant(self) -> Grant:
        ttl = None if self.ttl_seconds is None else duration(self.ttl_seconds, seconds=True)
        if self.ttl_seconds is not None and ttl is None:  # no timedelta at all (1e300), or refused as 0
            raise InvalidGrant(f"a grant's ttl is {SAID}, not {self.ttl_seconds!r} seconds")
        return Grant(tool=self.tool, bounds=self.bounds, uses=self.uses, ttl=ttl)


def grant_of(body: GrantBody | None) -> Grant | None:
    return None if body is None else body.to_grant()


class RespondItem(_Body):
    """An answer by the call's ref; with ``pause_id`` it answers that pause only (see ``PendingInterrupt``)."""

    ref: str
    name: str
    output: Any = None
    metadata: dict[str, Any] | None = None
    decision: Literal["respond", "deny"] = "respond"
    reason: str | None = None
    pause_id: str | None = None
    grant: GrantBody | None = None

    @classmethod
    def of(cls, answer: ToolResponse) -> RespondItem:
        """The item that carries ``answer`` (what the client sends)."""
        return cls(
            ref=answer.ref,
            name=answer.name,
            output=answer.output,
            metadata=answer.metadata,
            decision=answer.decision,
            reason=answer.reason,
            pause_id=answer.pause_id,
            grant=GrantBody.of(answer.grant),
        )

    def to_answer(self) -> ToolResponse:
        """The answer this item carries (what the server gives the chat)."""
        return ToolResponse(
            self.ref,
            self.name,
            self.output,
            self.metadata,
            self.decision,
            self.reason,
            self.pause_id,
            grant_of(self.grant),
        )


class RestartItem(_Body):
    ref: str
    name: str
    replace_input: Any = None
    resumed_metadata: dict[str, Any] | None = None
    pause_id: str | None = None
    grant: GrantBody | None = None

    @classmethod
    def of(cls, answer: ToolRestart) -> RestartItem:
        """The item that carries ``answer`` (what the client sends)."""
        return cls(
            ref=answer.ref,
            name=answer.name,
            replace_input=answer.replace_input,
            resumed_metadata=answer.resumed_metadata,
            pause_id=answer.pause_id,
            grant=GrantBody.of(answer.grant),
        )

    def to_answer(self) -> ToolRestart:
        """The restart this item carries (what the server gives the chat)."""
        return ToolRestart(
            self.ref, self.name, self.replace_input, self.resumed_metadata, self.pause_id, grant_of(self.grant)
        )


class ResumeBody(_Body):
    """Answers to paused calls (the ``Idempotency-Key`` header makes a retry safe)."""

    respond: list[RespondItem] = Field(default_factory=list)
    restart: list[RestartItem] = Field(default_factory=list)
    metadata: dict[str, Any] | None = None


class RespondBody(_Body):
    """The paused call's result. ``name`` defaults to the paused tool's; ``pause_id`` (from the
    pending interrupt) makes the answer apply to that pause only, not to a later one of the call;
    ``link``: the approval link the person opened (see ``ApproveBody``)."""

    output: Any = None
    name: str | None = None
    metadata: dict[str, Any] | None = None
    pause_id: str | None = None
    grant: GrantBody | None = None
    link: str | None = None


class DenyBody(_Body):
    """Deny the paused call (the model is told, with ``reason``); ``link``: see ``ApproveBody``."""

    reason: str = ""
    name: str | None = None
    metadata: dict[str, Any] | None = None
    pause_id: str | None = None
    link: str | None = None


class RestartBody(_Body):
    """Run the paused call again (for a call paused for approval: approve it); ``grant``
    approves later calls too; ``link``: see ``ApproveBody``."""

    replace_input: Any = None
    resumed_metadata: dict[str, Any] | None = None
    name: str | None = None
    pause_id: str | None = None
    grant: GrantBody | None = None
    link: str | None = None


class ApproveBody(_Body):
    """Approve a pause the way the console does (``Agent.approval``): a yes for an interrupt-only
    tool, a run with ``tool_approved`` for a tool that paused itself. ``replace_input`` (only for
    tools that allow edits) approves an edited input; ``grant`` approves later calls too (where
    the approval policy lets the pause grant them: its view says ``approval.grantable``).

    ``link`` is the approval link (its token) the person opened to decide: the answer is then
    bound to the link's pause and recorded with ``via="link"``; a link this server did not sign
    or made for another pause (400 ``invalid_link``), or one used, expired or superseded (409
    ``link_used``, ``link_expired``, ``link_superseded``) decides nothing."""

    replace_input: Any = None
    metadata: dict[str, Any] | None = None
    pause_id: str | None = None
    grant: GrantBody | None = None
    link: str | None = None


class RevokeBody(_Body):
    """Why a grant is revoked (kept in the audit trail)."""

    reason: str = ""


class CancelBody(_Body):
    reason: str = "cancelled"


class ValidateBody(_Body):
    """A candidate answer to check without giving it: exactly one of a replacement ``input`` or
    a result ``output``."""

    input: Any = None
    output: Any = None


def user_message(body: SendBody) -> Message:
    if isinstance(body.message, str):
        return Message("user", [TextPart(body.message)])
    return Message("user", list(body.message))
