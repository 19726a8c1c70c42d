"""``Telemetry``: OpenTelemetry spans and metrics around the turn loop.

The turn loop reports through one ``Telemetry`` object per app (``Pausepoint(telemetry=...)``).
Tracing uses only the OpenTelemetry API (``pip install 'pausepoint[otel]'``): spans go wherever
the application's tracer provider sends them, and nowhere without an SDK configured. Without the
package, and without metrics, every hook is a shared no-op object: the loop pays a method call.

Spans follow the OpenTelemetry GenAI semantic conventions::

    invoke_agent {agent}            one call of send / resume / cancel / settle_expired
    ├── chat {model}                one model call: model, token usage, finish reason
    ├── execute_tool {tool}         one tool call: tool name, call id, outcome
    │   └── pause {tool}            the call paused; its span context is kept in the pause record
    └── answer {tool}               a pause answered (or expired, or cancelled), linked to the
                                    pause's span, even from another process days later

No message content (messages, tool arguments and results, answers) is put in spans unless
``capture_content=True`` (or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``).

Metrics go to a ``Metrics`` implementation (``pausepoint.metrics.PrometheusMetrics``, or your
own): turns by finish reason, pauses opened and resolved by tool, how long pauses waited, model
latency and errors, store latency.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime
from time import monotonic, perf_counter
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._extras import installed_version
from ..session._records import CallAnswered, CallPaused, Record

if TYPE_CHECKING:
    from ..models._model import ModelRequest, ModelResponse
    from ..session._state import SessionState
    from ..tools._dispatch import CallJob, Outcome

__all__ = ["Metrics", "Telemetry"]

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


@runtime_checkable
class Metrics(Protocol):
    """Where the runtime reports what it counts and times (``pausepoint.metrics.PrometheusMetrics``)."""

    def turn_ended(self, agent: str, finish_reason: str, seconds: float) -> None:
        """A call of send / resume / cancel / settle_expired ended (``finish_reason`` "error" if it raised)."""

    def model_called(self, agent: str, model: str, seconds: float, error: str | None) -> None:
        """A model call ended; ``error`` is the error's code when it failed."""

    def pause_opened(self, agent: str, tool: str, *, tenant: str | None = None) -> None:
        """A pause was recorded (in a session of ``tenant``; None: of none)."""

    def pause_resolved(self, agent: str, tool: str, decision: str, waited: float, *, tenant: str | None = None) -> None:
        """A pause was answered (``decision`` "expire" when it expired) after ``waited`` seconds.

        (``tenant`` is given only to an implementation whose ``pause_opened`` and
        ``pause_resolved`` take it: one written before tenants is called as it always was.)"""

    def store_called(self, backend: str, operation: str, seconds: float) -> None:
        """A session store call ended."""


class _Handle:
    """What a hook hands back: ``done(...)`` reports the outcome; the no-op one ignores it."""

    __slots__ = ("outcome",)

    def __init__(self) -> None:
        self.outcome: Any = None

    def __enter__(self) -> _Handle:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def done(self, outcome: Any) -> None:
        self.outcome = outcome


class _Noop(_Handle):
    def done(self, outcome: Any) -> None:
        return None


_NOOP = _Noop()


class Telemetry:
    """Tracing and metrics for one app's agents.

    ``tracing=False`` turns spans off even when OpenTelemetry is installed; ``tracer_provider``
    replaces the global one; ``capture_content`` puts messages, tool arguments, results and
    answers in spans (default: the ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
    environment variable, else off); ``metrics`` receives counts and timings.
    """

    def __init__(
        self,
        *,
        tracing: bool = True,
        tracer_provider: Any = None,
        capture_content: bool | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        if capture_content is None:
            capture_content = os.environ.get(CAPTURE_ENV, "").strip().lower() == "true"
        self.capture_content = capture_content
        self.metrics = metrics
        self._given = tracer_provider is not None
        self._own = _make_tracer(tracer_provider) if tracing else None
        self._provider: Any = None  # the global provider last seen, and the tracer it means
        self._live: Any = self._own if self._given else None
        self._next_check = 0.0

    @property
    def _tracer(self) -> Any:
        """The tracer, while spans would go somewhere: a provider was given, or the application
        set a global one (the API's default makes spans nobody records, at a cost per span)."""
        if self._given or self._own is None:
            return self._own
        # Asking OpenTelemetry for its global provider reads the environment: at most once a
        # second, until the application has set one.
        if self._live is None and monotonic() >= self._next_check:
            self._next_check = monotonic() + 1.0
            provider = _global_provider()
            if provider is not self._provider:
                self._provider = provider
                self._live = None if _is_default(provider) else self._own
        return self._live

    @property
    def tracing(self) -> bool:
        """Whether spans are made now (OpenTelemetry is installed, tracing is on, and a tracer
        provider was given or set globally)."""
        return self._tracer is not None

    # -- hooks of the turn loop -----------------------------------------------------------------

    def turn(self, agent: str, session_id: str, operation: str) -> AbstractContextManager[_Handle]:
        """Around one call on a session; ``done(response)`` with what it returned."""
        if self.metrics is None and self._tracer is None:
            return _NOOP
        return self._turn(agent, session_id, operation)

    def model_call(self, agent: str, model: str, request: ModelRequest) -> AbstractContextManager[_Handle]:
        """Around one model call; ``done(response)``."""
        if self.metrics is None and self._tracer is None:
            return _NOOP
        return self._model_call(agent, model, request)

    def tool_call(self, job: CallJob) -> AbstractContextManager[_Handle]:
        """Around one tool call; ``done(outcome)``."""
        if self._tracer is None:
            return _NOOP
        return self._tool_call(job)

    def pause(self, tool: str, pause_id: str, call_ref: str, expires_at: datetime | None) -> str | None:
        """A call is pausing: its span's context as a W3C ``traceparent`` (kept in the pause record)."""
        tracer = self._tracer
        if tracer is None:
            return None
        attributes: dict[str, Any] = {
            "gen_ai.tool.name": tool,
            "pausepoint.pause.id": pause_id,
            "gen_ai.tool.call.id": call_ref,
        }
        if expires_at is not None:
            attributes["pausepoint.pause.expires_at"] = expires_at.isoformat()
        with tracer.start_as_current_span(f"pause {tool}", attributes=attributes) as span:
            return _traceparent(span)

    def recorded(self, state: SessionState, records: Sequence[Record]) -> None:
        """Records were appended: count pauses, and trace each answer with a link to its pause."""
        tracer = self._tracer
        if tracer is None and self.metrics is None:
            return
        metrics = self.metrics
        tenant = {"tenant": state.tenant} if metrics is not None and _takes_tenant(type(metrics)) else {}
        for record in records:
            if isinstance(record, CallPaused):
                if metrics is not None:
                    metrics.pause_opened(state.agent, record.name, **tenant)
            elif isinstance(record, CallAnswered):
                pause = state.pauses[record.ref].record
                waited = max((record.at - pause.at).total_seconds(), 0.0)
                if metrics is not None:
                    metrics.pause_resolved(state.agent, record.name, record.decision, waited, **tenant)
                if tracer is not None:
                    self._answer_span(tracer, record, pause, waited)

    def store_call(self, store: object, operation: str) -> AbstractContextManager[Any]:
        """Around one store call (timed for the metrics)."""
        if self.metrics is None:
            return _NOOP
        return self._store_call(_backend(store), operation)

    # -- the spans ------------------------------------------------------------------------------

    def _span(self, name: str, kind: Any = None, attributes: dict[str, Any] | None = None) -> Any:
        tracer = self._tracer
        if tracer is None:
            return nullcontext(None)
        from opentelemetry.trace import SpanKind

        # An exception's message may quote content (a provider's error quoting the prompt): its
        # event is recorded only with content capture on; the span is marked failed either way.
        return tracer.start_as_current_span(
            name, kind=kind or SpanKind.INTERNAL, attributes=attributes, record_exception=self.capture_content
        )

    @contextmanager
    def _turn(self, agent: str, session_id: str, operation: str) -> Iterator[_Handle]:
        handle = _Handle()
        start = perf_counter()
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.conversation.id": session_id,
            "pausepoint.operation": operation,
        }
        reason: str | None = "error"
        with self._span(f"invoke_agent {agent}", attributes=attributes) as span:
            try:
                yield handle
                finish = getattr(handle.outcome, "finish_reason", None)
                reason = None if finish is None else str(getattr(finish, "value", finish))  # None: nothing done
                if span is not None and reason is not None:
                    span.set_attribute("pausepoint.finish_reason", reason)
                    span.set_attribute("pausepoint.pending", len(getattr(handle.outcome, "interrupts", ())))
            except BaseException as exc:
                if span is not None:
                    span.set_attribute("error.type", _error_type(exc))
                raise
            finally:
                if self.metrics is not None and reason is not None:
                    self.metrics.turn_ended(agent, reason, perf_counter() - start)

    @contextmanager
    def _model_call(self, agent: str, model: str, request: ModelRequest) -> Iterator[_Handle]:
        handle = _Handle()
        start = perf_counter()
        provider, _, _ = model.partition("/")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider if "/" in model else "pausepoint",
            "gen_ai.request.model": model,
            "gen_ai.agent.name": agent,
        }
        for key, attribute in _REQUEST_CONFIG.items():
            value = request.config.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                attributes[attribute] = value
        error: str | None = None
        with self._span(f"chat {model}", _client_kind() if self._tracer is not None else None, attributes) as span:
            try:
                if span is not None and self.capture_content:
                    span.set_attribute("gen_ai.input.messages", _messages_json(request.messages))
                    if request.system:
                        span.set_attribute("gen_ai.system_instructions", request.system)
                yield handle
                if span is not None and handle.outcome is not None:
                    _describe_response(span, handle.outcome, self.capture_content)
            except BaseException as exc:
                error = _error_type(exc)
                if span is not None:
                    span.set_attribute("error.type", error)
                raise
            finally:
                if self.metrics is not None:
                    self.metrics.model_called(agent, model, perf_counter() - start, error)

    @contextmanager
    def _tool_call(self, job: CallJob) -> Iterator[_Handle]:
        handle = _Handle()
        request = job.request
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": request.name,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.id": request.ref,
        }
        if job.resumed_metadata is not None:
            attributes["pausepoint.tool.restarted"] = True
        with self._span(f"execute_tool {request.name}", attributes=attributes) as span:
            if span is not None and self.capture_content:
                span.set_attribute("gen_ai.tool.call.arguments", _json(job.input))
            yield handle
            if span is not None and handle.outcome is not None:
                _describe_outcome(span, handle.outcome, self.capture_content)

    def _answer_span(self, tracer: Any, record: CallAnswered, pause: CallPaused, waited: float) -> None:
        from opentelemetry.trace import Link

        links = []
        context = _span_context(pause.trace)
        if context is not None:
            links.append(Link(context, {"pausepoint.link": "pause"}))
        attributes: dict[str, Any] = {
            "gen_ai.tool.name": record.name,
            "gen_ai.tool.call.id": record.call_ref,
            "pausepoint.pause.id": record.ref,
            "pausepoint.answer.decision": record.decision,
            "pausepoint.answer.via": record.via,
            "pausepoint.pause.waited_seconds": waited,
        }
        if record.principal is not None:
            attributes["pausepoint.answer.principal"] = record.principal
        if self.capture_content and record.output is not None:
            attributes["pausepoint.answer.output"] = _json(record.output)
        with tracer.start_as_current_span(f"answer {record.name}", links=links, attributes=attributes):
            pass

    @contextmanager
    def _store_call(self, backend: str, operation: str) -> Iterator[None]:
        start = perf_counter()
        try:
            yield
        finally:
            assert self.metrics is not None
            self.metrics.store_called(backend, operation, perf_counter() - start)


_REQUEST_CONFIG = {
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "max_output_tokens": "gen_ai.request.max_tokens",
    "max_tokens": "gen_ai.request.max_tokens",
}


@functools.cache
def _takes_tenant(kind: type) -> bool:
    """Whether a ``Metrics`` implementation counts pauses by tenant (its pause methods take ``tenant``)."""
    try:
        return all("tenant" in inspect.signature(getattr(kind, name)).parameters
                   for name in ("pause_opened", "pause_resolved"))  # fmt: skip
    except (AttributeError, TypeError, ValueError):
        return False


def _client_kind() -> Any:
    from opentelemetry.trace import SpanKind

    return SpanKind.CLIENT


def _global_provider() -> Any:
    from opentelemetry import trace

    return trace.get_tracer_provider()


def _is_default(provider: Any) -> bool:
    from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider

    return isinstance(provider, ProxyTracerProvider | NoOpTracerProvider)


def _make_tracer(provider: Any) -> Any:
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    own = installed_version()
    return trace.get_tracer("pausepoint", None if own == "unknown" else own, tracer_provider=provider)


def _traceparent(span: Any) -> str | None:
    context = span.get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def _span_context(traceparent: str | None) -> Any:
    """The span context a pause record keeps, or None (none kept, or not readable)."""
    if not traceparent:
        return None
    from opentelemetry.trace import SpanContext, TraceFlags

    try:
        _, trace_id, span_id, flags = traceparent.split("-")
        return SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(int(flags, 16)))
    except ValueError:
        return None


def _backend(store: object) -> str:
    name = type(store).__name__
    return name.removesuffix("SessionStore").lower() or name


def _error_type(exc: BaseException) -> str:
    return str(getattr(exc, "code", None) or type(exc).__qualname__)


def _json(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def _messages_json(messages: Sequence[Any]) -> str:
    from ..session._json import MESSAGES, dump

    return json.dumps(dump(MESSAGES, list(messages)), ensure_ascii=False)


def _describe_response(span: Any, response: ModelResponse, capture: bool) -> None:
    span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
    usage = response.usage
    if usage is not None:
        if usage.input_tokens is not None:
            span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        if usage.output_tokens is not None:
            span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
    if capture:
        span.set_attribute("gen_ai.output.messages", _messages_json([response.message]))


def _describe_outcome(span: Any, outcome: Outcome, capture: bool) -> None:
    from ..tools._dispatch import Completed

    if isinstance(outcome, Completed):
        span.set_attribute("pausepoint.tool.outcome", "error" if outcome.is_error else "completed")
        if outcome.is_error:
            span.set_attribute("error.type", type(outcome.error).__qualname__ if outcome.error else "tool_error")
        if capture:
            span.set_attribute("gen_ai.tool.call.result", _json(outcome.output))
    else:
        span.set_attribute("pausepoint.tool.outcome", "paused")
