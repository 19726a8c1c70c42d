"""Tools: how a Python function becomes something a model can call, and how it pauses.

``Interrupt`` is the signal a tool raises to pause its call. It is deliberately not a
``PausepointError``: pausing is not a failure, and the runtime never wraps it.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import json
import threading
import types
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from typing import Any, TypeAlias, get_type_hints

from pydantic import BaseModel, ConfigDict, PydanticUserError, TypeAdapter, ValidationError, create_model
from pydantic_core import to_jsonable_python

from ..content._jsondata import json_data
from ..errors import DefinitionError
from ..models._model import ToolDefinition
from ..models._portable import TOOL_NAME, TOOL_NAME_RULE
from ..session._durations import SAID, duration
from ..session._grants import Grant
from ._display import PauseDisplay, PauseView, check_display, render
from ._inputs import input_json, validated_model, validated_value

__all__ = [
    "Check",
    "Interrupt",
    "Tool",
    "ToolRunContext",
    "call_check",
    "fingerprint_of",
    "is_async_callable",
    "jsonable",
    "refresh_definitions",
]

#: A predicate of a call: ``(input)`` or ``(input, ctx)``, sync or async, ``input`` validated.
Check: TypeAlias = Callable[..., "bool | Awaitable[bool]"]


class Interrupt(Exception):
    """Raised inside a tool to pause its call until someone answers it.

    ``metadata`` is shown to whoever answers (why the pause, what to check): a dict, or a
    pydantic model or dataclass, taken in its JSON form, which must be an object. ``ttl`` bounds
    how long the pause may wait; past it the agent's expiry policy resolves the call.
    """

    def __init__(self, metadata: Any = None, *, ttl: timedelta | float | None = None) -> None:
        if metadata is not None and not isinstance(metadata, dict):
            shown = type(metadata).__name__
            try:
                metadata = to_jsonable_python(metadata)
            except (TypeError, ValueError):  # PydanticSerializationError is a ValueError
                raise TypeError(f"Interrupt metadata must be a dict, a model or a dataclass, not {shown}") from None
            if not isinstance(metadata, dict):
                raise TypeError(f"Interrupt metadata must be a JSON object; a {shown} is not one")
        super().__init__("tool call paused")
        self.metadata: dict[str, Any] | None = metadata
        self.ttl = None if ttl is None else duration(ttl, seconds=True)
        if ttl is not None and self.ttl is None:
            raise DefinitionError(f"Interrupt ttl must be {SAID}, or that many seconds; not {ttl!r}")


def is_async_callable(fn: object) -> bool:
    """Whether calling ``fn`` gives a coroutine: an ``async def`` (through ``functools.partial``
    too), or an object whose class's ``__call__`` is one."""
    if inspect.iscoroutinefunction(fn):
        return True
    call = None if inspect.isroutine(fn) else inspect.getattr_static(type(fn), "__call__", None)
    return inspect.iscoroutinefunction(call)


class Resumed(Enum):
    """Whether a call runs again after a pause, as a truth value (``if ctx.is_resumed:``) and, as
    Genkit's ``ToolRunContext.is_resumed()`` is a method, when called (``if ctx.is_resumed():``):
    code ported from Genkit then pauses as it did there, instead of failing inside the tool. In a
    tool's result it is JSON's ``true`` or ``false`` (an enum's value)."""

    NO = False
    YES = True

    def __bool__(self) -> bool:
        return bool(self.value)

    def __call__(self) -> bool:
        return bool(self.value)

    def __eq__(self, other: object) -> bool:
        return bool(self.value) == (bool(other) if isinstance(other, Resumed) else other)

    def __hash__(self) -> int:
        return hash(bool(self.value))

    def __repr__(self) -> str:
        return repr(bool(self.value))

    def __str__(self) -> str:  # as a bool formats, in an f-string or a tool's text
        return str(bool(self.value))

    def __format__(self, spec: str) -> str:
        return format(bool(self.value), spec)


@dataclass(slots=True)
class ToolRunContext:
    """What a running tool may know about its call.

    ``resumed_metadata`` is None on a first run and a dict (``{}`` if none was given) when the
    call was restarted after a pause; ``original_input`` holds the input the model asked for
    when a restart replaced it (this one, or an earlier restart of the call that paused again),
    as the model gave it (JSON data, not the tool's input model).
    """

    session_id: str
    ref: str
    principal: str | None = None
    resumed_metadata: dict[str, Any] | None = None
    original_input: Any = None
    _progress: Callable[[Any], None] | None = field(default=None, repr=False)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)
    _loop_thread: int | None = field(default=None, repr=False)

    @property
    def is_resumed(self) -> Resumed:
        """True when the call was restarted after a pause; also callable, as Genkit's method is."""
        return Resumed(self.resumed_metadata is not None)

    def send_progress(self, data: Any) -> None:
        """Stream a progress update to whoever follows this turn (a no-op when nobody streams).

        Raises ``ValueError`` when ``data`` is not JSON data (see ``JsonLimits``), whether or
        not anybody streams.
        """
        payload = json_data(data)
        if self._progress is None:
            return
        if self._loop is not None and threading.get_ident() != self._loop_thread:
            self._loop.call_soon_threadsafe(self._progress, payload)
        else:
            self._progress(payload)


def jsonable(value: Any) -> Any:
    """Plain JSON data for ``value`` (pydantic models, dataclasses, decimals... included)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return to_jsonable_python(value)


def fingerprint_of(name: str, input_schema: dict[str, Any], output_schema: dict[str, Any] | None) -> str:
    """A short hash of what a paused call's answer depends on: name and both schemas."""
    canonical = json.dumps([name, input_schema, output_schema], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class Tool:
    """A tool an agent's model may call (the runtime calls it; the function it wraps is ``fn``).
    Build one with ``Pausepoint.tool()`` or ``Pausepoint.define_interrupt()``.

    ``requires_approval`` (True, or a predicate of the validated input — or of the input and
    the ``ToolRunContext`` — sync or async) makes the runtime pause each call *before* the tool
    runs, showing its exact arguments; approving the pause runs the tool with exactly those
    arguments (see ``ApprovalPolicy`` for who approves, and what approves without a person). A
    predicate that raises counts as True. ``approves`` (interrupt-only tools) maps the
    interrupt's validated input to the ``Grant`` a yes to it gives: the call it asked about.
    """

    #: whether a pause of it may be answered once it changed (``allow_changed_tools``): the
    #: call then runs on the new definition. An MCP server's tool sends no call while it differs.
    runs_changed = True

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        allow_input_edits: bool = False,
        idempotent: bool = False,
        pauses_only: bool = False,
        input_model: type[BaseModel] | None = None,
        output_schema: type[Any] | None = None,
        display: PauseDisplay | None = None,
        requires_approval: bool | Check = False,
        approves: Callable[[Any], Grant | None] | None = None,
    ) -> None:
        if not callable(fn):
            raise DefinitionError(f"a tool wraps a function, not {fn!r}")
        if (_callable_object(fn) or isinstance(fn, functools.partial)) and not name:
            raise DefinitionError(f"tool {fn!r}: a callable object or a partial has no name of its own: give it name=")
        if _callable_object(fn):
            fn = types.MethodType(type(fn).__call__, fn)  # a callable object: what it calls is its __call__
        if inspect.isasyncgenfunction(_unwrapped(fn)):
            raise DefinitionError(
                f"tool {name or fn.__name__!r} is an async generator: a tool returns one result "
                "(report progress on the way with ctx.send_progress)"
            )
        self.fn = fn
        self.name = fn.__name__ if name is None else name  # (an empty name= is refused, not replaced)
        if not isinstance(self.name, str) or not TOOL_NAME.fullmatch(self.name):
            raise DefinitionError(
                f"tool name {self.name!r} is not one every provider takes: {TOOL_NAME_RULE} "
                "(OpenAI, Anthropic and Gemini each refuse some others; name= names a tool)"
            )
        self.description = description if description is not None else inspect.cleandoc(_unwrapped(fn).__doc__ or "")
        self.allow_input_edits = allow_input_edits
        # Safe to run again if a crash left it unclear whether it ran (see Turn.run_model).
        self.idempotent = idempotent
        # Defined with define_interrupt: it never does work itself, only asks.
        self.pauses_only = pauses_only
        if input_model is not None:
            self.input_model, self._unpack, self._ctx_param = input_model, False, None
        else:
            self.input_model, self._unpack, self._ctx_param = _input_model(fn, self.name)
        if output_schema is None and input_model is None:
            output_schema = _return_type(fn)
        try:
            self.output_adapter: TypeAdapter[Any] | None = None if output_schema is None else TypeAdapter(output_schema)
            self.input_schema = self.input_model.model_json_schema()
            self.output_schema = None if self.output_adapter is None else self.output_adapter.json_schema()
        except PydanticUserError as exc:  # a type pydantic cannot describe (a typing.TypedDict, say)
            raise DefinitionError(f"tool {self.name!r}: cannot describe its input or output: {exc}") from None
        self.definition = ToolDefinition(self.name, self.description, self.input_schema, self.output_schema)
        self.fingerprint = fingerprint_of(self.name, self.input_schema, self.output_schema)
        if display is not None:
            if not isinstance(display, PauseDisplay):
                raise DefinitionError(f"tool {self.name!r}: display must be a PauseDisplay, not {display!r}")
            check_display(display, self.input_model, self.name)
        #: how this tool's pauses read to a person (None: defaults from the input schema)
        self.display = display
        if not (isinstance(requires_approval, bool) or callable(requires_approval)):
            raise DefinitionError(
                f"tool {self.name!r}: requires_approval is True/False or a predicate of the input, "
                f"not {requires_approval!r}"
            )
        if requires_approval is not False and pauses_only:
            raise DefinitionError(f"tool {self.name!r} only asks (define_interrupt): it cannot require approval")
        #: pause each call for approval before it runs (True, or a predicate of the call)
        self.requires_approval: bool | Check = requires_approval
        if approves is not None and (not callable(approves) or not pauses_only):
            raise DefinitionError(f"tool {self.name!r}: approves= is a function of an interrupt's input")
        #: for an interrupt: the grant a yes to it gives (the call it asked about)
        self.approves = approves
        self._is_async = is_async_callable(fn)

    def __repr__(self) -> str:
        return f"<Tool {self.name}>"

    def view(self, raw_input: Any, *, on_expiry: str | None = None) -> PauseView:
        """How a pause of this tool on ``raw_input`` reads to a person (never raises)."""
        return render(self.display, self.input_model, self.name, raw_input, on_expiry=on_expiry)

    def validate_input(self, raw: Any) -> BaseModel:
        """The validated input model, its fields read by alias or by name; raises
        ``pydantic.ValidationError`` only — a validator's other exceptions too (see ``_inputs``)."""
        if isinstance(raw, self.input_model):
            return raw
        return validated_model(self.input_model, raw, self.name)

    def input_json(self, validated: BaseModel) -> Any:
        """The JSON a pause keeps (and shows, and an approval runs) of a validated input: by
        alias, as the input schema names its fields; ``validate_input`` reads it back."""
        return input_json(validated)

    def asks(self, pause_metadata: dict[str, Any] | None) -> bool:
        """Whether a pause of this tool with ``pause_metadata`` is a question the call asked mid-way,
        which only an answer or a denial answers (``answer_restart`` hands it back): an approval,
        an edit or a grant has nothing to approve there. False, for every pause of an ordinary tool."""
        return False

    def answer_restart(self, pause_metadata: dict[str, Any] | None, answer: Any) -> dict[str, Any] | None:
        """How an answer reaches a call that asked a question mid-way (an MCP elicitation).

        None, for every pause of an ordinary tool: a response is the call's result and a
        restart runs the call as it says. A tool whose pause hands its answer back to the call
        returns the ``resumed_metadata`` of the restart that does so (the answer is recorded as
        that restart); ``answer`` is the ``ToolResponse`` or ``ToolRestart`` given. Raises
        ``ValueError`` (a pydantic ``ValidationError`` is one) for an answer the question does
        not accept: the resume is refused with ``InvalidAnswer``.
        """
        return None

    async def refresh_definition(self) -> None:
        """Before a pause of this tool is answered: take in what its source says of its
        definition now, so that an answer to a pause taken on an older one is refused
        (``ToolDefinitionChanged``, by the fingerprint). Nothing, for a tool defined in code; an
        MCP tool compares the server's listing again when the server said it changed."""

    def validate_output(self, raw: Any) -> Any:
        """JSON data for an answer given in place of running the tool; raises ``ValidationError``
        only — a validator's other exceptions too (see ``_inputs``)."""
        if self.output_adapter is None:
            return jsonable(raw)
        return jsonable(validated_value(self.output_adapter, raw, self.name, f"{self.name} output"))

    async def run(self, validated: BaseModel, ctx: ToolRunContext) -> Any:
        """Run the function; returns what it returned (the caller makes it JSON data: see
        ``_jsondata.json_data``). ``Interrupt`` and the function's errors propagate."""
        kwargs: dict[str, Any] = (
            {name: getattr(validated, name) for name in type(validated).model_fields} if self._unpack else {}
        )
        args: tuple[Any, ...] = () if self._unpack else (validated,)
        if self._ctx_param:
            kwargs[self._ctx_param] = ctx
        if self._is_async:
            result = await self.fn(*args, **kwargs)
        else:
            result = await asyncio.to_thread(self.fn, *args, **kwargs)
        return result


def _callable_object(fn: object) -> bool:
    """Whether ``fn`` is an object called through its class's ``__call__`` (not a function,
    method or ``functools.partial``)."""
    return not inspect.isroutine(fn) and not isinstance(fn, functools.partial)


def _unwrapped(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The function a ``functools.partial`` calls (its hints and docstring are the tool's)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return get_type_hints(_unwrapped(fn), include_extras=True)
    except Exception as exc:  # unresolvable forward references, mostly
        raise DefinitionError(f"cannot read the type hints of tool {fn!r}: {exc}") from exc


def _return_type(fn: Callable[..., Any]) -> type[Any] | None:
    annotation = _hints(fn).get("return", inspect.Signature.empty)
    if annotation in (inspect.Signature.empty, Any, None, type(None)):
        return None
    return annotation  # type: ignore[no-any-return]


# A model built of plain parameters writes its JSON by alias, as its schema names the fields.
_BY_ALIAS = ConfigDict(serialize_by_alias=True)


def _input_model(fn: Callable[..., Any], tool_name: str) -> tuple[type[BaseModel], bool, str | None]:
    """(input model, whether to unpack it into keyword arguments, the context parameter's name)."""
    hints = _hints(fn)
    ctx_param: str | None = None
    fields: dict[str, Any] = {}
    by_position: list[str] = []  # positional-only (before /): what cannot be passed by name
    params = list(inspect.signature(fn).parameters.values())
    for param in params:
        annotation = hints.get(param.name, Any)
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise DefinitionError(f"tool {tool_name!r}: *args and **kwargs cannot describe a tool's input")
        if param.kind == param.POSITIONAL_ONLY:
            by_position.append(param.name)
        if annotation is ToolRunContext or annotation == ToolRunContext | None or _genkit_context(params, param, hints):
            ctx_param = param.name
            continue
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, default)
    if len(fields) == 1 and ctx_param not in by_position:
        ((annotation, default),) = fields.values()
        if inspect.isclass(annotation) and issubclass(annotation, BaseModel) and default is ...:
            return annotation, False, ctx_param  # the model is passed as it is, by position
    if by_position:
        raise DefinitionError(
            f"tool {tool_name!r}: {', '.join(map(repr, by_position))} is positional-only (before /): a tool's "
            "input fields and its context are passed by name"
        )
    for name in fields:  # each becomes a field of the model built here (a lone model is passed as it is)
        _check_field_name(name, tool_name)
    model_name = "".join(part.capitalize() for part in tool_name.replace("-", "_").split("_")) + "Input"
    try:  # by alias, as the schema names a field (a parameter typed Annotated[str, Field(alias="from")])
        return create_model(model_name, __config__=_BY_ALIAS, **fields), True, ctx_param
    except (TypeError, ValidationError, PydanticUserError) as exc:
        raise DefinitionError(f"tool {tool_name!r}: cannot build an input schema: {exc}") from exc


def _check_field_name(name: str, tool_name: str) -> None:
    """Raise ``DefinitionError`` for a parameter that cannot be an input field: pydantic keeps a
    name starting with ``_`` private — left out of the schema, so every call missed it
    (``TypeError``) — and a ``model_*`` name ``BaseModel`` defines (``model_config``,
    ``model_extra``) is refused by pydantic or read back as pydantic's own value."""
    if name.startswith("_"):
        plain = name.lstrip("_") or "value"
        raise DefinitionError(
            f"tool {tool_name!r}: parameter {name!r} starts with '_', which pydantic keeps out of an "
            f"input's fields, so the model could never send it: name it {plain!r} (or, to show the model "
            f"{name!r}, `{plain}_: Annotated[..., Field(alias={name!r})]`)"
        )
    if name.startswith("model_") and hasattr(BaseModel, name):
        raise DefinitionError(
            f"tool {tool_name!r}: parameter {name!r} is the name of pydantic's BaseModel.{name}, which "
            "an input field cannot take: give the parameter another name"
        )


# What Genkit's examples call a tool's context: a second parameter so named is never an input field.
_CONTEXT_NAMES = frozenset({"ctx", "context"})


def _genkit_context(params: list[inspect.Parameter], param: inspect.Parameter, hints: dict[str, Any]) -> bool:
    """Whether ``param`` is the context as Genkit passes it: the last parameter, unannotated,
    named ``ctx`` or ``context`` whatever comes before it (``(city: str, ctx)``, ``(input, ctx)``,
    ``(city: str, days: int, ctx)``: Genkit's parameter after the input is always the context), or
    any name after a pydantic model alone (``(input: Model, c)``)."""
    if len(params) < 2 or param is not params[-1] or param.name in hints:
        return False
    first = hints.get(params[0].name)
    return param.name in _CONTEXT_NAMES or (
        len(params) == 2 and inspect.isclass(first) and issubclass(first, BaseModel)
    )


async def call_check(check: Check, validated: Any, ctx: ToolRunContext) -> bool:
    """Run a predicate of a call (one or two parameters, sync or async)."""
    result = check(validated, ctx) if _arity(check) >= 2 else check(validated)
    if inspect.isawaitable(result):
        result = await result
    return bool(result)


def _arity(fn: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: give it both
        return 2
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return 2
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


async def refresh_definitions(tools: Mapping[str, Tool], names: Iterable[str]) -> None:
    """What the sources of the tools ``names`` say of them now (``Tool.refresh_definition``),
    before pauses of theirs are answered."""
    for name in names:
        if (tool := tools.get(name)) is not None:
            await tool.refresh_definition()
