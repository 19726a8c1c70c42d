"""Measuring helpers for the workloads: summaries of timings, resident memory, a timed model."""

from __future__ import annotations

import os
import resource
import statistics
import time
from collections.abc import Callable
from typing import Any

from pausepoint import Model, ModelChunk, ModelRequest, ModelResponse

__all__ = ["TimedModel", "json_safe", "rss_now", "rss_peak", "summarize"]


def summarize(ns: list[int]) -> dict[str, float]:
    """Mean, median, 95th percentile and minimum of nanosecond timings, in microseconds."""
    us = sorted(x / 1000 for x in ns)
    return {
        "mean": statistics.fmean(us),
        "median": statistics.median(us),
        "p95": us[min(len(us) - 1, int(0.95 * len(us)))],
        "min": us[0],
        "n": len(us),
    }


def rss_now() -> int:
    """This process's resident set size now, in bytes (Linux ``/proc``; 0 where unavailable)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def rss_peak() -> int:
    """The highest resident set size this process has reached, in bytes."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class TimedModel:
    """Wraps a model and adds up the time spent inside it, so framework time can be told apart.

    When streaming, the time includes the chunk callbacks the model calls (framework code);
    the streaming workload measures the model's own chunk cost separately for that reason.
    A scripted model's request log (``requests``, kept for tests' assertions) is emptied after
    each call: it holds every request ever made, and its memory is the test model's, not the
    framework's.
    """

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = inner.name
        self.ns = 0
        self.calls = 0

    async def generate(
        self, request: ModelRequest, on_chunk: Callable[[ModelChunk], None] | None = None
    ) -> ModelResponse:
        start = time.perf_counter_ns()
        try:
            return await self.inner.generate(request, on_chunk)
        finally:
            self.ns += time.perf_counter_ns() - start
            self.calls += 1
            log = getattr(self.inner, "requests", None)
            if isinstance(log, list):
                log.clear()


def json_safe(value: Any) -> Any:
    """``value`` with NaN replaced by None, so the JSON output is strict."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
