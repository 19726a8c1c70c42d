"""Grants: a person's approval of more than the one call in front of them, checked and applied.

Answering a pause, a person may approve later calls too: of this tool, in this session, within
argument bounds, a number of times, for a while (``Grant``). The grant is recorded with the
answer (``GrantAdded``, in the session's log: durable, audited, revocable), and a later call it
covers is approved by it — recorded as such (``CallDecided(grant=...)``) before the call runs.

Bounds name input fields of the tool, each with conditions::

    {"amount": {"max": 100}, "to_account": {"one_of": ["savings", "checking"]}}

``equals``, ``one_of``, ``min`` and ``max``; values are read with the field's own type (a
``Decimal`` amount compares as a number, ``"100"`` and ``100`` alike). A grant is checked when
it is given (unknown fields, values the field cannot take, conditions that cannot compare:
``InvalidGrant``), so a grant that is recorded can always be applied.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from ..errors import InvalidGrant

__all__ = ["CONDITIONS", "check_bounds", "within"]

CONDITIONS = ("equals", "one_of", "min", "max")


def check_bounds(model: type[BaseModel], bounds: Any, tool: str) -> dict[str, dict[str, Any]] | None:
    """``bounds`` as recorded, or ``InvalidGrant`` naming what cannot be applied to ``model``."""
    if bounds is None:
        return None
    if not isinstance(bounds, Mapping):
        raise InvalidGrant(f"a grant's bounds map input fields to conditions, not {type(bounds).__name__}", tool=tool)
    checked: dict[str, dict[str, Any]] = {}
    for name, conditions in bounds.items():
        if name not in _fields(model):
            fields = ", ".join(_fields(model)) or "none"
            raise InvalidGrant(
                f"a grant bounds {name!r}, which is not an input field of {tool!r} ({fields})", tool=tool
            )
        if not isinstance(conditions, Mapping) or not conditions:
            raise InvalidGrant(f"the bounds of {name!r} must be conditions like {{'max': 100}}", tool=tool, field=name)
        for op, value in conditions.items():
            if op not in CONDITIONS:
                raise InvalidGrant(
                    f"unknown condition {op!r} on {name!r}: use {', '.join(CONDITIONS)}", tool=tool, field=name
                )
            try:
                if op == "one_of":
                    if not isinstance(value, list | tuple) or not value:
                        raise InvalidGrant(f"'one_of' on {name!r} takes a list of values", tool=tool, field=name)
                    for item in value:
                        _read(model, name, item)
                else:
                    read = _read(model, name, value)
                    if op in ("min", "max"):
                        _ordered(model, name)
                        _ = read <= read  # raises TypeError when the field's values do not compare
                        if isinstance(read, str | bool):  # "max": "z" takes nearly every name
                            raise TypeError("text and booleans have no order to bound: use 'equals' or 'one_of'")
            except (ValidationError, TypeError) as exc:
                # a person's words: what is wrong, not pydantic's report (the model, the input, a URL)
                errors = exc.errors(include_url=False) if isinstance(exc, ValidationError) else None
                why = "; ".join(e["msg"] for e in errors) if errors else exc
                raise InvalidGrant(
                    f"the condition {op!r} on {name!r} cannot be applied: {why}", tool=tool, field=name
                ) from None
        if {"min", "max"} <= conditions.keys() and _read(model, name, conditions["min"]) > _read(
            model, name, conditions["max"]
        ):
            why = f"on {name!r}, 'min' is above 'max': the grant would approve nothing"
            raise InvalidGrant(why, tool=tool, field=name)
        checked[name] = dict(conditions)
    return checked


def within(model: type[BaseModel], bounds: Mapping[str, Mapping[str, Any]] | None, validated: BaseModel) -> bool:
    """Whether the validated input ``validated`` is within ``bounds`` (None: any input)."""
    if bounds is None:
        return True
    try:
        for name, conditions in bounds.items():
            value = getattr(validated, name)
            for op, limit in conditions.items():
                if op in ("min", "max"):
                    _ordered(model, name)  # a grant recorded before this check: it matches nothing
                if op == "equals" and value != _read(model, name, limit):
                    return False
                if op == "one_of" and value not in [_read(model, name, item) for item in limit]:
                    return False
                if op == "min" and not value >= _read(model, name, limit):
                    return False
                if op == "max" and not value <= _read(model, name, limit):
                    return False
    except (AttributeError, ValidationError, TypeError):  # a tool whose input changed since: no match
        return False
    return True


def _ordered(model: type[BaseModel], name: str) -> None:
    """Raise ``TypeError`` unless the field ``name`` has one type whose values ``min`` and ``max``
    compare: a field of any type (an MCP property whose schema names none) takes a boolean, a
    number or a string alike, and ``True <= 100`` holds."""
    if _fields(model)[name] is Any:
        raise TypeError("the field has no type to compare by: bound it with 'equals' or 'one_of'")


def _read(model: type[BaseModel], name: str, value: Any) -> Any:
    """``value`` read as the field ``name`` of ``model`` reads it."""
    return _adapter(model, name).validate_python(value)


@functools.lru_cache(maxsize=256)
def _adapter(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    annotation: Any = _fields(model)[name]
    return TypeAdapter(annotation)


def _fields(model: type[BaseModel]) -> dict[str, Any]:
    """The input fields a grant may bound, with their types: the model's fields — or, for an
    input that is one JSON value checked by its schema (an MCP tool's), the ``bound_fields``
    it declares."""
    declared: dict[str, Any] | None = getattr(model, "bound_fields", None)
    if declared is not None:
        return declared
    return {name: field.annotation for name, field in model.model_fields.items()}
