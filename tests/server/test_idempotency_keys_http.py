"""An idempotency key is the same on every surface, over real HTTP: the Python client refuses
the keys a local ``Chat`` refuses, with its typed error, before sending (found by a probe:
"é" failed in httpx with a ``UnicodeEncodeError``, " ab" as ``ServerUnreachable`` with the
server up, "" was swapped for a fresh key); REST and the Genkit wire read the header's bytes as
UTF-8 and refuse what Python refuses, 400 naming the same path and rule (a UTF-8 "é" was
recorded as "Ã©", and "…" refused as a control character '\\x80'); and a key taken on one
surface replays on another."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from examples import banking
from pausepoint.client import Client
from pausepoint.errors import InvalidAnswer, InvalidMessage
from pausepoint.server import BearerTokens, create_app
from pausepoint.stores import InMemorySessionStore
from tests.mcp.test_serve import call, http_client
from tests.server.conftest import ALICE
from tests.server.harness import TOKENS, serve_in_thread
from tests.test_idempotency_keys import REFUSED_KEYS, WIDEST_KEY

BANK = "/v1/agents/bankingAgent"


async def test_the_client_refuses_the_keys_a_local_chat_refuses_before_sending(served, http):
    sessions = f"{served.bank}{BANK}/sessions"
    async with Client(served.bank, token="alice-token") as client:
        paused = client.agent("bankingAgent").chat()
        [pause] = (await paused.send("Transfer $12 to ann.")).interrupts
        before = (await http.get(sessions, headers=ALICE)).json()
        trail = await paused.audit_trail()
        for key, rule in REFUSED_KEYS:
            chat = client.agent("bankingAgent").chat()
            with pytest.raises(InvalidMessage) as sent:
                await chat.send("Transfer $1 to bo.", idempotency_key=key)
            assert (sent.value.details["rule"], sent.value.details["path"]) == (rule, "$.idempotency_key"), key
            assert await chat.history() == []  # nothing sent: the session it names is not made
            with pytest.raises(InvalidAnswer) as answered:
                await paused.approve(pause.ref, idempotency_key=key)
            assert answered.value.details["rule"] == rule, key
            with pytest.raises(InvalidAnswer) as resumed:
                await paused.resume(respond=[pause.respond({"approved": True})], idempotency_key=key)
            assert resumed.value.details["rule"] == rule, key
        assert await paused.audit_trail() == trail and [p.ref for p in await paused.interrupts()] == [pause.ref]
    assert (await http.get(sessions, headers=ALICE)).json() == before and served.ledger == []


async def test_a_key_the_client_sends_is_recorded_as_it_is_and_replays_over_rest(served, http):
    async with Client(served.bank, token="alice-token") as client:
        chat = client.agent("bankingAgent").chat()
        first = await chat.send("Transfer $12 to ann.", idempotency_key=WIDEST_KEY)
        assert await chat.send("Transfer $12 to ann.", idempotency_key=WIDEST_KEY) == first
        [entry] = await chat.audit_trail()
        assert entry.idempotency_key == WIDEST_KEY
        approve_key = WIDEST_KEY[::-1]  # another request, another key
        done = await chat.approve(first.interrupts[0].ref, idempotency_key=approve_key)
    url = f"{served.bank}{BANK}/sessions/{chat.session_id}/interrupts/{first.interrupts[0].ref}/approve"
    again = await http.post(url, json={}, headers={**ALICE, "Idempotency-Key": approve_key})
    assert again.status_code == 200 and again.json()["version"] == done.version  # the first outcome
    assert len(served.ledger) == 1  # the transfer made once


#: a header's bytes, and the rule and the words its refusal names
HEADERS = [
    ("é".encode(), "key_chars", "'é'"),
    ("…".encode(), "key_chars", "'…'"),  # e2 80 a6: no control character \x80
    (b"\xe9", "key_chars", "not UTF-8"),  # Latin-1's é
    (b"a\tb", "control_in_name", "'\\t'"),
    (b"k" * 201, "key_length", "not 201"),
]


async def refused(http: httpx.AsyncClient, url: str, body: Any, key: bytes) -> dict[str, Any]:
    reply = await http.post(url, json=body, headers={**ALICE, "Idempotency-Key": key})  # type: ignore[dict-item]
    assert reply.status_code == 400, (key, reply.text)
    error: dict[str, Any] = reply.json()["error"]
    return error


async def test_rest_and_the_genkit_wire_read_a_key_as_utf8_and_refuse_what_python_refuses(served, http):
    genkit = {"data": {"message": {"role": "user", "content": [{"text": "Transfer $1 to bo."}]}}}
    for index, (key, rule, named) in enumerate(HEADERS):
        session = f"keys-http-{index}"
        url = f"{served.bank}{BANK}/sessions/{session}/messages"
        rest = await refused(http, url, {"message": "Transfer $1 to bo."}, key)
        body = {**genkit, "init": {"sessionId": f"{session}-genkit"}}
        wire = await refused(http, f"{served.bank}/agents/bankingAgent", body, key)
        for error in (rest, wire):
            assert error["code"] == "invalid_request" and named in error["message"], (key, error)
            assert (error["details"]["rule"], error["details"]["path"]) == (rule, "$.idempotency_key"), key
        for made in (session, f"{session}-genkit"):  # nothing recorded
            history = await http.get(f"{served.bank}{BANK}/sessions/{made}/history", headers=ALICE)
            assert history.status_code == 404, made
    assert served.ledger == []


@pytest.fixture
def mcp_bank() -> Iterator[tuple[str, list[str]]]:
    """The banking example served with MCP beside REST."""
    ledger: list[str] = []

    def factory() -> Any:
        ai, _ = banking.build(InMemorySessionStore(), ledger)
        return create_app(ai, auth=BearerTokens(TOKENS), mcp=True)

    with serve_in_thread(factory) as url:
        yield url, ledger


async def test_mcp_takes_the_same_keys_and_a_key_it_took_replays_over_rest(mcp_bank, http):
    url, ledger = mcp_bank
    async with http_client(url, "alice-token") as alice:
        for key, _ in REFUSED_KEYS:
            sent = await call(
                alice, "send_message", agent="bankingAgent", text="hi", session_id="m", idempotency_key=key
            )
            assert sent[0] == "error" and "invalid_request" in sent[1], (key, sent)
        reply = await call(alice, "send_message", agent="bankingAgent", text="Transfer $5 to bo.", session_id="m")
        ref = reply["pauses"][0]["ref"]
        for key in ("é", " ab"):  # found by a probe: "é" was taken here, kept, and
            answered = await call(  # could not be sent again in a header
                alice, "answer_pause", agent="bankingAgent", session_id="m", ref=ref, decision="approve",
                idempotency_key=key,
            )  # fmt: skip
            assert answered[0] == "error" and "invalid_request" in answered[1], (key, answered)
        assert ledger == []
        done = await call(
            alice, "answer_pause", agent="bankingAgent", session_id="m", ref=ref, decision="approve",
            idempotency_key=WIDEST_KEY,
        )  # fmt: skip
    approve = f"{url}{BANK}/sessions/m/interrupts/{ref}/approve"
    again = await http.post(approve, json={}, headers={**ALICE, "Idempotency-Key": WIDEST_KEY})
    assert done["finish_reason"] == "stop" and again.status_code == 200, again.text
    assert again.json()["finish_reason"] == "stop" and len(ledger) == 1  # the first outcome: no second transfer
