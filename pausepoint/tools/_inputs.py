"""Reading a tool's input (and an answer's output) with pydantic: one way, wherever it is read.

The model is shown the input schema, which names each field by its alias
(``from_: str = Field(alias="from")`` is ``from``), so the model sends ``{"from": ...}``. A
pause keeps the validated input as JSON, and an approval, a restart, a view and ``validate``
read that JSON again: it is written by alias (``input_json``), as the model sent it and the
schema and the console's forms name it, and read by alias *and* by field name
(``validated_model``), so an input written by field name (a pause recorded before inputs were
written by alias) is read as the same input. Written by field name and read by alias alone,
every approved call failed as "invalid input", its approval lost.

A validator of the tool's own that raises something pydantic does not turn into a
``ValidationError`` — ``v.strip()`` on a ``None``, a lookup's ``KeyError`` — is a
``ValidationError`` here too (type ``validator_failed``, naming the exception): the input
cannot be read, which every reader handles as invalid input (the model is told, ``validate``
says so, a view falls back to the raw input) — where the raw exception crashed the turn,
left its call running in the store and made a REST 500.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from ..content._jsondata import printable

__all__ = ["input_json", "validated_model", "validated_value", "VALIDATOR_FAILED"]

log = logging.getLogger("pausepoint")

#: The error type of a validator that raised what pydantic does not report (``validator_failed``).
VALIDATOR_FAILED = "validator_failed"


def validated_model(model: type[BaseModel], raw: Any, tool_name: str) -> BaseModel:
    """``raw`` read as ``model`` — its fields by alias or by name; raises ``ValidationError``
    only (a validator's other exceptions become one: see the module docstring)."""
    try:
        return model.model_validate(raw, by_alias=True, by_name=True)
    except ValidationError:
        raise
    except Exception as exc:
        raise _failed(exc, raw, model.__name__, tool_name) from exc


def validated_value(adapter: TypeAdapter[Any], raw: Any, tool_name: str, title: str) -> Any:
    """``raw`` read by ``adapter`` (a tool's output type); raises ``ValidationError`` only."""
    try:
        return adapter.validate_python(raw)
    except ValidationError:
        raise
    except Exception as exc:
        raise _failed(exc, raw, title, tool_name) from exc


def input_json(validated: BaseModel) -> Any:
    """The JSON a pause keeps of a validated input: by alias, as the input schema names each
    field (and the model sent it), read back by ``validated_model`` as the same input."""
    return validated.model_dump(mode="json", by_alias=True)


def _failed(exc: Exception, raw: Any, title: str, tool_name: str) -> ValidationError:
    """A ``ValidationError`` for a validator that raised ``exc``; logged with its traceback,
    as the tool's author has a bug to fix that the model's error result only names."""
    log.warning(
        "a validator of tool %r raised %s: the value counts as invalid", tool_name, type(exc).__name__, exc_info=exc
    )
    said = printable(f"{type(exc).__name__}: {exc}", 2048)
    error = PydanticCustomError(VALIDATOR_FAILED, "a validator raised {error}", {"error": said})
    return ValidationError.from_exception_data(title, [InitErrorDetails(type=error, loc=(), input=raw)])
