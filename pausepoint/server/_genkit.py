"""The reference system's agent wire format — the only module that knows its camelCase JSON.

Requests: ``{"data": AgentInput, "init": AgentInit}``; replies ``{"result": AgentOutput}``, or
SSE lines ``data: {"message": AgentStreamChunk}`` … ``data: {"result": AgentOutput}`` (a failure
after the stream started: ``data: {"error": {...}}``).

Snapshots: ``_snapshots`` (ids, and what each names).

Parts. One ref per call: a tool request shows its call's ref everywhere, and answers name it.
A call paused now carries ``metadata.interrupt`` (the interrupt's metadata, or ``true``) in the
turn's output and in snapshots; a call paused for approval before it ran (``requires_approval``)
also carries ``metadata.approval`` (``{required, approvals, approvedBy, progress, requestedBy}``: "1 of 2
approvals" after the first of two, the pause still open). A restart part runs the tool on ``toolRequest.input``;
``metadata.resumed`` becomes ``ctx.resumed_metadata``; an input that differs from the paused
one is an edit, and so is one sent with ``metadata.replacedInput`` unless it is the same input
(Genkit's client sends that metadata whenever a replacement was given, even the same one). A
respond part with ``metadata.decision: "deny"`` (and ``metadata.reason``), or those keys in
``metadata.interruptResponse`` (Genkit's ``respond_to_interrupt(..., metadata=...)``), is a
denial: what a call paused for approval takes, as REST's ``/deny`` (a plain respond is refused).
An answer's ``metadata.interruptResponse`` object is recorded as the answer's own metadata.

Stream. Chunks rebuild the history as Genkit's client rebuilds it: text and tool requests are
model chunks of the model message, once each, when the model gives them; a tool message is one
``tool`` chunk group, sent when the last result of its batch arrives (a call finished beside a
paused one waits for the pause's answer, as in the history); a pause is not a chunk of its own —
the turn's output message marks it, and Genkit's client takes that message in place of the
streamed copy. ``index`` counts the turn's messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, StrictBool
from pydantic.alias_generators import to_camel

from ..content._messages import MediaPart, Message, Part, TextPart, ToolRequestPart, ToolResponsePart
from ..errors import InvalidMessage, InvalidRequest, InvalidSessionId
from ..runtime._launch import TurnStatus
from ..session._interrupts import PendingInterrupt, ToolResponse, ToolRestart
from ..session._response import AgentFinishReason, AgentResponse
from ..turn._streaming import InterruptChunk, TextChunk, ToolRequestChunk, ToolResultChunk, TurnChunk, TurnEndChunk
from ._errors import error_body, failure_json, sse_json
from ._limits import parse_body
from ._snapshots import Snapshot, snapshot_id

__all__ = [
    "ChunkTranslator",
    "GenkitTurn",
    "abort_json",
    "detached_json",
    "frame",
    "lookup_ids",
    "output_json",
    "parse_turn",
    "snapshot_json",
]

# The reference's finish reasons have no "max_turns"; it reports such a turn as "other".
_FINISH = {reason: reason.value for reason in AgentFinishReason} | {AgentFinishReason.MAX_TURNS: "other"}


# -- requests -------------------------------------------------------------------------------------


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, validate_by_name=False, validate_by_alias=True)


class _Media(_Wire):
    url: str
    content_type: str | None = None


class _ToolRequest(_Wire):
    name: str
    ref: str | None = None
    input: Any = None
    partial: StrictBool | None = None


class _ToolResponse(_Wire):
    name: str
    ref: str | None = None
    output: Any = None
    content: list[Any] | None = None


class _Part(_Wire):
    text: str | None = None
    media: _Media | None = None
    tool_request: _ToolRequest | None = None
    tool_response: _ToolResponse | None = None
    data: Any = None
    metadata: dict[str, Any] | None = None
    custom: dict[str, Any] | None = None
    reasoning: str | None = None
    resource: Any = None


class _Message(_Wire):
    role: str
    content: list[_Part]
    metadata: dict[str, Any] | None = None


class _Resume(_Wire):
    respond: list[_Part] | None = None
    restart: list[_Part] | None = None
    metadata: dict[str, Any] | None = None


class _Input(_Wire):
    message: _Message | None = None
    resume: _Resume | None = None
    detach: StrictBool | None = None  # true or false: a string such as "yes" is malformed


class _Init(_Wire):
    # Either spelling, as genkit-fastapi takes it (it writes ``session_id`` itself, from ``?session_id=``).
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, validate_by_name=True, validate_by_alias=True)
    session_id: str | None = None
    snapshot_id: str | None = None
    state: Any = None


class _Envelope(BaseModel):
    model_config = ConfigDict(extra="ignore")
    data: _Input
    init: _Init | None = None


@dataclass(slots=True)
class GenkitTurn:
    """One turn request, translated: a user message, or answers; and where to run it."""

    message: Message | None = None
    message_json: Any = None
    respond: list[ToolResponse] = field(default_factory=list)
    restart: list[ToolRestart] = field(default_factory=list)
    metadata: dict[str, Any] | None = None
    snapshot_id: str | None = None
    session_id: str | None = None
    has_state: bool = False
    detach: bool = False


def parse_turn(body: dict[str, Any], query: Mapping[str, str] | None = None) -> GenkitTurn:
    """Translate ``{"data": AgentInput, "init": AgentInit}``; ``InvalidRequest`` if malformed.
    A session named in the ``query`` (``?session_id=`` or ``?thread_id=``, as genkit-fastapi
    takes it) is the turn's when ``init`` names none."""
    init_given = body.get("init")
    if isinstance(init_given, dict):
        for name in ("session_id", "snapshot_id"):
            _one_spelling(init_given, name, "init")
    query = query or {}
    if "session_id" in query and "thread_id" in query:
        raise InvalidRequest("the query names the session twice (session_id and thread_id): give one")
    envelope = parse_body(_Envelope, body)
    data, init = envelope.data, envelope.init or _Init()
    named = query.get("session_id") or query.get("thread_id")
    # An empty id is not "no id": a client that meant a session must not get a new one.
    if init.session_id == "" or any(query.get(name) == "" for name in ("session_id", "thread_id")):
        raise InvalidSessionId("session id '' is not valid: leave it out to start a session", session_id="")
    if init.snapshot_id == "":
        raise InvalidRequest("snapshot id '' names no snapshot: leave it out to start a session")
    turn = GenkitTurn(
        snapshot_id=init.snapshot_id or None,
        session_id=init.session_id or (None if init.snapshot_id else named) or None,
        has_state=init.state is not None,
        detach=bool(data.detach),
    )
    if data.message is not None and data.resume is not None:
        raise InvalidRequest("a turn carries either a message or a resume, not both")
    if data.message is not None:
        if data.message.role != "user":
            raise InvalidRequest(f"the message must have role 'user', not {data.message.role!r}")
        if data.message.metadata:  # refused rather than dropped: a message keeps its parts only
            raise InvalidMessage("a user message keeps its parts only, not metadata")
        turn.message = Message("user", [_user_part(p) for p in data.message.content])
        turn.message_json = [p.model_dump(by_alias=True, exclude_none=True) for p in data.message.content]
    elif data.resume is not None:
        turn.metadata = data.resume.metadata
        turn.respond = [_respond(p) for p in data.resume.respond or []]
        turn.restart = [_restart(p) for p in data.resume.restart or []]
    else:
        raise InvalidRequest("the turn has neither a message nor a resume")
    return turn


def _user_part(part: _Part) -> Part:
    names = ("metadata", "custom", "data", "reasoning", "resource")
    kept_nowhere = [name for name in names if getattr(part, name) not in (None, {}, "")]
    if kept_nowhere:  # refused rather than dropped: what is taken can be read back
        raise InvalidMessage(f"a user message's part keeps text or media only, not {', '.join(kept_nowhere)}")
    if part.text is not None and part.media is None and part.tool_request is None and part.tool_response is None:
        return TextPart(part.text)
    if part.media is not None and part.text is None:
        return MediaPart(part.media.url, part.media.content_type)
    raise InvalidMessage("a user message may hold only text and media parts")


def _respond(part: _Part) -> ToolResponse:
    if part.tool_response is None or not part.tool_response.ref:
        raise InvalidRequest("each resume.respond entry must be a toolResponse part with a ref")
    response = part.tool_response
    if response.content:  # kept nowhere: refused rather than dropped (what is taken can be read back)
        raise InvalidRequest(
            "toolResponse.content (a multipart tool output) is not supported: give the answer as 'output'"
        )
    # Genkit's respond_to_interrupt(..., metadata=m) sends the answer's own metadata as
    # ``interruptResponse: m`` (``true`` without one): recorded as the answer's metadata, as
    # Python's ``pause.respond(..., metadata=m)`` is, its keys winning over the part's others.
    metadata = {k: v for k, v in (part.metadata or {}).items() if k not in ("interrupt", "interruptResponse")}
    said = (part.metadata or {}).get("interruptResponse")
    if said is not None and said is not True and not isinstance(said, dict):  # taken, it would be dropped
        raise InvalidRequest("metadata.interruptResponse must be an object (the answer's metadata) or true")
    if isinstance(said, dict):
        metadata |= said
    # A denial: what a call paused for approval takes beside a restart, said in that metadata.
    # The model is told {"denied": true, "reason": ...}.
    if "decision" not in metadata:
        return ToolResponse(response.ref or "", response.name, response.output, metadata or None)
    decision, reason = metadata.pop("decision"), metadata.pop("reason", "")
    if decision != "deny":
        raise InvalidRequest("a toolResponse's metadata.decision may only be 'deny' (a restart approves)")
    if not isinstance(reason, str):
        raise InvalidRequest("a denial's metadata.reason must be a string")
    if response.output is not None and response.output != {"denied": True, "reason": reason}:
        raise InvalidRequest("a denial carries no output of its own: give its reason as metadata.reason")
    return ToolResponse(response.ref or "", response.name, None, metadata or None, decision="deny", reason=reason)


def _restart(part: _Part) -> ToolRestart:
    """A restart part as an answer that carries the input its client saw: the core runs the
    same input again as no edit, for any tool, as Genkit does, and takes another input as an
    edit (Genkit's client sends ``metadata.replacedInput`` beside one; the input is the edit)."""
    if part.tool_request is None or not part.tool_request.ref:
        raise InvalidRequest("each resume.restart entry must be a toolRequest part with a ref")
    request, metadata = part.tool_request, part.metadata or {}
    resumed = metadata.get("resumed")
    if resumed is not None and not isinstance(resumed, dict | bool):
        raise InvalidRequest("metadata.resumed must be an object or a boolean (a restart always runs as resumed)")
    return ToolRestart(
        request.ref or "",
        request.name,
        replace_input=request.input,
        resumed_metadata=resumed if isinstance(resumed, dict) else None,
    )


def lookup_ids(body: dict[str, Any], *, need_one: bool) -> tuple[str | None, str | None]:
    """``(snapshot_id, session_id)`` from ``{"data": {"snapshotId"|"sessionId"}}`` (or a bare id)."""
    data = body.get("data")
    if isinstance(data, str) and data:
        return data, None
    if not isinstance(data, dict):
        raise InvalidRequest(
            'the body must be {"data": {"snapshotId": ...}}, {"data": {"sessionId": ...}} or {"data": "<snapshot id>"}'
            if need_one
            else 'the body must be {"data": {"snapshotId": ...}} or {"data": "<snapshot id>"}: an abort names the turn '
            "to stop by its snapshot"
        )
    snap = _one_spelling(data, "snapshot_id", "data")  # either spelling, as genkit-fastapi takes them
    session = _one_spelling(data, "session_id", "data")
    for value in (snap, session):
        if value is not None and not isinstance(value, str):
            said = "snapshotId and sessionId must be strings" if need_one else "snapshotId must be a string"
            raise InvalidRequest(said)
    if need_one and bool(snap) == bool(session):
        raise InvalidRequest('give exactly one of "snapshotId" or "sessionId"')
    if not need_one and not snap:
        raise InvalidRequest('"snapshotId" is required: an abort names the turn to stop by its snapshot')
    return snap or None, session or None


def _one_spelling(given: dict[str, Any], name: str, where: str) -> Any:
    """``given``'s ``name`` in either spelling (``session_id`` or ``sessionId``); ``InvalidRequest``
    when it has both: one name given twice, whichever one it meant."""
    camel = to_camel(name)
    if name in given and camel in given:
        raise InvalidRequest(f"{where} names its {name.replace('_', ' ')} twice ({camel} and {name}): give one")
    return given.get(camel, given.get(name))


# -- replies --------------------------------------------------------------------------------------


def _interrupt_part(pause: PendingInterrupt) -> dict[str, Any]:
    metadata: dict[str, Any] = {"interrupt": pause.metadata or True}
    status = pause.approval
    if status is not None and status.gated:  # a call paused before it ran: where its approval stands
        metadata["approval"] = {
            "required": status.required,
            "approvals": len(status.approved_by),
            "approvedBy": list(status.approved_by),
            "progress": status.progress,
            "requestedBy": status.requested_by,
        }
    return {"toolRequest": {"ref": pause.ref, "name": pause.name, "input": pause.input}, "metadata": metadata}


def _part_json(part: Part, paused: dict[str, PendingInterrupt]) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"text": part.text}
    if isinstance(part, MediaPart):
        media = {"url": part.url} | ({"contentType": part.content_type} if part.content_type else {})
        return {"media": media}
    if isinstance(part, ToolRequestPart):
        pause = paused.get(part.ref)
        if pause is not None:
            return _interrupt_part(pause)
        return {"toolRequest": {"ref": part.ref, "name": part.name, "input": part.input}}
    assert isinstance(part, ToolResponsePart)
    return {"toolResponse": {"ref": part.ref, "name": part.name, "output": part.output}}


def message_json(message: Message, pauses: Iterable[PendingInterrupt] = ()) -> dict[str, Any]:
    """A message in the reference's shape; tool requests paused now become interrupt parts."""
    paused = {p.ref: p for p in pauses}
    return {"role": message.role, "content": [_part_json(p, paused) for p in message.parts]}


def output_json(response: AgentResponse) -> dict[str, Any]:
    """``AgentOutput`` for a response (server-managed state: no ``state``)."""
    output: dict[str, Any] = {
        "sessionId": response.session_id,
        "snapshotId": snapshot_id(response.session_id, response.version),
        "message": message_json(response.message, response.interrupts) if response.message else None,
        "artifacts": [],
        "finishReason": _FINISH[response.finish_reason],
    }
    if output["message"] is None:
        del output["message"]
    if response.error is not None:
        output["error"] = failure_json(response.error)
    return output


def snapshot_json(snapshot: Snapshot, fallback_time: datetime) -> dict[str, Any]:
    """``SessionSnapshot`` (``fallback_time`` stands in for times logs written before turn ends
    recorded theirs did not keep)."""
    messages = snapshot.messages
    last_model = max((i for i, m in enumerate(messages) if m.role == "model"), default=-1)
    wire_messages = [message_json(m, snapshot.pauses if i == last_model else ()) for i, m in enumerate(messages)]
    out: dict[str, Any] = {
        "snapshotId": snapshot.id,
        "sessionId": snapshot.session_id,
        "parentId": snapshot.parent_id,
        "createdAt": (snapshot.created_at or fallback_time).isoformat(),
        "updatedAt": (snapshot.updated_at or snapshot.created_at or fallback_time).isoformat(),
        "status": snapshot.status.value,
        "state": {"sessionId": snapshot.session_id, "messages": wire_messages, "artifacts": []},
    }
    response = snapshot.response
    if response is not None:
        out["finishReason"] = _FINISH[response.finish_reason]
        if response.error is not None:
            out["error"] = failure_json(response.error)
    return out


def detached_json(session_id: str, turn_id: int) -> dict[str, Any]:
    """``AgentOutput`` of a detached turn: the snapshot to poll, nothing else yet."""
    return {
        "sessionId": session_id,
        "snapshotId": snapshot_id(session_id, turn_id),
        "artifacts": [],
        "finishReason": "detached",
    }


def abort_json(snapshot: str, status: TurnStatus) -> dict[str, Any]:
    """``AgentAbortResponse``: the snapshot's status before the call (``pending``: it stopped it)."""
    return {"snapshotId": snapshot, "status": status.value}


class ChunkTranslator:
    """Turns pausepoint's stream chunks into ``AgentStreamChunk`` objects.

    Text and tool requests are model chunks of the current model message; tool results are a
    ``tool`` chunk; a pause is a model chunk holding the interrupt part; the turn end is
    ``turnEnd``. ``index`` counts messages as the reference does: it moves on when the role
    changes.
    """

    def __init__(self) -> None:
        self._role: str | None = None
        self._index = 0

    def _chunk(self, role: str, part: dict[str, Any]) -> dict[str, Any]:
        if self._role is not None and role != self._role:
            self._index += 1
        self._role = role
        return {"modelChunk": {"role": role, "index": self._index, "content": [part]}}

    def translate(self, chunk: TurnChunk) -> dict[str, Any] | None:
        if isinstance(chunk, TextChunk):
            return self._chunk("model", {"text": chunk.text})
        if isinstance(chunk, ToolRequestChunk):
            return self._chunk("model", {"toolRequest": {"ref": chunk.ref, "name": chunk.name, "input": chunk.input}})
        if isinstance(chunk, InterruptChunk):
            return None  # the call was streamed as a tool request; the turn's output marks it paused
        if isinstance(chunk, ToolResultChunk):
            return self._chunk("tool", {"toolResponse": {"ref": chunk.ref, "name": chunk.name, "output": chunk.output}})
        if isinstance(chunk, TurnEndChunk):
            response = chunk.response
            return {
                "turnEnd": {
                    "snapshotId": snapshot_id(response.session_id, response.version),
                    "finishReason": _FINISH[response.finish_reason],
                }
            }
        return None  # tool-call deltas and tool progress have no counterpart in the reference


def frame(kind: Literal["message", "result", "error"], value: Any) -> bytes:
    """One SSE event: ``data: {"<kind>": value}``; for ``error``, ``value`` is the exception."""
    payload = error_body(value) if kind == "error" else {kind: value}
    return b"data: " + sse_json(payload) + b"\n\n"
