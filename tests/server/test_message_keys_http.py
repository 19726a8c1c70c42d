"""A message's ``Idempotency-Key`` over real HTTP: the same message sent again with its key gets
the first turn's reply (JSON or a stream), never a second turn; the key with another message is
409 ``idempotency_key_reused``; a message to a session the server names takes no key (a retry
would start another session), which the OpenAPI document says too."""

from __future__ import annotations

import re

from tests.server.conftest import ALICE
from tests.server.test_display import sse

KEYED = {**ALICE, "Idempotency-Key": "m1"}


async def test_a_message_sent_again_with_its_key_gets_the_first_reply(served, http):
    session = f"{served.bank}/v1/agents/bankingAgent/sessions/my-chat-1"
    first = await http.post(f"{session}/messages", json={"message": "Transfer $12 to ann."}, headers=KEYED)
    assert first.status_code == 200 and first.json()["finish_reason"] == "interrupted"
    history = (await http.get(f"{session}/history", headers=ALICE)).json()

    again = await http.post(f"{session}/messages", json={"message": "Transfer $12 to ann."}, headers=KEYED)
    assert again.status_code == 200 and again.json() == first.json()  # the same pause, the same ref
    streamed = await http.post(
        f"{session}/messages",
        json={"message": "Transfer $12 to ann."},
        headers={**KEYED, "Accept": "text/event-stream"},
    )
    events = sse(streamed.text)
    assert [name for name, _ in events][-1] == "response" and events[-1][1] == first.json()

    reused = await http.post(f"{session}/messages", json={"message": "Transfer $99 to eve."}, headers=KEYED)
    assert reused.status_code == 409 and reused.json()["error"]["code"] == "idempotency_key_reused"
    assert (await http.get(f"{session}/history", headers=ALICE)).json() == history

    ref = first.json()["interrupts"][0]["ref"]
    done = await http.post(f"{session}/interrupts/{ref}/approve", json={}, headers=ALICE)
    assert done.status_code == 200 and done.json()["finish_reason"] == "stop"
    assert len(served.ledger) == 1  # the transfer asked for once, made once


async def test_a_message_to_a_session_the_server_names_takes_no_key(served, http):
    sessions = f"{served.bank}/v1/agents/bankingAgent/sessions"
    before = (await http.get(sessions, headers=ALICE)).json()
    refused = await http.post(sessions, json={"message": "Hello!"}, headers=KEYED)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_request"
    assert "sessions/{id}/messages" in refused.json()["error"]["message"]
    assert (await http.get(sessions, headers=ALICE)).json() == before  # no session started

    paths = (await http.get(f"{served.bank}/openapi.json")).json()["paths"]
    keyed = paths["/v1/agents/{agent}/sessions/{session_id}/messages"]["post"]["parameters"]
    assert "Idempotency-Key" in [p["name"] for p in keyed]
    # the document says the key rule the server holds (a probe: a tab passed its schema, got a 400)
    [described] = [p["schema"] for p in keyed if p["name"] == "Idempotency-Key"]
    for key, taken in (("m1", True), ("a b", True), ("a\tb", False), (" ab", False), ("é", False)):
        assert bool(re.fullmatch(described["pattern"], key)) is taken, key
    unkeyed = paths["/v1/agents/{agent}/sessions"]["post"].get("parameters", [])
    assert "Idempotency-Key" not in [p["name"] for p in unkeyed]
