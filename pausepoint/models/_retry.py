"""Retrying a model call where it is safe: rate limits, server errors, timeouts — bounded."""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from ..errors import DefinitionError, ModelError
from ._model import ChunkSink, ModelChunk

__all__ = ["RetryPolicy", "call_with_retries", "stream_with_retries"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently to retry a retryable ``ModelError``.

    ``attempts`` counts the first call (a whole number, at least 1; 1: no retries). Retry
    number n waits ``base_delay * 2**(n-1)`` seconds, at most ``max_delay``, with jitter. A
    provider's Retry-After is honoured up to ``max_retry_after`` seconds; beyond that the error
    is raised at once rather than holding the turn. The three are finite seconds, 0 or more.
    Other values raise ``DefinitionError``.
    """

    attempts: int = 3
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 1:
            raise DefinitionError(
                f"RetryPolicy: attempts must be a whole number of at least 1 (1: no retries), not {self.attempts!r}"
            )
        for name in ("base_delay", "max_delay", "max_retry_after"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
                raise DefinitionError(
                    f"RetryPolicy: {name} must be a finite number of seconds, 0 or more, not {value!r}"
                )

    def delay(self, attempt: int, error: ModelError) -> float | None:
        """Seconds to wait before retry number ``attempt`` (1-based), or None to give up."""
        if not error.retryable or attempt >= self.attempts:
            return None
        if error.retry_after is not None:  # a rate limit's, an unavailable server's
            return error.retry_after if error.retry_after <= self.max_retry_after else None
        backoff: float = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return backoff * (0.5 + random.random() / 2)  # noqa: S311 - jitter, not security


async def call_with_retries(
    call: Callable[[], Awaitable[T]], policy: RetryPolicy, *, may_retry: Callable[[], bool] | None = None
) -> T:
    """Run ``call``; on a retryable ``ModelError`` wait as the policy says and run it again.

    ``may_retry`` is asked after each failure; returning False raises the error instead.
    """
    attempt = 1
    while True:
        try:
            return await call()
        except ModelError as error:
            wait = policy.delay(attempt, error)
            if wait is None or (may_retry is not None and not may_retry()):
                raise
        await asyncio.sleep(wait)
        attempt += 1


async def stream_with_retries(call: Callable[[ChunkSink], Awaitable[T]], on_chunk: ChunkSink, policy: RetryPolicy) -> T:
    """Run a streaming ``call(sink)``, retrying like ``call_with_retries`` only while nothing
    has been reported: once a chunk reached the caller, a retry would repeat it."""
    reported = False

    def sink(chunk: ModelChunk) -> None:
        nonlocal reported
        reported = True
        on_chunk(chunk)

    return await call_with_retries(lambda: call(sink), policy, may_retry=lambda: not reported)
