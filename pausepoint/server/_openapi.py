"""The OpenAPI 3.1 document of the REST API, generated from the request models in ``pausepoint._rest``
and the response types (so it cannot drift from what the routes accept and return)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import models_json_schema

from .._grants import GrantInfo
from .._interrupts import AuditEntry, PendingInterrupt
from .._messages import Message
from .._presentation import PauseView
from .._response import AgentResponse
from .._rest import (
    CancelBody,
    DenyBody,
    GrantBody,
    RespondBody,
    RestartBody,
    ResumeBody,
    RevokeBody,
    SendBody,
    ValidateBody,
)
from ..stores import SessionSummary
from ._approvals import ApproveBody

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{model}"


def _schemas() -> dict[str, Any]:
    bodies: list[type[BaseModel]] = [
        SendBody,
        ResumeBody,
        RespondBody,
        DenyBody,
        RestartBody,
        CancelBody,
        ApproveBody,
        ValidateBody,
        GrantBody,
        RevokeBody,
    ]
    _, found = models_json_schema([(m, "validation") for m in bodies], ref_template=_REF)
    schemas: dict[str, Any] = dict(found.get("$defs", {}))
    for name, kind in (
        ("AgentResponse", AgentResponse),
        ("PendingInterrupt", PendingInterrupt),
        ("AuditEntry", AuditEntry),
        ("SessionSummary", SessionSummary),
        ("Message", Message),
        ("PauseView", PauseView),
        ("GrantInfo", GrantInfo),
    ):
        schema = TypeAdapter(kind).json_schema(mode="serialization", ref_template=_REF)
        schemas.update(schema.pop("$defs", {}))
        schemas[name] = schema
    # The server adds to each pause and audit entry how it reads to a person (``_display``).
    schemas["PendingInterrupt"]["properties"]["view"] = _ref("PauseView")
    schemas["AuditEntry"]["properties"]["view"] = {"anyOf": [_ref("PauseView"), {"type": "null"}]}
    for name in ("PendingInterrupt", "AuditEntry"):
        schemas[name]["required"] = [*schemas[name].get("required", []), "view"]
    schemas["Tool"] = {
        "type": "object",
        "required": ["name", "description", "input_schema", "output_schema", "pauses_only", "allow_input_edits"],
        "properties": {
            "name": {"type": "string"},
            "description": {"type": "string"},
            "input_schema": {"type": "object", "description": "JSON Schema of the tool's input"},
            "output_schema": {"type": ["object", "null"], "description": "JSON Schema of its result, if typed"},
            "pauses_only": {"type": "boolean", "description": "defined with define_interrupt: it only asks"},
            "allow_input_edits": {"type": "boolean"},
            "approval": {
                "type": ["object", "null"],
                "description": "what 'approve' answers: {kind: 'respond', output} or {kind: 'restart', "
                "resumed_metadata}; null when a yes cannot answer this tool",
            },
        },
    }
    schemas["SessionDetail"] = {
        "type": "object",
        "required": ["session", "interrupts", "last_response", "can_send", "can_answer"],
        "properties": {
            "session": _ref("SessionSummary"),
            "interrupts": {"type": "array", "items": _ref("PendingInterrupt")},
            "last_response": {"anyOf": [_ref("AgentResponse"), {"type": "null"}]},
            "can_send": {"type": "boolean", "description": "whether the caller may write messages in it"},
            "can_answer": {"type": "boolean", "description": "whether the caller may answer its pauses"},
        },
    }
    schemas["Validation"] = {
        "type": "object",
        "required": ["valid", "errors"],
        "properties": {
            "valid": {"type": "boolean"},
            "errors": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["path", "pointer", "message", "type"],
                    "properties": {
                        "path": {"type": "array", "items": {"type": ["string", "integer"]}},
                        "pointer": {"type": "string", "description": "JSON pointer to the field"},
                        "message": {"type": "string"},
                        "type": {"type": "string"},
                    },
                },
            },
            "value": {"description": "the value as it would be recorded (when valid)"},
        },
    }
    schemas["Error"] = {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "status", "message", "details"],
                "properties": {
                    "code": {"type": "string"},
                    "status": {"type": "string"},
                    "message": {"type": "string"},
                    "details": {"type": "object"},
                },
            }
        },
    }
    return schemas


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": _REF.format(model=name)}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _op(
    summary: str, ok: dict[str, Any], *, body: str | None = None, stream: bool = False, **extra: Any
) -> dict[str, Any]:
    responses: dict[str, Any] = {"200": {"description": "OK", "content": _json(ok)}}
    if stream:
        responses["200"]["content"]["text/event-stream"] = {"schema": {"type": "string"}}
    errors = (("400", "bad request"), ("401", "unauthenticated"), ("403", "forbidden"), ("404", "not found"),
              ("409", "conflict"), ("413", "too large"), ("422", "invalid"))  # fmt: skip
    for code, why in errors:
        responses[code] = {"description": why, "content": _json(_ref("Error"))}
    op: dict[str, Any] = {"summary": summary, "responses": responses, **extra}
    if body is not None:
        op["requestBody"] = {"required": True, "content": _json(_ref(body))}
    return op


def _params(*names: str) -> list[dict[str, Any]]:
    return [{"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in names]


_KEY = {"name": "Idempotency-Key", "in": "header", "required": False, "schema": {"type": "string", "maxLength": 200}}


def openapi_document() -> dict[str, Any]:
    """The document served at ``/openapi.json``."""
    response = _ref("AgentResponse")
    session = _params("agent", "session_id")
    listing = [
        *_params("agent"),
        {"name": "pending", "in": "query", "required": False, "schema": {"type": "boolean"}},
        {"name": "limit", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 1}},
        {"name": "offset", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 0}},
    ]
    answer = [*session, *_params("ref"), _KEY]
    array = {"type": "array"}
    paths: dict[str, Any] = {
        "/v1/agents": {
            "get": _op(
                "The agents served, and who the caller is",
                {
                    "type": "object",
                    "properties": {"agents": {**array, "items": {"type": "string"}}, "principal": {"type": "string"}},
                },
            )
        },
        "/v1/agents/{agent}": {
            "get": _op(
                "An agent: its description (never its system prompt) and tools (schemas; pauses_only, "
                "allow_input_edits, what approving answers)",
                {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "description": {"type": "string"},
                        "tools": {**array, "items": _ref("Tool")},
                    },
                },
                parameters=_params("agent"),
            )
        },
        "/v1/agents/{agent}/sessions": {
            "get": _op(
                "Sessions the caller may see (pending=true: the approvals inbox)",
                {"type": "object", "properties": {"sessions": {**array, "items": _ref("SessionSummary")}}},
                parameters=listing,
            ),
            "post": _op(
                "Start a session with a user message",
                response,
                body="SendBody",
                stream=True,
                parameters=_params("agent"),
            ),
        },
        "/v1/agents/{agent}/sessions/{session_id}": {
            "get": _op(
                "A session: summary, open pauses, last response, and what the caller may do in it",
                _ref("SessionDetail"),
                parameters=session,
            )
        },
        "/v1/agents/{agent}/sessions/{session_id}/messages": {
            "post": _op(
                "Send a user message (to an id no session has yet: start a session with that id)",
                response,
                body="SendBody",
                stream=True,
                parameters=session,
            )
        },
        "/v1/agents/{agent}/sessions/{session_id}/interrupts": {
            "get": _op(
                "The pauses open now",
                {"type": "object", "properties": {"interrupts": {**array, "items": _ref("PendingInterrupt")}}},
                parameters=session,
            )
        },
        "/v1/agents/{agent}/sessions/{session_id}/audit": {
            "get": _op(
                "The audit trail: every answer, who gave it, when, through what",
                {"type": "object", "properties": {"entries": {**array, "items": _ref("AuditEntry")}}},
                parameters=session,
            )
        },
        "/v1/agents/{agent}/sessions/{session_id}/history": {
            "get": _op(
                "The conversation as the model sees it",
                {"type": "object", "properties": {"messages": {**array, "items": _ref("Message")}}},
                parameters=session,
            )
        },
        "/v1/agents/{agent}/sessions/{session_id}/resume": {
            "post": _op("Answer paused calls", response, body="ResumeBody", stream=True, parameters=[*session, _KEY])
        },
        "/v1/agents/{agent}/sessions/{session_id}/cancel": {
            "post": _op("Cancel every open pause", response, body="CancelBody", parameters=session)
        },
        "/v1/agents/{agent}/sessions/{session_id}/interrupts/{ref}/respond": {
            "post": _op(
                "Answer a pause with the call's result", response, body="RespondBody", stream=True, parameters=answer
            )
        },
        "/v1/agents/{agent}/sessions/{session_id}/interrupts/{ref}/deny": {
            "post": _op("Deny a pause", response, body="DenyBody", stream=True, parameters=answer)
        },
        "/v1/agents/{agent}/sessions/{session_id}/interrupts/{ref}/restart": {
            "post": _op(
                "Run the paused tool again (a call paused for approval: approve it; with grant, later calls too)",
                response,
                body="RestartBody",
                stream=True,
                parameters=answer,
            )
        },
        "/v1/agents/{agent}/sessions/{session_id}/interrupts/{ref}/approve": {
            "post": _op(
                "Approve a pause: a yes for an interrupt-only tool, a run with tool_approved for a tool "
                "that paused itself or was paused for approval (422 when a yes cannot answer it). Under the "
                "agent's approval policy: 403 approval_forbidden (a role the caller lacks, or separation of "
                "duties), 409 already_approved (the caller's approval of a quorum is counted already); an "
                "approval that is not the last a quorum needs is recorded and the pause stays open "
                "(view.approval.progress: '1 of 2 approvals'). grant: approve later calls too",
                response,
                body="ApproveBody",
                stream=True,
                parameters=answer,
            )
        },
        "/v1/agents/{agent}/sessions/{session_id}/grants": {
            "get": _op(
                "The grants given in the session (active, revoked, expired or used up), oldest first",
                {"type": "object", "properties": {"grants": {**array, "items": _ref("GrantInfo")}}},
                parameters=session,
            )
        },
        "/v1/agents/{agent}/sessions/{session_id}/grants/{grant_id}/revoke": {
            "post": _op(
                "Revoke a grant: it approves no later call (revoking it again changes nothing; 404 "
                "grant_not_found for an id the session never gave)",
                {"type": "object", "properties": {"grant": _ref("GrantInfo")}},
                body="RevokeBody",
                parameters=_params("agent", "session_id", "grant_id"),
            )
        },
        "/v1/agents/{agent}/tools/{tool}/validate": {
            "post": _op(
                "Check a candidate replacement input or result against the tool's schema, without answering "
                "anything: every problem with the JSON path of its field",
                _ref("Validation"),
                body="ValidateBody",
                parameters=_params("agent", "tool"),
            )
        },
        "/v1/feed": {
            "get": {
                "summary": "Server-sent events: 'pause', 'answer' and 'turn_end', for the sessions the caller may "
                "see; each has an id: reconnect with Last-Event-ID to get exactly the events missed",
                "parameters": [
                    {"name": "Last-Event-ID", "in": "header", "required": False, "schema": {"type": "string"}}
                ],
                "responses": {
                    "200": {"description": "an event stream", "content": {"text/event-stream": {}}},
                    "400": {"description": "a Last-Event-ID this feed never sent", "content": _json(_ref("Error"))},
                },
            }
        },
        "/v1/ops/deliveries": {
            "get": _op(
                "Webhook deliveries of the outbox, newest first (operators only: 403 for others)",
                {"type": "object", "properties": {"deliveries": {**array, "items": {"type": "object"}}}},
                parameters=[
                    {
                        "name": "state",
                        "in": "query",
                        "required": False,
                        "schema": {"enum": ["pending", "delivered", "failed"]},
                    },
                    {"name": "webhook", "in": "query", "required": False, "schema": {"type": "string"}},
                    {"name": "limit", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 1}},
                ],
            )
        },
        "/v1/ops/deliveries/{delivery}/retry": {
            "post": _op(
                "Send a failed delivery again (operators only)",
                {"type": "object", "properties": {"id": {"type": "string"}, "state": {"type": "string"}}},
                parameters=_params("delivery"),
            )
        },
        "/healthz": {
            "get": {
                "summary": "The process serves requests (no credentials needed)",
                "security": [],
                "responses": {"200": {"description": "alive", "content": _json({"type": "object"})}},
            }
        },
        "/readyz": {
            "get": {
                "summary": "Every store answers (503 naming the one that does not; no credentials needed)",
                "security": [],
                "responses": {
                    "200": {"description": "ready", "content": _json({"type": "object"})},
                    "503": {"description": "a store does not answer", "content": _json({"type": "object"})},
                },
            }
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "pausepoint",
            "version": "1",
            "description": "Agents whose tools pause for people. The agent endpoint in Genkit's protocol is "
            "POST /agents/{agent} (with /getSnapshot and /abort).",
        },
        "paths": paths,
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }
