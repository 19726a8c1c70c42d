"""A tool input described by a raw JSON Schema, checked by a real JSON-Schema validator.

A pausepoint tool's input is a pydantic model: the runtime validates arguments with it, dumps
it as the paused input, shows it to people, and fingerprints its JSON schema. An MCP tool has
only a JSON Schema. ``schema_model`` builds a pydantic model that *is* that schema: its
``model_json_schema()`` is the server's schema exactly as sent (so the fingerprint covers it),
and its validation runs ``jsonschema`` — every problem reported as a pydantic error with the
path of its field, the shape the runtime, the REST API and the console already understand.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import jsonschema
from jsonschema.exceptions import SchemaError
from pydantic import RootModel, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from ..errors import DefinitionError

__all__ = ["check_against", "schema_model"]


def _validator(schema: dict[str, Any], what: str) -> Any:
    if not isinstance(schema, dict):
        raise DefinitionError(f"{what}: a JSON Schema must be an object, not {type(schema).__name__}")
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise DefinitionError(f"{what}: not a valid JSON Schema: {exc.message}") from None
    return cls(schema)


def check_against(validator: Any, value: Any, title: str) -> None:
    """Raise a pydantic ``ValidationError`` listing every way ``value`` fails ``validator``."""
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
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


def schema_model(schema: dict[str, Any], *, title: str) -> type[RootModel[dict[str, Any]]]:
    """A pydantic model of JSON objects valid for ``schema`` (see the module docstring).

    Raises ``DefinitionError`` when ``schema`` is not a valid JSON Schema.
    """
    validator = _validator(schema, title)
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


_SIMPLE: dict[str, Any] = {"integer": int, "number": float, "string": str, "boolean": bool}


def _property_types(schema: dict[str, Any]) -> dict[str, Any]:
    """Each top-level property of an object schema with the Python type its values read as
    (``Any`` for anything but one simple JSON type)."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return {}
    found: dict[str, Any] = {}
    for name, spec in properties.items():
        kind = spec.get("type") if isinstance(spec, dict) else None
        found[name] = _SIMPLE.get(kind, Any) if isinstance(kind, str) else Any
    return found


def output_validator(schema: dict[str, Any], title: str) -> Any:
    """A ``jsonschema`` validator for ``schema`` (``DefinitionError`` if it is not one)."""
    return _validator(schema, title)
