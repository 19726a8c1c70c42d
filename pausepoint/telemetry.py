"""Tracing and metrics: ``Telemetry`` (give it to ``Pausepoint(telemetry=...)``) and the ``Metrics``
protocol it reports counts and timings to (``pausepoint.metrics.PrometheusMetrics`` implements it).

See ``pausepoint.turn._telemetry`` for the spans made and what they carry.
"""

from .turn._telemetry import CAPTURE_ENV, Metrics, Telemetry

__all__ = ["CAPTURE_ENV", "Metrics", "Telemetry"]
