"""The OpenAPI 3.1 document of the REST API: its paths from the route table (``_routes``), its
schemas from the request models in ``pausepoint._rest`` and the response types — so it cannot
drift from the routes served, nor from what they accept and return."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import models_json_schema

from .._rest import (
    ApproveBody,
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
from ..content._messages import Message
from ..session._grants import GrantInfo
from ..session._interrupts import AuditEntry, PendingInterrupt
from ..session._response import AgentResponse
from ..stores import SessionSummary
from ..tools._display import PauseView
from ._routes import Endpoint, Operation, path_parameters, schema_ref

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{model}"

_ERRORS = (("400", "bad request"), ("401", "unauthenticated"), ("403", "forbidden"), ("404", "not found"),
           ("409", "conflict"), ("413", "too large"), ("422", "invalid"))  # fmt: skip


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
    schemas["PendingInterrupt"]["properties"]["view"] = schema_ref("PauseView")
    schemas["AuditEntry"]["properties"]["view"] = {"anyOf": [schema_ref("PauseView"), {"type": "null"}]}
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
            "session": schema_ref("SessionSummary"),
            "interrupts": {"type": "array", "items": schema_ref("PendingInterrupt")},
            "last_response": {"anyOf": [schema_ref("AgentResponse"), {"type": "null"}]},
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


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _operation(path: str, operation: Operation) -> dict[str, Any]:
    """``operation`` of ``path`` as the document writes it."""
    if operation.responses is not None:
        responses = operation.responses
    else:
        responses = {"200": {"description": "OK", "content": _json(operation.ok or {})}}
        if operation.stream:
            responses["200"]["content"]["text/event-stream"] = {"schema": {"type": "string"}}
        for code, why in _ERRORS:
            responses[code] = {"description": why, "content": _json(schema_ref("Error"))}
    written: dict[str, Any] = {"summary": operation.summary}
    if operation.public:
        written["security"] = []
    written["responses"] = responses
    parameters = [*path_parameters(path), *operation.params]
    if parameters:
        written["parameters"] = parameters
    if operation.body is not None:
        written["requestBody"] = {"required": True, "content": _json(schema_ref(operation.body))}
    return written


def openapi_document(table: Sequence[Endpoint]) -> dict[str, Any]:
    """The document served at ``/openapi.json``: every route of ``table`` that has a ``doc``."""
    paths: dict[str, Any] = {}
    for endpoint in table:
        for path, operation in endpoint.documented():
            assert endpoint.method is not None, path
            paths.setdefault(path, {})[endpoint.method.lower()] = _operation(path, operation)
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
