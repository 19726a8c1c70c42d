"""A tool input described by a raw JSON Schema, checked by a real JSON-Schema validator.

A pausepoint tool's input is a pydantic model: the runtime validates arguments with it, dumps
it as the paused input, shows it to people, and fingerprints its JSON schema. An MCP tool has
only a JSON Schema. ``schema_model`` builds a pydantic model that *is* that schema: its
``model_json_schema()`` is the server's schema exactly as sent (so the fingerprint covers it),
and its validation runs ``jsonschema`` — every problem reported as a pydantic error with the
path of its field, the shape the runtime, the REST API and the console already understand.

A schema is checked whole when it is defined: a valid JSON Schema, every ``$ref`` of which
resolves within the schema itself (or to a JSON Schema dialect's own meta-schema, shipped with
``jsonschema``) — nothing is ever fetched, so a remote or missing reference is refused then,
not met by every call. A schema that still cannot be evaluated (references that only lead to
each other, say) fails the value checked against it as invalid, saying so, never with the
validator's own exception.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar

import jsonschema
import referencing
import referencing.jsonschema
from jsonschema.exceptions import SchemaError
from jsonschema_specifications import REGISTRY as DIALECTS  # type: ignore[import-untyped]
from pydantic import RootModel, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError
from referencing.exceptions import Unresolvable

from ..errors import DefinitionError
from ._bounds import bound_type

__all__ = ["check_against", "output_validator", "schema_model"]

#: where a reference may lead: within the schema, or a dialect's meta-schema; nothing is fetched
_NOTHING_FETCHED: referencing.jsonschema.SchemaRegistry = referencing.Registry()

_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")


def _validator(schema: dict[str, Any], what: str) -> Any:
    if not isinstance(schema, dict):
        raise DefinitionError(f"{what}: a JSON Schema must be an object, not {type(schema).__name__}")
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
        _check_references(schema, what)
    except SchemaError as exc:
        raise DefinitionError(f"{what}: not a valid JSON Schema: {exc.message}") from None
    except RecursionError:
        raise DefinitionError(f"{what}: nested too deeply to be checked") from None
    return cls(schema, registry=_NOTHING_FETCHED)


def _check_references(schema: dict[str, Any], what: str) -> None:
    """Refuse a schema with a reference that does not resolve without fetching anything (its
    dialect read as ``jsonschema`` reads it: its ``$schema``, 2020-12 by default)."""
    root, resolver = _root(schema)
    for keyword, ref, at in _references(root, resolver):
        try:
            at.lookup(ref)
        except Unresolvable:
            raise DefinitionError(
                f"{what}: the {keyword} {ref!r} cannot be resolved: a reference must lead within the schema "
                "(remote references are never fetched)"
            ) from None


def _root(schema: dict[str, Any]) -> tuple[referencing.jsonschema.SchemaResource, Any]:
    """The schema as a resource (its dialect read as ``jsonschema`` reads it: its ``$schema``,
    2020-12 by default) and a resolver that fetches nothing."""
    dialect = schema.get("$schema")
    specification = referencing.jsonschema.specification_with(
        dialect if isinstance(dialect, str) else "", default=referencing.jsonschema.DRAFT202012
    )
    root = specification.create_resource(schema)
    return root, DIALECTS.combine(_NOTHING_FETCHED).resolver_with_root(root)


def _references(resource: referencing.jsonschema.SchemaResource, resolver: Any) -> Iterator[tuple[str, str, Any]]:
    """Every reference in the schema ``resource`` and its subschemas, with the resolver of its
    place (a subschema's ``$id`` changes what a relative reference means)."""
    resolver = resolver.in_subresource(resource)
    if isinstance(resource.contents, dict):
        for keyword in _REF_KEYWORDS:
            ref = resource.contents.get(keyword)
            if isinstance(ref, str):
                yield keyword, ref, resolver
    for subresource in resource.subresources():
        yield from _references(subresource, resolver)


def check_against(validator: Any, value: Any, title: str) -> None:
    """Raise a pydantic ``ValidationError`` listing every way ``value`` fails ``validator`` (or
    saying that its schema cannot be evaluated: no value passes it then)."""
    try:
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    except Exception as exc:  # the validator failed on a foreign schema (a RecursionError, say)
        problem = f"the schema cannot be evaluated ({type(exc).__name__}: {str(exc)[:200]})"
        raise ValidationError.from_exception_data(
            title,
            [InitErrorDetails(type=PydanticCustomError("json_schema", "{message}", {"message": problem}), input=value)],
        ) from None
    if not errors:
        return
    raise ValidationError.from_exception_data(
        title,
        [
            InitErrorDetails(
                type=PydanticCustomError("json_schema", "{message}", {"message": error.message}),
                loc=tuple(error.absolute_path),
                input=error.instance,
            )
            for error in errors
        ],
    )


def schema_model(schema: dict[str, Any], *, title: str, what: str | None = None) -> type[RootModel[dict[str, Any]]]:
    """A pydantic model of JSON objects valid for ``schema`` (see the module docstring).

    Raises ``DefinitionError``, saying ``what`` the schema is (default: ``title``), when
    ``schema`` is not a valid JSON Schema or has a reference that cannot be resolved.
    """
    validator = _validator(schema, what or title)
    exact = dict(schema)

    class SchemaInput(RootModel[dict[str, Any]]):
        #: the object's properties and their types, as grant bounds read them (``_grants``)
        bound_fields: ClassVar[dict[str, Any]] = _property_types(schema)

        @model_validator(mode="after")
        def _check(self) -> SchemaInput:
            check_against(validator, self.root, title)
            return self

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return dict(exact)

        if not TYPE_CHECKING:

            def __getattr__(self, name: str) -> Any:
                # the object's properties read as attributes (``t.amount``), as a tool input
                # model's fields do: what approval rules and grant bounds read
                root = self.__dict__.get("root")
                if isinstance(root, dict) and name in root and not name.startswith("_"):
                    return root[name]
                return super().__getattr__(name)

    SchemaInput.__name__ = SchemaInput.__qualname__ = title
    return SchemaInput


def _property_types(schema: dict[str, Any]) -> dict[str, Any]:
    """Each top-level property of an object schema with the type grant bounds read its values
    as (``_bounds``): its one simple JSON type — found through the local ``$ref``s that lead
    to it — or ``Any``."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return {}
    _, resolver = _root(schema)
    found: dict[str, Any] = {}
    for name, spec in properties.items():
        kind = _type_of(spec, resolver)
        found[name] = bound_type(kind) if isinstance(kind, str) else Any
    return found


def _type_of(spec: Any, resolver: Any) -> Any:
    """The ``type`` a property's schema names, itself or through the references it leads by
    (None: it names none, or a reference that cannot be followed)."""
    for _ in range(_MOST_REFERENCES):
        if not isinstance(spec, dict):
            return None
        ref = spec.get("$ref")
        if "type" in spec or not isinstance(ref, str):
            return spec.get("type")
        try:
            resolved = resolver.lookup(ref)
        except Unresolvable:
            return None
        spec, resolver = resolved.contents, resolved.resolver
    return None


#: how many references in a row a property's type is looked for through
_MOST_REFERENCES = 32


def output_validator(schema: dict[str, Any], what: str) -> Any:
    """A ``jsonschema`` validator for ``schema`` (``DefinitionError`` if it is not one, or has
    a reference that cannot be resolved; ``what`` names it in the error)."""
    return _validator(schema, what)
