"""Test your agents offline and deterministically: ``ScriptedModel``.

``ScriptedModel`` is a real ``Model``: it goes through the same turn loop, tool dispatch and
store as any provider. Give it a list of steps, one per model call::

    model = ScriptedModel([
        [tool_call("userApproval", {"action": "transfer", "details": "$500 to savings"})],
        [tool_call("transfer_money", {"amount": 500, "to_account": "savings"})],
        "Done: $500 moved to savings.",
    ])

or a function of the request (``ModelRequest``) returning a step — plain or ``async``. A step is a string (a text
reply), a part or list of parts, a ``Message``, a ``ModelResponse``, or an exception to raise.
Every request is kept in ``model.requests`` so tests can assert on what the model was shown;
a model that serves for long (a demo server, a benchmark) keeps only the latest ones with
``keep_requests=N``, so it does not grow with every call.
With ``stream=True`` text is streamed word by word and tool-call arguments in small pieces.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeAlias

from ..content._messages import MediaPart, Message, Part, TextPart, ToolRequestPart, ToolResponsePart
from ..errors import DefinitionError, ModelError
from ..models._model import ChunkSink, ModelRequest, ModelResponse, TextDelta, ToolCallDelta

__all__ = ["ScriptedModel", "Step", "last_tool_results", "reply", "tool_call"]

Step: TypeAlias = str | Part | Sequence[Part] | Message | ModelResponse | BaseException


def tool_call(name: str, input: Any = None, *, call_id: str | None = None) -> ToolRequestPart:  # noqa: A002
    """A tool request part for a script step (``input`` defaults to ``{}``)."""
    return ToolRequestPart(name, {} if input is None else input, call_id=call_id)


def reply(text: str) -> ModelResponse:
    """A plain text response."""
    return ModelResponse(Message("model", [TextPart(text)]))


def last_tool_results(request: ModelRequest) -> dict[str, Any]:
    """Tool outputs by tool name from the request's last message (empty unless it is a tool
    message). A tool called more than once in that batch is its last call's output: read each
    call's from ``request.messages[-1].tool_responses`` (their ``ref`` names the call)."""
    last = request.messages[-1] if request.messages else None
    if last is None or last.role != "tool":
        return {}
    return {p.name: p.output for p in last.tool_responses}


class ScriptedModel:
    """A deterministic model that answers from a script (see the module docstring)."""

    def __init__(
        self,
        script: Sequence[Step] | Callable[[ModelRequest], Step | Awaitable[Step]],
        *,
        name: str = "scripted",
        stream: bool = True,
        keep_requests: int | None = None,
    ) -> None:
        if keep_requests is not None and (type(keep_requests) is not int or keep_requests < 0):
            raise DefinitionError(f"keep_requests must be None or a whole number, 0 or more, not {keep_requests!r}")
        if not isinstance(name, str) or not name:
            raise DefinitionError(f"a scripted model needs a name (a non-empty string), not {name!r}")
        self.name = name
        self.stream = stream
        #: the requests the model was given, oldest first (the latest ``keep_requests`` only, if set)
        self.requests: list[ModelRequest] = []
        self._keep = keep_requests
        self._function = script if callable(script) else None
        if isinstance(script, str | bytes) or not (callable(script) or isinstance(script, Sequence)):
            raise DefinitionError(f"a script is a list of steps or a function of the request, not {script!r}")
        self._steps = [] if callable(script) else list(script)
        for index, step in enumerate(self._steps):
            if not _is_step(step):
                raise DefinitionError(f"step {index} of the script is not a step (see pausepoint.testing): {step!r}")
        self._next = 0

    @property
    def remaining(self) -> int:
        """How many scripted steps are left (0 for a function script)."""
        return len(self._steps) - self._next

    async def generate(self, request: ModelRequest, on_chunk: ChunkSink | None = None) -> ModelResponse:
        self.requests.append(request)
        if self._keep is not None and len(self.requests) > self._keep:
            del self.requests[: len(self.requests) - self._keep]
        if self._function is not None:
            step = self._function(request)
            if inspect.isawaitable(step):  # an async function of the request
                step = await step
            if not _is_step(step):
                raise ModelError(f"scripted model {self.name!r}: its function returned no step: {step!r}")
        else:
            if self._next >= len(self._steps):
                raise ModelError(
                    f"scripted model {self.name!r} ran out of steps after {len(self._steps)} "
                    + ("call" if len(self._steps) == 1 else "calls")
                )
            step = self._steps[self._next]
            self._next += 1
        response = _as_response(step)
        if on_chunk is not None and self.stream:
            _stream(response.message, on_chunk)
        return response


_PARTS = (TextPart, MediaPart, ToolRequestPart, ToolResponsePart)


def _is_step(step: Any) -> bool:
    """Whether ``step`` is a ``Step``: a string, a part or a list of them, a message, a response,
    an exception. (What a list holds is the runtime's to check, as for a provider's reply: a
    script may hand it what no provider should, to test that it is refused.)"""
    if isinstance(step, (str, Message, ModelResponse, BaseException, *_PARTS)):
        return True
    return isinstance(step, Sequence) and not isinstance(step, bytes)


def _as_response(step: Step) -> ModelResponse:
    if isinstance(step, BaseException):
        raise step
    if isinstance(step, ModelResponse):
        return step
    if isinstance(step, Message):
        return ModelResponse(step)
    if isinstance(step, str):
        return reply(step)
    if isinstance(step, TextPart | MediaPart | ToolRequestPart | ToolResponsePart):
        return ModelResponse(Message("model", [step]))
    return ModelResponse(Message("model", list(step)))


def _stream(message: Message, on_chunk: ChunkSink) -> None:
    index = 0
    for part in message.parts:
        if isinstance(part, TextPart):
            words = part.text.split(" ")
            for i, word in enumerate(words):
                on_chunk(TextDelta(word if i == len(words) - 1 else word + " "))
        elif isinstance(part, ToolRequestPart):
            arguments = json.dumps(part.input)
            pieces = [arguments[i : i + 8] for i in range(0, len(arguments), 8)] or [""]
            on_chunk(ToolCallDelta(index, part.name, part.call_id, pieces[0]))
            for piece in pieces[1:]:
                on_chunk(ToolCallDelta(index, None, None, piece))
            index += 1
