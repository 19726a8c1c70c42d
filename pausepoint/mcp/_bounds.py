"""What a grant's bounds on an MCP tool's properties are read as: the property's JSON type.

A grant bounds the tool's input fields (``approval._grants``), reading every bound the way the
field reads its values. An MCP tool's fields are the top-level properties of its JSON Schema
(``_schema``), so a bound is read by JSON Schema's own type rules, strictly: a bound on a
``number`` or ``integer`` property is a JSON number of that type (not ``"10"``, not ``true``),
on a ``string`` one a string, on a ``boolean`` one ``true`` or ``false`` (not ``1``) — anything
else is ``InvalidGrant`` when the grant is given. A boolean has no order: a ``min`` or ``max``
on one is refused too (``Truth``).
"""

from __future__ import annotations

from typing import Annotated, Any

from jsonschema import Draft202012Validator
from pydantic import PlainValidator
from pydantic_core import PydanticCustomError

__all__ = ["Truth", "bound_type"]

#: the JSON types a bound is read as; a property of any other type compares as given (``Any``)
JSON_TYPES = ("integer", "number", "string", "boolean")

_CHECKER = Draft202012Validator.TYPE_CHECKER


class Truth:
    """A boolean bound: equal to the same JSON boolean only (``1`` is not ``true``), and with no
    order — comparing it raises the ``TypeError`` a grant's check turns into ``InvalidGrant``."""

    __slots__ = ("value",)

    def __init__(self, value: bool) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Truth):
            other = other.value
        return isinstance(other, bool) and other is self.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return "true" if self.value else "false"

    def _unordered(self, other: object) -> bool:
        raise TypeError("a boolean has no order: bound it with 'equals' or 'one_of'")

    __lt__ = __le__ = __gt__ = __ge__ = _unordered


def bound_type(kind: str) -> Any:
    """The type a bound on a property of the JSON type ``kind`` is read as (``Any``: a type
    bounds do not read by)."""
    if kind not in JSON_TYPES:
        return Any

    def read(value: Any) -> Any:
        if not _CHECKER.is_type(value, kind):
            raise PydanticCustomError(
                "json_type",
                "the property is a JSON {kind}, and {value} is not one",
                {"kind": kind, "value": repr(value)},
            )
        return Truth(value) if kind == "boolean" else value

    return Annotated[Any, PlainValidator(read)]
