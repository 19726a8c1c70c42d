"""The route table's rows: each route the server serves, declared once — method, path, handler,
and how ``/openapi.json`` describes it.

Handlers are module-level functions of the request, each in the room of its concept
(``_reads``, ``_messages``, ``_answers``, ...), with its ``Operation`` beside it; ``_table``
lists every row in one table, from which both the app's Starlette routes (``starlette_routes``)
and the OpenAPI document's paths (``_openapi.openapi_document``) are made: a route cannot be
served undescribed, or described and not served, and no path is typed twice. A handler that
reads a JSON body reads it with its operation (``Operation.parse``), so the body the document
describes is the model the handler parses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel
from starlette.routing import BaseRoute, Mount, Route

from ..session._ids import SESSION_ID_PATTERN
from ._errors import guarded
from ._limits import MAX_PAGE, parse_body

__all__ = [
    "IDEMPOTENCY_KEY",
    "PAGE_SIZE",
    "Endpoint",
    "Operation",
    "header",
    "json_array",
    "json_object",
    "page_size",
    "path_parameters",
    "query",
    "schema_ref",
    "starlette_routes",
]

Schema = dict[str, Any]
B = TypeVar("B", bound=BaseModel)

_CONVERTOR = re.compile(r":\w+\}")
_PARAMETER = re.compile(r"\{(\w+)(?::\w+)?\}")


def schema_ref(name: str) -> Schema:
    """A reference to the component schema ``name``."""
    return {"$ref": f"#/components/schemas/{name}"}


def json_object(**properties: Schema) -> Schema:
    """An object with these properties."""
    return {"type": "object", "properties": properties}


def json_array(items: Schema) -> Schema:
    """An array of ``items``."""
    return {"type": "array", "items": items}


def query(name: str, schema: Schema) -> Schema:
    """An optional query parameter."""
    return {"name": name, "in": "query", "required": False, "schema": schema}


def header(name: str, schema: Schema) -> Schema:
    """An optional request header."""
    return {"name": name, "in": "header", "required": False, "schema": schema}


#: the header that makes a retried message or answer safe (the first outcome is returned)
IDEMPOTENCY_KEY = header(  # visible ASCII, spaces only between (``content._jsondata.key_text``)
    "Idempotency-Key", {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[!-~]([ -~]*[!-~])?$"}
)


def page_size(max_page: int) -> Schema:
    """The ``limit`` of a listing, whose pages hold at most ``Limits.max_page``."""
    return query("limit", {"type": "integer", "minimum": 1, "maximum": max_page})


#: ``limit`` as a listing's operation declares it: the document states the app's own
#: ``Limits.max_page`` in its place (``_openapi``), the bound the handler enforces
PAGE_SIZE = page_size(MAX_PAGE)


@dataclass(frozen=True, slots=True)
class Operation(Generic[B]):
    """How the OpenAPI document describes a route.

    ``ok``: the schema of its 200 JSON reply; ``body``: the model its JSON request body is read
    as (``parse``; the document's component schema of the same name); ``stream``: it answers
    with server-sent events when asked (``Accept: text/event-stream``); ``params``: its query
    and header parameters (the path's own come from the path); ``responses``: all its
    responses, when they are not the usual ``ok`` and error replies; ``public``: it needs no
    credentials.
    """

    summary: str
    ok: Schema | None = None
    body: type[B] | None = None
    stream: bool = False
    params: Sequence[Schema] = ()
    responses: Schema | None = None
    public: bool = False

    def parse(self, raw: Any) -> B:
        """``raw``, the request's JSON, read as ``body``; ``InvalidRequest`` naming every problem
        otherwise."""
        if self.body is None:
            raise TypeError(f"{self.summary!r} takes no request body")
        return parse_body(self.body, raw)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One row of the route table.

    ``serve`` answers it: a request handler for ``method`` (whatever it raises becomes its error
    response, ``guarded``), or — with ``method=None`` — an ASGI app that answers every method
    (``mount``: every path under ``path`` too). ``doc`` is how the OpenAPI document describes it
    (None: it is not in the document, like the Genkit wire and the console); a mapping, for a
    path ending in a parameter, describes the path once per value it takes. ``hot``: matched
    before the other routes (those that run turns: most of what a server answers); no two
    routes match the same request, so the order decides nothing else.
    """

    method: str | None
    path: str
    serve: Any
    doc: Operation[Any] | Mapping[str, Operation[Any]] | None = None
    mount: bool = False
    hot: bool = False

    def documented(self) -> list[tuple[str, Operation[Any]]]:
        """The paths this row puts in the OpenAPI document, each with its operation."""
        if self.doc is None:
            return []
        if isinstance(self.doc, Operation):
            return [(_CONVERTOR.sub("}", self.path), self.doc)]  # OpenAPI's {name}, not Starlette's {name:path}
        stem, _, last = self.path.rpartition("/")
        if not _PARAMETER.fullmatch(last):
            raise ValueError(f"{self.path}: only a path ending in a parameter is described per value")
        return [(f"{stem}/{value}", operation) for value, operation in self.doc.items()]


def path_parameters(path: str) -> list[Schema]:
    """The parameters of ``path`` (``{name}`` or ``{name:convertor}``), in order; a session id
    as ``check_session_id`` takes it."""
    return [
        {"name": name, "in": "path", "required": True, "schema": _PATH_SCHEMAS.get(name, {"type": "string"})}
        for name in _PARAMETER.findall(path)
    ]


_PATH_SCHEMAS: dict[str, Schema] = {"session_id": {"type": "string", "pattern": SESSION_ID_PATTERN}}


def starlette_routes(table: Sequence[Endpoint]) -> list[BaseRoute]:
    """The app's routes: the hot ones first, each group in the table's order (Starlette tries
    them one by one)."""
    routes: list[BaseRoute] = []
    for endpoint in sorted(table, key=lambda e: not e.hot):
        if endpoint.mount:
            routes.append(Mount(endpoint.path, endpoint.serve))
        elif endpoint.method is None:
            routes.append(Route(endpoint.path, endpoint.serve))
        else:
            routes.append(Route(endpoint.path, guarded(endpoint.serve), methods=[endpoint.method]))
    return routes
