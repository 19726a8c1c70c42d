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

import json
import re
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

from ..content._jsondata import json_kind
from ..errors import DefinitionError
from ._bounds import bound_type

__all__ = ["answer_validator", "check_against", "output_validator", "schema_model"]

#: where a reference may lead: within the schema, or a dialect's meta-schema; nothing is fetched
_NOTHING_FETCHED: referencing.jsonschema.SchemaRegistry = referencing.Registry()

_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")


def _validator(schema: dict[str, Any], what: str, *, formats: bool) -> Any:
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
    return cls(schema, registry=_NOTHING_FETCHED, format_checker=cls.FORMAT_CHECKER if formats else None)


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
                type=PydanticCustomError("json_schema", "{message}", {"message": message}),
                loc=tuple(error.absolute_path) + at,
                input=error.instance,
            )
            for error in errors
            for at, message in _in_json_words(error)
        ],
    )


_TYPES = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
          "object": "a JSON object", "array": "a JSON array", "null": "null"}  # fmt: skip
_SIZES = {"minLength": ("at least", "characters"), "maxLength": ("at most", "characters"),
          "minItems": ("at least", "items"), "maxItems": ("at most", "items"),
          "minProperties": ("at least", "fields"), "maxProperties": ("at most", "fields")}  # fmt: skip
_BOUNDS = {"minimum": "at least", "maximum": "at most", "exclusiveMinimum": "greater than",
           "exclusiveMaximum": "less than", "multipleOf": "a multiple of"}  # fmt: skip


def _in_json_words(error: jsonschema.ValidationError) -> list[tuple[tuple[str, ...], str]]:
    """What ``error`` says, in JSON's words as pydantic's own messages put them (jsonschema's
    quote values as Python writes them: ``True``, ``None``, ``'x'``), each with where it is
    below the error's path (the field missing or not expected)."""
    wanted: Any = error.validator_value
    given: Any = error.instance
    schema: Any = error.schema
    match error.validator:
        case "type":
            kinds = [str(k) for k in (wanted if isinstance(wanted, list) else [wanted])]
            return [((), f"Input should be {' or '.join(_TYPES.get(k, k) for k in kinds)}, not {json_kind(given)}")]
        case "enum" if isinstance(wanted, list):
            return [((), f"Input should be one of {', '.join(_json(v) for v in wanted)}, not {_json(given)}")]
        case "const":
            return [((), f"Input should be {_json(wanted)}, not {_json(given)}")]
        case "required" if isinstance(given, dict) and isinstance(wanted, list):  # one error per field missing
            said = [name for name in wanted if error.message == f"{name!r} is a required property"]
            return [((name,), "Field required") for name in said[:1]] or [((), error.message)]
        case "additionalProperties" if wanted is False and isinstance(given, dict) and isinstance(schema, dict):
            known, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
            extra = [k for k in given if k not in known and not any(re.search(p, k) for p in patterns)]
            return [((name,), "Extra inputs are not permitted") for name in extra] or [((), error.message)]
        case "pattern":
            return [((), f"Input should match the pattern {_json(wanted)}")]
        case keyword if keyword in _SIZES:
            bound, unit = _SIZES[keyword]
            return [((), f"Input should have {bound} {wanted} {unit if wanted != 1 else unit[:-1]}")]
        case keyword if keyword in _BOUNDS:
            return [((), f"Input should be {_BOUNDS[keyword]} {_json(wanted)}")]
    return [((), error.message)]


def _json(value: Any) -> str:
    """``value`` as JSON writes it (shortened past 80 characters)."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def schema_model(schema: dict[str, Any], *, title: str, what: str | None = None) -> type[RootModel[dict[str, Any]]]:
    """A pydantic model of JSON objects valid for ``schema`` (see the module docstring).

    Raises ``DefinitionError``, saying ``what`` the schema is (default: ``title``), when
    ``schema`` is not a valid JSON Schema or has a reference that cannot be resolved.
    """
    validator = _validator(schema, what or title, formats=True)
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
    a reference that cannot be resolved; ``what`` names it in the error): for what a server
    sends, its ``format`` annotations taken as annotations (the server's own words)."""
    return _validator(schema, what, formats=False)


def answer_validator(schema: dict[str, Any], what: str) -> Any:
    """``output_validator``, for what is sent to a server (an answer to its question): a
    string's ``format`` is checked too (``date``, ``date-time``, ``email``, ``uri``, ``uuid``,
    ...), as the server checks it — an answer it would refuse is refused here, its pause open."""
    return _validator(schema, what, formats=True)
