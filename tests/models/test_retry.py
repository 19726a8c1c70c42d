"""``RetryPolicy``: the values it takes, and what it does with them on a provider's wire."""

from __future__ import annotations

from typing import Any

import pytest

from pausepoint import Message, ModelRequest, TextPart
from pausepoint.errors import DefinitionError, ModelUnavailable
from pausepoint.models import RetryPolicy

from .providers import provider_named
from .wire_server import scripted


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"attempts": 0}, "attempts must be a whole number of at least 1"),
        ({"attempts": -1, "base_delay": -1}, "attempts must be a whole number of at least 1"),
        ({"attempts": 2.5}, "attempts must be a whole number"),
        ({"attempts": True}, "attempts must be a whole number"),
        ({"base_delay": -1}, "base_delay must be a finite number of seconds, 0 or more"),
        ({"max_delay": float("nan")}, "max_delay must be a finite number of seconds"),
        ({"max_retry_after": float("inf")}, "max_retry_after must be a finite number of seconds"),
        ({"max_retry_after": "60"}, "max_retry_after must be a finite number of seconds"),
    ],
)
def test_impossible_values_are_refused_when_the_policy_is_made(options: dict[str, Any], said: str) -> None:
    with pytest.raises(DefinitionError, match=said):
        RetryPolicy(**options)


async def test_one_attempt_is_one_request_and_no_delay_is_no_wait() -> None:
    openai = provider_named("openai")
    policy = RetryPolicy(attempts=1, base_delay=0, max_delay=0, max_retry_after=0)
    with openai.serve(scripted([openai.error(503, "busy")])) as server, pytest.raises(ModelUnavailable):
        await openai.model(server, retry=policy).generate(ModelRequest([Message("user", [TextPart("Hi")])]))
    assert len(server.requests) == 1
