"""What every cloud provider adapter refuses alike: a streamed request answered by a 200 that is
no event stream, and a config value JSON cannot carry.

Written once and run on each provider's wire, as ``test_providers.py`` is (``providers.py``
knows each format): the provider's real SDK over real HTTP to a loopback server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pausepoint import Message, ModelRequest, TextPart
from pausepoint.errors import ModelError, ModelOutputError

from .providers import Deltas, Provider, refused_before_sending
from .wire_server import Raw, Reply, scripted

USER = [Message("user", [TextPart("Hello")])]


NO_EVENT_STREAMS: dict[str, Callable[[Provider], Reply]] = {
    "html": lambda _: Raw(b"<html><body>Please sign in to the proxy</body></html>", "text/html"),
    "a-whole-json-reply": lambda provider: provider.reply("Hi", stream=False),
    "empty-event-stream": lambda _: Raw(b"", "text/event-stream"),
    "html-as-event-stream": lambda _: Raw(b"<html><body>Please sign in</body></html>\n\n", "text/event-stream"),
}


@pytest.mark.parametrize("body", list(NO_EVENT_STREAMS))
async def test_a_streamed_200_that_is_no_event_stream_is_an_output_error_not_retried(
    provider: Provider, body: str
) -> None:
    """As the same body to a request not streamed is (found by a probe: the SDKs read it as a
    stream that ended at once, ``ModelUnavailable``, sent three times). A stream cut after its
    first events stays ``ModelUnavailable`` (``test_providers.py``)."""
    deltas = Deltas()
    with provider.serve(scripted([NO_EVENT_STREAMS[body](provider)])) as server, pytest.raises(ModelError) as caught:
        await provider.model(server).generate(ModelRequest(USER), deltas)
    assert type(caught.value) is ModelOutputError, repr(caught.value)
    assert caught.value.details["provider"] == provider.name
    assert deltas == []
    assert len(server.requests) == 1


class _Seed:
    """An object of the caller's, which JSON has no form for."""


@pytest.mark.parametrize(
    ("config", "key", "said"),
    [
        ({"temperature": float("nan")}, "temperature", "the value is nan, a number JSON has no form for"),
        ({"top_p": 0.9, "temperature": float("inf")}, "temperature", "the value is inf"),
        ({"stop_sequences": ["END", float("-inf")]}, "stop_sequences", "the value at [1] is -inf"),
        ({"stop_sequences": {"END"}}, "stop_sequences", "the value is a set, which JSON has no form for"),
        ({"seed": _Seed()}, "seed", "the value is a _Seed, which JSON has no form for"),
    ],
    ids=["nan", "inf", "inside", "set", "object"],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_config_value_json_cannot_carry_is_a_bad_request_naming_its_key_before_sending(
    provider: Provider, config: dict[str, Any], key: str, said: str, stream: bool
) -> None:
    """Not an internal error of the SDK's encoder (found by a probe: OpenAI's ``ValueError``,
    with a traceback in the log), nor ``NaN`` sent as if it were JSON (Gemini's)."""
    refused = await refused_before_sending(provider, config, stream)
    assert refused.details["key"] == key
    assert refused.message.startswith(f"config key {key!r} cannot be sent as JSON: ")
    assert said in refused.message
