"""The SSE feed: new pauses and answers, for the sessions the subscriber may see."""

from __future__ import annotations

import asyncio
import json

from tests.server.conftest import ALICE, BOB


async def read_events(http, url, headers, count, into):
    async with http.stream("GET", url, headers=headers) as reply:
        assert reply.status_code == 200
        name = None
        async for line in reply.aiter_lines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                into.append((name, json.loads(line[5:])))
                if len(into) >= count:
                    return


async def test_feed_announces_pauses_and_answers_to_the_owner_only(served, http):
    alice_events: list = []
    bob_events: list = []
    alice = asyncio.create_task(read_events(http, served.bank + "/v1/feed", ALICE, 6, alice_events))
    bob = asyncio.create_task(read_events(http, served.bank + "/v1/feed", BOB, 1, bob_events))
    await asyncio.sleep(0.5)
    reply = await http.post(served.bank + "/v1/agents/bankingAgent/sessions", json={"message": "Transfer $3 to q."},
                            headers=ALICE)  # fmt: skip
    body = reply.json()
    ref = body["interrupts"][0]["ref"]
    base = f"{served.bank}/v1/agents/bankingAgent/sessions/{body['session_id']}"
    await http.post(base + f"/interrupts/{ref}/respond", json={"output": {"approved": True}}, headers=ALICE)
    await asyncio.wait_for(alice, 10)
    # the yes grants the transfer it asked about; the grant approves it (the policy's decision)
    assert [name for name, _ in alice_events] == ["pause", "turn_end", "answer", "grant", "decision", "turn_end"]
    assert alice_events[0][1]["interrupt"]["ref"] == ref and alice_events[0][1]["session_id"] == body["session_id"]
    assert alice_events[1][1]["finish_reason"] == "interrupted" and alice_events[1][1]["open_refs"] == [ref]
    assert alice_events[2][1]["entry"]["principal"] == "alice"
    # the feed shows a pause as the REST API does: with its view, and an answer with what it decided on
    assert alice_events[0][1]["interrupt"]["view"]["title"] == "Transfer $3 to q"
    assert alice_events[2][1]["entry"]["ref"] == ref and alice_events[2][1]["entry"]["input"]["details"]
    assert alice_events[2][1]["entry"]["view"]["title"] == "Transfer $3 to q"
    assert alice_events[3][1]["entry"]["grant"] == alice_events[4][1]["entry"]["grant"]
    assert alice_events[4][1]["entry"]["view"]["title"] == "Transfer $3.00 to q"
    assert alice_events[5][1]["finish_reason"] == "stop"
    await asyncio.sleep(0.5)
    assert bob_events == []
    bob.cancel()
