"""The OpenAPI 3.1 document of the REST API, and its route.

Its paths come from the route table (``_table``); its request bodies from the models the
routes' handlers parse (``Operation.body``, the models of ``pausepoint._rest``), and the
schemas of what they answer from the core's types — so it cannot drift from the routes served,
nor from what they accept and return."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter
from pydantic.json_schema import models_json_schema
from starlette.requests import Request
from starlette.responses import Response

from ..content._messages import Message
from ..session._grants import GrantInfo
from ..session._interrupts import AuditEntry, PendingInterrupt
from ..session._response import AgentResponse
from ..stores import SessionSummary
from ..tools._display import PauseView
from ._limits import MAX_PAGE
from ._routes import PAGE_SIZE, Endpoint, Operation, page_size, path_parameters, schema_ref
from ._service import service_of

__all__ = ["openapi", "openapi_document"]

_REF = "#/components/schemas/{model}"

_ERRORS = (("400", "bad request"), ("401", "unauthenticated"), ("403", "forbidden"), ("404", "not found"),
           ("409", "conflict"), ("413", "too large"), ("422", "invalid"))  # fmt: skip
# What any request may be answered, whatever its route: a body coded (415) or framed (501) in a
# way the server does not read, an unexpected failure (500), a store that does not answer or a
# server that is stopping (503: store_error, shutting_down).
_ANY_REQUEST = (("415", "a Content-Encoding the server does not read"), ("500", "an unexpected failure"),
                ("501", "a Transfer-Encoding other than chunked"),
                ("503", "a store does not answer, or the server is stopping"))  # fmt: skip
# What a route that runs a turn may be answered by its model, before anything was recorded.
_MODEL_ERRORS = (("429", "the model's provider limits the rate"), ("502", "the model failed"),
                 ("504", "the model did not answer in time"))  # fmt: skip


async def openapi(request: Request) -> Response:
    """``GET /openapi.json``: the document, made once by ``create_app`` (``Service.openapi``)."""
    return Response(service_of(request).openapi, media_type="application/json")


def openapi_document(table: Sequence[Endpoint], *, max_page: int = MAX_PAGE) -> dict[str, Any]:
    """The document served at ``/openapi.json``: every route of ``table`` that has a ``doc``,
    its request bodies the models those routes parse (``Operation.body``); a listing's ``limit``
    (``PAGE_SIZE``) is at most ``max_page``, the app's ``Limits.max_page``, as its handler enforces."""
    documented = [(endpoint.method, path, op) for endpoint in table for path, op in endpoint.documented()]
    models = list(dict.fromkeys(op.body for _, _, op in documented if op.body is not None))
    refs, found = models_json_schema([(m, "validation") for m in models], ref_template=_REF)
    bodies = {model: refs[(model, "validation")] for model in models}
    paths: dict[str, Any] = {}
    for method, path, operation in documented:
        assert method is not None, path
        body = None if operation.body is None else bodies[operation.body]
        paths.setdefault(path, {})[method.lower()] = _operation(path, operation, body, max_page)
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
            "schemas": {**found.get("$defs", {}), **_reply_schemas(), **_SERVER_SCHEMAS},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }


def _reply_schemas() -> dict[str, Any]:
    """The schemas of what the routes answer, from the core's types (serialised)."""
    schemas: dict[str, Any] = {}
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
    # A part of a message is what its dataclass takes, nothing else (a client's other keys are refused).
    for name in ("TextPart", "MediaPart"):
        schemas[name]["additionalProperties"] = False
    # The server adds to each pause and audit entry how it reads to a person (``_display``).
    schemas["PendingInterrupt"]["properties"]["view"] = schema_ref("PauseView")
    schemas["AuditEntry"]["properties"]["view"] = {"anyOf": [schema_ref("PauseView"), {"type": "null"}]}
    for name in ("PendingInterrupt", "AuditEntry"):
        schemas[name]["required"] = [*schemas[name].get("required", []), "view"]
    return schemas


# What the server itself writes: an agent's tools (``_display.describe_agent``), a session
# read, a validation (``_validate``) and the error body (``_errors``).
_SERVER_SCHEMAS: dict[str, Any] = {
    "Tool": {
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
    },
    "SessionDetail": {
        "type": "object",
        "required": ["session", "interrupts", "last_response", "can_send", "can_answer"],
        "properties": {
            "session": schema_ref("SessionSummary"),
            "interrupts": {"type": "array", "items": schema_ref("PendingInterrupt")},
            "last_response": {"anyOf": [schema_ref("AgentResponse"), {"type": "null"}]},
            "can_send": {"type": "boolean", "description": "whether the caller may write messages in it"},
            "can_answer": {"type": "boolean", "description": "whether the caller may answer its pauses"},
        },
    },
    "Validation": {
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
    },
    "Error": {
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
    },
}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _error(why: str) -> dict[str, Any]:
    return {"description": why, "content": _json(schema_ref("Error"))}


def _operation(path: str, operation: Operation[Any], body: dict[str, Any] | None, max_page: int) -> dict[str, Any]:
    """``operation`` of ``path`` as the document writes it."""
    if operation.responses is not None:
        responses = dict(operation.responses)
    else:
        responses = {"200": {"description": "OK", "content": _json(operation.ok or {})}}
        if operation.stream:
            responses["200"]["content"]["text/event-stream"] = {"schema": {"type": "string"}}
        for code, why in _ERRORS:
            responses[code] = _error(why)
    errors = [*_ANY_REQUEST, *(_MODEL_ERRORS if operation.stream else ())]
    if not operation.public:
        errors.append(("401", "unauthenticated"))
    for code, why in errors:
        responses.setdefault(code, _error(why))
    written: dict[str, Any] = {"summary": operation.summary}
    if operation.public:
        written["security"] = []
    written["responses"] = responses
    params = [page_size(max_page) if param == PAGE_SIZE else param for param in operation.params]
    parameters = [*path_parameters(path), *params]
    if parameters:
        written["parameters"] = parameters
    if body is not None:
        # a body whose every field is optional may be left out: the handler reads none as {}
        needed = operation.body is not None and any(f.is_required() for f in operation.body.model_fields.values())
        written["requestBody"] = {"required": needed, "content": _json(body)}
    return written
