"""``pausepoint.client`` when the server is down, silent or drops the connection: typed
``pausepoint.errors`` (never a raw httpx error), retried only where sending again is safe.

Every server here is real: a closed loopback port, a host name that cannot resolve, a
loopback socket that accepts connections and then holds them or drops them, and an HTTP server
whose event stream ends before the turn's response.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

import httpx
import pytest
from pydantic import BaseModel, TypeAdapter

from pausepoint import (
    AgentResponse,
    InterruptChunk,
    Pausepoint,
    TextChunk,
    TextPart,
    ToolRequestPart,
    TurnChunk,
    TurnEndChunk,
)
from pausepoint.client import Client
from pausepoint.errors import InvalidMessage, ServerTimeout, ServerUnreachable, UsageError
from pausepoint.testing import ScriptedModel, tool_call
from pausepoint.turn._streaming import CHUNK
from tests.models.wire_server import Json, Sse, WireServer, scripted


class Question(BaseModel):
    question: str


class Listener:
    """A loopback socket that accepts connections, reads each request's head, then either holds
    the connection open without answering (``hold``) or closes it without a word (``drop``)."""

    def __init__(self, mode: Literal["hold", "drop"]) -> None:
        self.mode = mode
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.requests: list[bytes] = []
        self.keys: list[bytes | None] = []  # each request's Idempotency-Key
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed: the test is over
                return
            head = _read_request(conn)
            self.requests.append(head.split(b"\r\n", 1)[0])
            keyed = [line for line in head.split(b"\r\n") if line.lower().startswith(b"idempotency-key:")]
            self.keys.append(keyed[0].split(b":", 1)[1].strip() if keyed else None)
            if self.mode == "drop":
                conn.close()
            else:
                self._held.append(conn)

    def __enter__(self) -> Listener:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()
        for conn in self._held:
            conn.close()
        self._thread.join(5)


def _read_request(conn: socket.socket) -> bytes:
    """Read one whole request, body included: a socket closed with unread bytes sends a reset
    instead of a clean end, and the client would see a different error each run."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")),
        0,
    )
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head


@contextmanager
def closed_port() -> Iterator[str]:
    """The URL of a loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    yield url


async def test_a_closed_port_is_server_unreachable_after_the_retries() -> None:
    with closed_port() as url:
        async with Client(url, token="t", retries=2) as client:
            with pytest.raises(ServerUnreachable) as caught:
                await client.agents()
            # a send is retried too when the connection never opened: nothing was sent
            new_chat = client.agent("bank").chat()
            with pytest.raises(ServerUnreachable) as sent:
                await new_chat.send("Hello")
    error = caught.value
    assert type(error) is ServerUnreachable and error.code == "server_unreachable"
    assert isinstance(error.__cause__, httpx.ConnectError)
    assert error.details == {"method": "GET", "url": f"{url}/v1/agents"}
    assert url in str(error)
    # a send names the key it was sent with (a fresh one here): sent again with it, it is one turn
    key = sent.value.details.pop("idempotency_key")
    assert isinstance(key, str) and len(key) >= 16
    assert sent.value.details == {
        "method": "POST",
        "url": f"{url}/v1/agents/bank/sessions/{new_chat.session_id}/messages",
    }
    assert isinstance(sent.value.__cause__, httpx.ConnectError)


async def test_a_host_name_that_does_not_resolve_is_server_unreachable() -> None:
    async with Client("http://no-such-host.invalid:8000", retries=0) as client:
        with pytest.raises(ServerUnreachable) as caught:
            await client.agent("bank").chat("s1").history()
    assert type(caught.value) is ServerUnreachable
    assert isinstance(caught.value.__cause__, httpx.ConnectError)
    assert caught.value.details["url"] == "http://no-such-host.invalid:8000/v1/agents/bank/sessions/s1/history"


async def test_a_server_that_does_not_answer_is_server_timeout_and_a_read_is_asked_again() -> None:
    with Listener("hold") as server:
        async with Client(server.url, timeout=0.3, retries=1) as client:
            with pytest.raises(ServerTimeout) as caught:
                await client.agent("bank").chat("s1").interrupts()
    assert caught.value.code == "server_timeout"
    assert isinstance(caught.value, ServerUnreachable)  # one except clause catches both
    assert isinstance(caught.value.__cause__, httpx.ReadTimeout)
    assert server.requests == [b"GET /v1/agents/bank/sessions/s1/interrupts HTTP/1.1"] * 2


async def test_a_send_that_timed_out_is_sent_again_under_its_key_to_the_session_it_named() -> None:
    with Listener("hold") as server:
        async with Client(server.url, timeout=0.3, retries=3) as client:
            chat = client.agent("bank").chat()
            with pytest.raises(ServerTimeout) as caught:
                await chat.send("Transfer $500 to savings.")
    # The server may have taken it: the chat named its new session before sending, and sent it
    # again under one key (the server gives the first outcome back); once the retries are
    # spent, it can read the session (last_response) instead of starting another one.
    assert chat.session_id is not None and len(chat.session_id) == 32
    assert server.requests == [f"POST /v1/agents/bank/sessions/{chat.session_id}/messages HTTP/1.1".encode()] * 4
    assert len(set(server.keys)) == 1 and server.keys[0]
    assert caught.value.details["idempotency_key"] == server.keys[0].decode()  # the key to send it again with


async def test_a_dropped_connection_is_server_unreachable_and_a_keyed_send_or_resume_is_asked_again() -> None:
    with Listener("drop") as server:
        async with Client(server.url, retries=2) as client:
            chat = client.agent("bank").chat("s1")
            with pytest.raises(ServerUnreachable) as resumed:
                await chat.resume(respond=[], idempotency_key="k1")
            with pytest.raises(ServerUnreachable) as sent:
                await chat.send("Hello", idempotency_key="m1")
            with pytest.raises(ServerUnreachable) as cancelled:
                await chat.cancel_pending("no longer needed")
    assert isinstance(resumed.value.__cause__, httpx.RemoteProtocolError)
    assert type(sent.value) is ServerUnreachable and type(cancelled.value) is ServerUnreachable
    assert server.requests == [
        *[b"POST /v1/agents/bank/sessions/s1/resume HTTP/1.1"] * 3,  # keyed: safe to send again
        *[b"POST /v1/agents/bank/sessions/s1/messages HTTP/1.1"] * 3,  # keyed too
        b"POST /v1/agents/bank/sessions/s1/cancel HTTP/1.1",  # no key: once
    ]
    assert server.keys == [b"k1"] * 3 + [b"m1"] * 3 + [None]
    assert resumed.value.details["idempotency_key"] == "k1" and sent.value.details["idempotency_key"] == "m1"
    assert "idempotency_key" not in cancelled.value.details  # sent without one


@pytest.mark.parametrize("base_url", ["127.0.0.1:8000", "ftp://example.com", "http://", "not a url"])
def test_a_base_url_that_is_not_http_is_refused(base_url: str) -> None:
    with pytest.raises(UsageError, match="base_url"):
        Client(base_url)


async def test_a_user_message_of_other_parts_is_refused_before_sending() -> None:
    with Listener("drop") as server:
        async with Client(server.url) as client:
            with pytest.raises(InvalidMessage, match="text and media"):
                await client.agent("bank").chat().send([TextPart("Hi"), ToolRequestPart("pay", {"amount": 5})])
            for not_a_message in (None, 5, {"text": "Hi"}):  # a local chat's error, not a TypeError (a probe)
                with pytest.raises(InvalidMessage):
                    await client.agent("bank").chat().send(not_a_message)  # type: ignore[arg-type]
    assert server.requests == []


async def a_response() -> tuple[AgentResponse, dict[str, object]]:
    """A real turn's response, and its JSON as the server sends it."""
    agent = Pausepoint().define_agent(name="bank", model=ScriptedModel(["Done."]))
    response = await agent.chat().send("Hi")
    return response, TypeAdapter(AgentResponse).dump_python(response, mode="json")


async def test_a_keyed_resume_whose_stream_broke_after_a_chunk_is_completed_by_its_key() -> None:
    response, body = await a_response()
    broken = Sse([("chunk", {"kind": "text", "text": "Do"})])  # then the connection closes
    with WireServer(scripted([broken, Json(body)])) as server:
        async with Client(server.url, retries=2) as client:
            stream = client.agent("bank").chat(response.session_id).resume_stream(respond=[], idempotency_key="k1")
            chunks = [chunk async for chunk in stream]
            final = await stream.response
    assert final == response
    assert chunks == [TextChunk("Do"), TurnEndChunk(response)]
    first, second = server.requests
    assert first.headers["accept"] == "text/event-stream" and second.headers["accept"] != "text/event-stream"
    assert first.headers["idempotency-key"] == second.headers["idempotency-key"] == "k1"
    assert first.path == second.path == f"/v1/agents/bank/sessions/{response.session_id}/resume"
    assert first.body == second.body == {"respond": [], "restart": [], "metadata": None}


async def test_a_send_whose_stream_broke_after_a_chunk_is_completed_by_its_key() -> None:
    response, body = await a_response()
    broken = Sse([("chunk", {"kind": "text", "text": "Do"})])  # then the connection closes
    with WireServer(scripted([broken, Json(body)])) as server:
        async with Client(server.url, retries=2) as client:
            stream = client.agent("bank").chat(response.session_id).send_stream("Hi")
            chunks = [chunk async for chunk in stream]
            final = await stream.response
    assert final == response and chunks == [TextChunk("Do"), TurnEndChunk(response)]
    first, second = server.requests  # the same message under the same fresh key: the server replays it
    assert first.headers["accept"] == "text/event-stream" and second.headers["accept"] != "text/event-stream"
    assert first.headers["idempotency-key"] == second.headers["idempotency-key"]
    assert len(first.headers["idempotency-key"]) >= 16
    assert first.path == second.path == f"/v1/agents/bank/sessions/{response.session_id}/messages"
    assert first.body == second.body == {"message": "Hi"}


async def paused_stream() -> tuple[AgentResponse, list[TurnChunk]]:
    """A real turn that pauses two calls: its response and the chunks its stream sent (but
    the deltas of the calls' arguments)."""
    ai = Pausepoint()
    ask = ai.define_interrupt(name="ask", description="Ask a person.", input_schema=Question)
    model = ScriptedModel([[tool_call("ask", {"question": "a?"}), tool_call("ask", {"question": "b?"})]])
    agent = ai.define_agent(name="bank", model=model, tools=[ask])
    stream = agent.chat().send_stream("Hi")
    chunks = [chunk async for chunk in stream if chunk.kind != "tool_call_delta"]
    return await stream.response, chunks


@pytest.mark.parametrize("before_the_cut", [1, 3])  # the first tool_request; both, and the first pause
async def test_a_stream_broken_before_its_pauses_were_marked_marks_them_before_its_end(before_the_cut: int) -> None:
    """Found by a probe: a stream cut before its interrupt chunks was completed with its
    turn_end alone, so a consumer drawing pauses from those chunks drew none."""
    response, live = await paused_stream()
    kinds = [c.kind for c in live]
    assert kinds == ["tool_request", "tool_request", "interrupt", "interrupt", "turn_end"]
    sent = [CHUNK.dump_python(c, mode="json") for c in live[:before_the_cut]]
    broken = Sse([("chunk", chunk) for chunk in sent])  # then the connection closes
    body = TypeAdapter(AgentResponse).dump_python(response, mode="json")
    with WireServer(scripted([broken, Json(body)])) as server:
        async with Client(server.url, retries=2) as client:
            stream = client.agent("bank").chat(response.session_id).send_stream("Hi")
            chunks = [chunk async for chunk in stream]
    marked = [c.interrupt.ref for c in chunks if isinstance(c, InterruptChunk)]
    assert marked == [i.ref for i in response.interrupts]  # each pause once, in order
    assert chunks[: len(sent)] == live[: len(sent)] and chunks[-1] == TurnEndChunk(response)
    assert all(isinstance(c, InterruptChunk) for c in chunks[len(sent) : -1])
