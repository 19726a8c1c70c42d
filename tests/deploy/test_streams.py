"""Streams through nginx as they are written: a streamed turn's first words reach the client
while the turn still runs (its model waits, at a gate the test opens only once those words
arrived), on the REST API and on the Genkit wire; the feed's ``: connected`` comes before any
event, a pause made through one process is in the feed another process serves, and a feed
resumed with ``Last-Event-ID`` through the proxy (on the other process) gets exactly what it
missed."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.server.feed_client import FeedReader

from .app import FIRST_WORDS
from .proxy import ALICE, BOB, Deployment, text

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

OPENED = FIRST_WORDS + ": the gate opened."  # the turn's text when its first words came through in time


async def events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, Any]]:
    """``(event name, data)`` of an SSE stream, as they come."""
    name = "message"
    async for line in lines:
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            yield name, json.loads(line[5:])
            name = "message"


async def gated_turn(http: httpx.AsyncClient, deployed: Deployment, url: str, body: dict[str, Any], gate: str,
                     first: Any) -> list[tuple[str, Any]]:  # fmt: skip
    """Stream a turn of the narrator through nginx; open its gate once ``first(event)`` says the
    first words came. Every event, in order."""
    seen: list[tuple[str, Any]] = []
    headers = {**ALICE, "Accept": "text/event-stream", "X-Test-Id": gate}
    async with http.stream("POST", url, json=body, headers=headers) as reply:
        assert reply.status_code == 200, await reply.aread()
        assert reply.headers["content-type"].startswith("text/event-stream")
        async for event in events(reply.aiter_lines()):
            seen.append(event)
            if first(event) and not (deployed.gates / gate).exists():
                (deployed.gates / gate).touch()  # the words came through while the model waits
    return seen


async def test_a_streamed_turn_reaches_the_client_before_it_ends(deployed, http):
    gate = f"rest-{uuid.uuid4().hex}"
    url = deployed.url + "/v1/agents/narrator/sessions"
    seen = await gated_turn(http, deployed, url, {"message": gate}, gate,
                            lambda e: e[1].get("kind") == "text" and FIRST_WORDS in e[1]["text"])  # fmt: skip
    [(_, response)] = [e for e in seen if e[0] == "response"]
    assert (response["finish_reason"], text(response)) == ("stop", OPENED)


async def test_a_streamed_turn_on_the_genkit_wire_reaches_the_client_before_it_ends(deployed, http):
    gate = f"genkit-{uuid.uuid4().hex}"
    body = {"data": {"message": {"role": "user", "content": [{"text": gate}]}}}

    def first(event: tuple[str, Any]) -> bool:
        content = event[1].get("message", {}).get("modelChunk", {}).get("content", [])
        return any(FIRST_WORDS in part.get("text", "") for part in content)

    seen = await gated_turn(http, deployed, deployed.url + "/agents/narrator", body, gate, first)
    result = seen[-1][1]["result"]
    assert result["finishReason"] == "stop"
    assert "".join(p.get("text", "") for p in result["message"]["content"]) == OPENED


async def pause(http: httpx.AsyncClient, deployed: Deployment, amount: int, test_id: str) -> dict[str, Any]:
    reply = await http.post(
        deployed.url + "/v1/agents/bankingAgent/sessions",
        json={"message": f"Transfer ${amount} to q."},
        headers={**ALICE, "X-Test-Id": test_id},
    )
    assert reply.status_code == 200, reply.text
    return reply.json()


async def test_the_feed_through_the_proxy_sees_every_process_and_resumes_on_another(deployed, http):
    # ": connected" comes before any event (there is none yet): FeedReader waits for it.
    # One request at a time, so nginx's round-robin alternates: feed-1 and pause-1 on two
    # processes, pause-2 and feed-2 too, and feed-2 on another process than feed-1.
    async with FeedReader(deployed.url, {**BOB, "X-Test-Id": "feed-bob"}) as bobs:
        async with FeedReader(deployed.url, {**ALICE, "X-Test-Id": "feed-1"}) as feed:
            first = await pause(http, deployed, 1, "pause-1")
            (pause_id, name, data), _ = await feed.wait_for(2)
        assert (name, data["interrupt"]["ref"]) == ("pause", first["interrupts"][0]["ref"])
    assert bobs.events == []  # alice's session is not bob's to see

    second = await pause(http, deployed, 2, "pause-2")
    async with FeedReader(deployed.url, {**ALICE, "X-Test-Id": "feed-2"}, last_event_id=pause_id) as resumed:
        missed = await resumed.wait_for(3)
        third = await pause(http, deployed, 3, "pause-3")
        after = await resumed.wait_for(5)

    assert [(n, d["session_id"]) for _, n, d in missed] == [
        ("turn_end", first["session_id"]),
        ("pause", second["session_id"]),
        ("turn_end", second["session_id"]),
    ]
    assert missed[0][0] == feed.events[1][0]  # the same event, the same id
    assert [(n, d["session_id"]) for _, n, d in after[3:]] == [
        ("pause", third["session_id"]),
        ("turn_end", third["session_id"]),
    ]  # nothing repeated
    # The feed showed pauses made by the other process, and resumed on another process.
    feeds = {i: deployed.served_by(i).upstream for i in ("feed-1", "feed-2")}
    pauses = {i: deployed.served_by(i).upstream for i in ("pause-1", "pause-2", "pause-3")}
    assert feeds["feed-1"] != feeds["feed-2"], feeds
    assert feeds["feed-1"] != pauses["pause-1"] and feeds["feed-2"] != pauses["pause-3"], (feeds, pauses)
