"""How a request's body is framed, over a raw socket to a real uvicorn on loopback, on each of
its HTTP parsers: only ``Transfer-Encoding: chunked`` (alone) or ``Content-Length``.

A body framed as chunked but labelled with another coding (``gzip, chunked``) is refused,
never read as it comes: httptools hands the app such a body, h11 refuses the request itself.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.conftest import ALICE
from tests.server.harness import build_app, serve_in_thread


class Bank:
    def __init__(self, url: str, http: str, ledger: list[str]) -> None:
        self.url = url
        self.http = http
        self.ledger = ledger


@pytest.fixture(params=["httptools", "h11"])
def bank(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Bank]:
    ledger: list[str] = []
    spec = {"backend": "sqlite", "path": str(tmp_path / "sessions.db")}
    with serve_in_thread(lambda: build_app(spec, ledger=ledger), http=request.param) as url:
        yield Bank(url, request.param, ledger)


def exchange(url: str, head: bytes, body: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
    """Send one raw request on a connection of its own; the reply's status, headers and body
    (read until the server closes the connection: a guard, not a timing)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head + b"\r\n" + body)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    start, _, rest = reply.partition(b"\r\n")
    lines, _, content = rest.partition(b"\r\n\r\n")
    headers = dict(line.lower().split(b": ", 1) for line in lines.split(b"\r\n"))
    return int(start.split()[1]), headers, content


def chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)


@pytest.mark.parametrize(
    "codings",
    [[b"gzip, chunked"], [b"identity, chunked"], [b"gzip", b"chunked"], [b"x-custom;q=1, chunked"]],
    ids=["gzip-chunked", "identity-chunked", "two-lines", "unknown"],
)
async def test_a_transfer_coding_other_than_chunked_is_refused_and_nothing_is_done(bank, codings):
    async with httpx.AsyncClient(timeout=30) as http:
        paused = await http.post(
            bank.url + "/bank/v1/agents/bankingAgent/sessions", json={"message": "Transfer $5 to z."}, headers=ALICE
        )
        session = f"/bank/v1/agents/bankingAgent/sessions/{paused.json()['session_id']}"
        ref = paused.json()["interrupts"][0]["ref"]
        head = (
            f"POST {session}/interrupts/{ref}/respond HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: {ALICE['Authorization']}\r\nContent-Type: application/json\r\n"
        ).encode()
        head += b"".join(b"Transfer-Encoding: " + coding + b"\r\n" for coding in codings)
        status, headers, content = exchange(bank.url, head, chunked(b'{"output": {"approved": true}}'))
        after = (await http.get(bank.url + session, headers=ALICE)).json()
    if bank.http == "h11":  # h11 refuses it itself, in plain text, before the app is called
        assert status == 400
    else:
        assert status == 501, content
        assert headers[b"content-type"] == b"application/json" and headers[b"connection"] == b"close"
        error = json.loads(content)["error"]
        assert error["code"] == "unsupported_transfer_coding" and "Transfer-Encoding" in error["message"]
        assert error["status"] == "UNIMPLEMENTED"
    assert bank.ledger == []  # no transfer was made
    assert [i["ref"] for i in after["interrupts"]] == [ref]  # still paused


async def test_a_chunked_body_is_read(bank):
    async with httpx.AsyncClient(timeout=30) as http:
        paused = await http.post(
            bank.url + "/bank/v1/agents/bankingAgent/sessions", json={"message": "Transfer $5 to z."}, headers=ALICE
        )
    session = f"/bank/v1/agents/bankingAgent/sessions/{paused.json()['session_id']}"
    ref = paused.json()["interrupts"][0]["ref"]
    head = (
        f"POST {session}/interrupts/{ref}/respond HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        f"Authorization: {ALICE['Authorization']}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: Chunked\r\n"  # a coding's name is case-insensitive
    ).encode()
    status, _, content = exchange(bank.url, head, chunked(b'{"output": {"approved": true}}'))
    assert status == 200, content
    assert json.loads(content)["finish_reason"] == "stop" and bank.ledger


@pytest.mark.parametrize("coding", [b"gzip", b"br", b"identity, gzip"])
async def test_a_body_with_a_content_coding_is_refused_and_nothing_is_done(bank, coding):
    """A coded body is never read as if it were not (found by a probe: a gzip-labelled plain body
    was acted on, while a proxy that decodes it sees another request); uncoded is taken."""
    async with httpx.AsyncClient(timeout=30) as http:
        paused = await http.post(
            bank.url + "/bank/v1/agents/bankingAgent/sessions", json={"message": "Transfer $5 to z."}, headers=ALICE
        )
        session = f"/bank/v1/agents/bankingAgent/sessions/{paused.json()['session_id']}"
        ref = paused.json()["interrupts"][0]["ref"]
        body = b'{"output": {"approved": true}}'
        head = (
            f"POST {session}/interrupts/{ref}/respond HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            f"Authorization: {ALICE['Authorization']}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
        ).encode()
        status, _, content = exchange(bank.url, head + b"Content-Encoding: " + coding + b"\r\n", body)
        after = (await http.get(bank.url + session, headers=ALICE)).json()
        assert status == 415, content
        error = json.loads(content)["error"]
        assert error["code"] == "unsupported_content_coding" and "Content-Encoding" in error["message"]
        assert bank.ledger == [] and [i["ref"] for i in after["interrupts"]] == [ref]
        status, _, content = exchange(bank.url, head + b"Content-Encoding: identity\r\n", body)
        assert status == 200 and json.loads(content)["finish_reason"] == "stop" and bank.ledger


@pytest.mark.parametrize(
    ("accept", "streamed"),
    [
        ("text/event-stream", True),
        ("TEXT/Event-Stream", True),  # media types are case-insensitive (RFC 9110)
        ("application/json;q=0.5, text/event-stream;q=0.9", True),
        ("text/event-stream;q=0, application/json", False),  # q=0: not acceptable
        ("text/event-stream; q=0.000", False),
        ("application/json", False),
        ("application/x-not-event-stream", False),
        ("application/json, text/event-stream;q=0.1", False),  # JSON preferred (it streamed: found by a probe)
        ("*/*;q=0.8, text/event-stream;q=0.5", False),
        ("application/json, text/event-stream", True),  # as gladly: the stream
        ("text/*, text/event-stream;q=0.2", True),  # no JSON named
    ],
)
async def test_a_turn_streams_exactly_when_accept_takes_event_streams(bank, accept, streamed):
    """Found by a probe: the header was searched for the lowercase name, so a type in capitals
    got JSON and one refused with q=0 got a stream, on REST and on the Genkit wire alike. Every
    event stream says it is not to be buffered by a proxy, the feed's too."""
    wire = {"data": {"message": {"role": "user", "content": [{"text": "Hello!"}]}}}
    async with httpx.AsyncClient(base_url=bank.url + "/bank", timeout=30) as http:
        for path, body in (("/v1/agents/bankingAgent/sessions", {"message": "Hello!"}), ("/agents/bankingAgent", wire)):
            reply = await http.post(path, json=body, headers={**ALICE, "Accept": accept})
            assert reply.status_code == 200, reply.text
            kind = reply.headers["content-type"].split(";")[0]
            assert kind == ("text/event-stream" if streamed else "application/json"), (path, accept)
            assert reply.headers.get("x-accel-buffering") == ("no" if streamed else None)
        async with http.stream("GET", "/v1/feed", headers=ALICE) as feed:
            assert feed.headers["content-type"].startswith("text/event-stream")
            assert (feed.headers["cache-control"], feed.headers["x-accel-buffering"]) == ("no-cache", "no")
