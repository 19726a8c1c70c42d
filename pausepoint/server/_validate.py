"""The ``validate`` route: check a candidate answer without giving it.

The console's forms post what a person typed — a replacement input (``{"input": ...}``) or a
result (``{"output": ...}``) — and get back every problem with the JSON path of its field. The
check is the one a real answer goes through (data a session can keep — depth, number range,
NaN/Infinity, unpaired surrogates — then the tool's own pydantic model and output type), so
what passes here is accepted by ``restart``/``respond``, Python regex patterns included.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from .._rest import ValidateBody
from ..content._jsondata import NotJsonData, json_data
from ..errors import InvalidRequest, NotFound
from ._limits import read_json
from ._replies import json_response
from ._routes import Operation, schema_ref
from ._service import service_of

__all__ = ["VALIDATE", "field_errors", "validate"]

# Messages a person can act on, for the error types whose pydantic wording names internals.
_MESSAGES = {
    "missing": "This field is required.",
    "extra_forbidden": "This field is not expected here.",
    "string_pattern_mismatch": "This does not have the expected format.",
    # pydantic names the model it wanted (one the tool's parameters made, which nobody wrote)
    "model_type": "This should be a JSON object.",
    "model_attributes_type": "This should be a JSON object.",
    "dict_type": "This should be a JSON object.",
}


def field_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """Each problem of ``exc``: its ``path`` (keys and indexes), a JSON ``pointer``, a ``message``
    and pydantic's error ``type``."""
    found = []
    for error in exc.errors(include_url=False):
        path = [part if isinstance(part, int) else str(part) for part in error["loc"]]
        message = _MESSAGES.get(error["type"], str(error["msg"]).rstrip(".") + ".")
        found.append(_problem(path, message, error["type"]))
    return found


def _problem(path: list[str | int], message: str, kind: str) -> dict[str, Any]:
    pointer = "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)
    return {"path": path, "pointer": pointer, "message": message, "type": kind}


VALIDATE = Operation(
    "Check a candidate replacement input or result against the tool's schema, without answering "
    "anything: every problem with the JSON path of its field",
    schema_ref("Validation"),
    body=ValidateBody,
)


async def validate(request: Request) -> Response:
    service = service_of(request)
    await service.principal(request)  # first: without a token every route answers 401 alike
    agent = service.agent(request.path_params["agent"])
    name = request.path_params["tool"]
    tool = agent.tools.get(name)
    if tool is None:
        raise NotFound(f"agent {agent.name!r} has no tool {name!r}", tool=name)
    body = VALIDATE.parse(await read_json(request, service.limits))
    given = body.model_fields_set & {"input", "output"}
    if len(given) != 1:
        raise InvalidRequest("send exactly one of 'input' (a replacement input) or 'output' (a result)")
    try:  # first what any answer must be: data a session can keep (its rule is the error's type)
        json_data(body.input if "input" in given else body.output, agent.json_limits)
    except NotJsonData as exc:
        return json_response({"valid": False, "errors": [_problem(exc.segments, exc.problem, exc.rule)]})
    try:
        if "input" in given:
            value = tool.input_json(tool.validate_input(body.input))
        else:
            value = tool.validate_output(body.output)
    except ValidationError as exc:
        return json_response({"valid": False, "errors": field_errors(exc)})
    except (TypeError, ValueError) as exc:  # a value the output type cannot serialise
        problem = {"path": [], "pointer": "", "message": str(exc), "type": "value_error"}
        return json_response({"valid": False, "errors": [problem]})
    return json_response({"valid": True, "errors": [], "value": value})
