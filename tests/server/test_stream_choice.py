"""How a request asks for a stream of server-sent events instead of one JSON reply: the
``Accept: text/event-stream`` header, or ``stream=true`` in the query string (spelt out or
percent-encoded, among other parameters); anything else gets one JSON reply."""

from __future__ import annotations

import pytest

from tests.server.conftest import ALICE
from tests.server.test_display import sse

STREAMED = ["?stream=true", "?%73tream=true", "?stream=%74rue", "?lang=en&stream=true"]
NOT_STREAMED = ["", "?stream=false", "?Stream=true", "?streams=true", "?lang=en"]


@pytest.mark.parametrize("query", STREAMED + NOT_STREAMED)
async def test_a_turn_streams_when_the_query_asks_for_it(served, http, query):
    reply = await http.post(
        f"{served.bank}/v1/agents/bankingAgent/sessions{query}",
        json={"message": "Transfer $5 to bob."},
        headers=ALICE,
    )
    assert reply.status_code == 200, reply.text
    if query in STREAMED:
        assert reply.headers["content-type"].startswith("text/event-stream")
        [response] = [data for name, data in sse(reply.text) if name == "response"]
        assert response["finish_reason"] == "interrupted"
    else:
        assert reply.headers["content-type"] == "application/json"
        assert reply.json()["finish_reason"] == "interrupted"


async def test_the_accept_header_asks_for_a_stream_whatever_the_query_says(served, http):
    reply = await http.post(
        f"{served.bank}/v1/agents/bankingAgent/sessions?stream=false",
        json={"message": "Transfer $5 to bob."},
        headers={**ALICE, "Accept": "text/event-stream"},
    )
    assert reply.headers["content-type"].startswith("text/event-stream")
    assert [name for name, _ in sse(reply.text)][-1] == "response"
