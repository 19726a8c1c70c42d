"""``PrometheusMetrics``: the runtime's counts and timings as Prometheus metrics.

``pip install 'pausepoint[metrics]'``. ``create_app(ai, metrics=True)`` makes one and serves it at
``/metrics``; elsewhere (a worker process) hand one to the app and expose its ``registry``::

    metrics = PrometheusMetrics()
    ai = Pausepoint(telemetry=Telemetry(metrics=metrics))
    prometheus_client.start_http_server(9100, registry=metrics.registry)

The metrics (each prefixed ``pausepoint_``)::

    turns_total{agent, finish_reason}                     calls of send / resume / cancel / settle_expired
    turn_duration_seconds{agent}                          histogram
    pauses_opened_total{agent, tool[, tenant]}
    pauses_resolved_total{agent, tool, decision[, tenant]}  respond, deny, restart, cancel, expire
    pause_wait_seconds{agent, tool[, tenant]}             histogram: how long a pause waited for its answer
    model_duration_seconds{agent, model}                  histogram
    model_errors_total{agent, model, error}               by error code
    store_duration_seconds{backend, operation}            histogram: the runtime's appends and reads
    http_requests_total{method, route, status}            the server's requests (route: the path template)
    http_request_duration_seconds{method, route}          histogram
    webhook_attempts_total{webhook, outcome}              delivered, retry, failed

A turn that raised counts with ``finish_reason="error"``. Labels hold names the app defines
(agents, tools, models, webhooks, routes), never session ids or principals.

``PrometheusMetrics(tenants=[...])`` counts pauses by tenant too: the ``tenant`` label is one of
the tenants named, ``""`` for a session of no tenant, and ``"other"`` for any other tenant, so
its values stay as few as the tenants configured (an identity provider may name any tenant).
Without ``tenants`` there is no such label.
"""

from __future__ import annotations

from collections.abc import Collection

from ._extras import missing_extra
from .errors import DefinitionError

try:
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("prometheus-client", "metrics") from exc

__all__ = ["PrometheusMetrics"]

_FAST = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_MODEL = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_TURN = (0.001, 0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
# A pause waits for a person: from seconds to days.
_WAIT = (1.0, 10.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 12 * 3600.0, 86400.0, 3 * 86400.0, 7 * 86400.0)


class PrometheusMetrics:
    """Implements ``pausepoint.telemetry.Metrics`` (and the server's request and webhook counts)
    on a ``prometheus_client`` registry of its own (or ``registry``)."""

    def __init__(self, registry: CollectorRegistry | None = None, *, tenants: Collection[str] | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        #: the tenants pauses are counted by (None: not by tenant)
        self.tenants = None if tenants is None else frozenset(tenants)
        for name, label in (("", "sessions of no tenant"), ("other", "every tenant not named")):
            if self.tenants is not None and name in self.tenants:  # its pauses would be counted with theirs
                said = f"PrometheusMetrics: tenants: {name!r} is the label of {label}, not a tenant's name"
                raise DefinitionError(said)
        by = ["tenant"] if self.tenants is not None else []
        r = self.registry
        self.turns = Counter(
            "pausepoint_turns", "Calls on sessions, by how they ended.", ["agent", "finish_reason"], registry=r
        )
        self.turn_seconds = Histogram(
            "pausepoint_turn_duration_seconds", "Time of a call on a session.", ["agent"], buckets=_TURN, registry=r
        )
        self.pauses_opened = Counter("pausepoint_pauses_opened", "Pauses recorded.", ["agent", "tool", *by], registry=r)
        self.pauses_resolved = Counter(
            "pausepoint_pauses_resolved",
            "Pauses answered, cancelled or expired, by decision.",
            ["agent", "tool", "decision", *by],
            registry=r,
        )
        self.pause_wait = Histogram(
            "pausepoint_pause_wait_seconds",
            "How long a pause waited.",
            ["agent", "tool", *by],
            buckets=_WAIT,
            registry=r,
        )
        self.model_seconds = Histogram(
            "pausepoint_model_duration_seconds", "Time of a model call.", ["agent", "model"], buckets=_MODEL, registry=r
        )
        self.model_errors = Counter(
            "pausepoint_model_errors",
            "Model calls that failed, by error code.",
            ["agent", "model", "error"],
            registry=r,
        )
        self.store_seconds = Histogram(
            "pausepoint_store_duration_seconds",
            "Time of a session store call made by the runtime.",
            ["backend", "operation"],
            buckets=_FAST,
            registry=r,
        )
        self.requests = Counter(
            "pausepoint_http_requests", "HTTP requests served.", ["method", "route", "status"], registry=r
        )
        self.request_seconds = Histogram(
            "pausepoint_http_request_duration_seconds",
            "Time to serve an HTTP request (a stream: until it ends).",
            ["method", "route"],
            buckets=_TURN,
            registry=r,
        )
        self.webhook_attempts = Counter(
            "pausepoint_webhook_attempts", "Webhook delivery attempts, by outcome.", ["webhook", "outcome"], registry=r
        )

    # -- pausepoint.telemetry.Metrics -----------------------------------------------------------

    def turn_ended(self, agent: str, finish_reason: str, seconds: float) -> None:
        self.turns.labels(agent, finish_reason).inc()
        self.turn_seconds.labels(agent).observe(seconds)

    def model_called(self, agent: str, model: str, seconds: float, error: str | None) -> None:
        self.model_seconds.labels(agent, model).observe(seconds)
        if error is not None:
            self.model_errors.labels(agent, model, error).inc()

    def pause_opened(self, agent: str, tool: str, *, tenant: str | None = None) -> None:
        self.pauses_opened.labels(agent, tool, *self._tenant(tenant)).inc()

    def pause_resolved(self, agent: str, tool: str, decision: str, waited: float, *, tenant: str | None = None) -> None:
        by = self._tenant(tenant)
        self.pauses_resolved.labels(agent, tool, decision, *by).inc()
        self.pause_wait.labels(agent, tool, *by).observe(waited)

    def _tenant(self, tenant: str | None) -> tuple[str, ...]:
        """The tenant label's value, if pauses are counted by tenant: bounded by the tenants named."""
        if self.tenants is None:
            return ()
        return ("" if tenant is None else tenant if tenant in self.tenants else "other",)

    def store_called(self, backend: str, operation: str, seconds: float) -> None:
        self.store_seconds.labels(backend, operation).observe(seconds)

    # -- the server -----------------------------------------------------------------------------

    def request_served(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.request_seconds.labels(method, route).observe(seconds)

    def webhook_attempted(self, webhook: str, outcome: str) -> None:
        self.webhook_attempts.labels(webhook, outcome).inc()

    def exposition(self) -> tuple[bytes, str]:
        """The metrics in Prometheus's text format, and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def __repr__(self) -> str:
        return "<PrometheusMetrics>"
