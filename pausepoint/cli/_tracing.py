"""``[tracing]``: the app's spans sent to an OpenTelemetry collector over OTLP.

An SDK ``TracerProvider`` of this process's own (the global one is left alone), with the
``service.name`` resource, a parent-based ratio sampler, and a batch processor feeding
``opentelemetry-exporter-otlp``'s exporter (HTTP/protobuf or gRPC). Spans are exported in the
background; ``shutdown()`` at the end of serving sends what is left.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from ._config import Tracing
from ._errors import CliError

__all__ = ["tracer_provider"]

_TRACES_PATH = "/v1/traces"  # where an OTLP/HTTP collector takes spans


def tracer_provider(tracing: Tracing, *, check_only: bool = False) -> Any:
    """The provider ``tracing`` describes (None with ``check_only``: only the packages are
    checked). Raises ``CliError`` naming the ``otel`` extra when they are missing."""
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBasedTraceIdRatio

        if tracing.protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[assignment]
                OTLPSpanExporter,
            )
    except ImportError as exc:
        raise CliError(
            f"[tracing] needs the OpenTelemetry SDK and its OTLP exporter: pip install 'pausepoint[otel]' ({exc})"
        ) from None
    if check_only:
        return None
    headers = {name: os.environ[variable] for name, variable in tracing.headers_env.items()}
    exporter = OTLPSpanExporter(endpoint=endpoint_of(tracing), headers=headers or None, timeout=tracing.timeout_seconds)
    provider = TracerProvider(
        resource=Resource.create({"service.name": tracing.service_name}),
        sampler=ParentBasedTraceIdRatio(tracing.sample_ratio),
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def endpoint_of(tracing: Tracing) -> str | None:
    """The exporter's endpoint: the collector's URL, with ``/v1/traces`` added for OTLP/HTTP
    when it names no path (None: the exporter's own default, or ``OTEL_EXPORTER_OTLP_*``)."""
    endpoint = tracing.endpoint
    if endpoint is None or tracing.protocol == "grpc":
        return endpoint
    return endpoint.rstrip("/") + _TRACES_PATH if urlsplit(endpoint).path in ("", "/") else endpoint
