"""What ``pausepoint serve`` asks of a connection before the app sees a request (found by an
exhaustion probe: 300 MB of headers without a token took 650 MB of the server's memory, and
connections that sent nothing, or trickled their headers, were never closed — 20,000 of them
made the server unreachable). Raw sockets on loopback against the real server."""

from __future__ import annotations

import asyncio
import signal
import time
from typing import cast

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pausepoint.cli import _http_guard
from pausepoint.cli._http_guard import HEAD_SECONDS
from pausepoint.cli._serving import guarded_protocol
from tests.cli.test_operate import TOKEN, served_at, start
from tests.server.harness import serve_in_thread


async def flood(host: str, port: int, total: int) -> tuple[int, bytes]:
    """Send a request whose headers go on for ``total`` bytes: how many the server let in
    before it cut the connection (all of them if it did not), and its reply if it gave one."""
    reader, writer = await asyncio.open_connection(host, port)
    line = b"X-Filler: " + b"y" * 90 + b"\r\n"
    sent = 0
    try:
        writer.write(b"GET /v1/agents HTTP/1.1\r\nHost: x\r\n")
        while sent < total:
            writer.write(line * 640)
            await writer.drain()
            sent += len(line) * 640
        writer.write(b"\r\n")
        await writer.drain()
        return sent, await asyncio.wait_for(reader.read(), 60)
    except ConnectionError:
        return sent, b""
    finally:
        writer.close()


async def closed_after(
    host: str, port: int, trickle: bytes | None, every: float = 0.5, after: int = 0
) -> tuple[float, bytes]:
    """Open a connection that sends nothing (``trickle`` None) or ``trickle``: its first ``after``
    bytes at once, then a byte every ``every`` seconds; how long the server kept it open, and
    what it said."""
    reader, writer = await asyncio.open_connection(host, port)
    began = time.monotonic()

    async def drip() -> None:
        writer.write((trickle or b"")[:after])
        for byte in (trickle or b"")[after:]:
            writer.write(bytes([byte]))
            await writer.drain()
            if every:
                await asyncio.sleep(every)
        if not every:
            writer.write_eof()

    dripping = asyncio.create_task(drip())
    try:
        reply = await asyncio.wait_for(reader.read(), HEAD_SECONDS * 4)
    finally:
        dripping.cancel()
        writer.close()
    return time.monotonic() - began, reply


async def test_a_head_too_long_or_too_slow_is_refused_and_its_connection_closed():
    proc = start("serve", "tests.cli.apps:bank_ai", "--port", "0", "--token", f"alice={TOKEN}")
    try:
        base = served_at(proc)
        host, port = base.removeprefix("http://").split(":")
        sent, reply = await flood(host, int(port), 64 * 1024 * 1024)
        assert sent < 64 * 1024 * 1024 and reply[:13] in (b"", b"HTTP/1.1 431 "), (sent, reply[:100])

        slowly = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"z" * 200
        (idle, said), (trickled, _) = await asyncio.gather(
            closed_after(host, int(port), None), closed_after(host, int(port), slowly)
        )
        assert said.startswith(b"HTTP/1.1 408 "), said[:200]
        assert idle < HEAD_SECONDS * 3 and trickled < HEAD_SECONDS * 3  # not held open for good

        async with httpx.AsyncClient(base_url=base, timeout=30) as http:  # requests as they come are served
            for _ in range(3):  # on one connection, kept alive
                reply = await http.get("/v1/agents", headers={"Authorization": f"Bearer {TOKEN}"})
                assert reply.status_code == 200
            alice = {"Authorization": f"Bearer {TOKEN}"}
            posted = await http.post("/v1/agents/bankingAgent/sessions", json={"message": "Hello"}, headers=alice)
            assert posted.status_code == 200, posted.text
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)


async def test_a_body_that_stops_coming_is_cut_off(monkeypatch):
    """A body trickled after its head is cut off once its time is up (``BODY_SECONDS``, a minute,
    shortened here); a body sent as it comes is read whole."""
    monkeypatch.setattr(_http_guard, "BODY_SECONDS", 1.0)
    bodies: list[int] = []

    async def echo(request: Request) -> Response:
        bodies.append(len(await request.body()))
        return Response(str(bodies[-1]))

    app = Starlette(routes=[Route("/echo", echo, methods=["POST"])])
    with serve_in_thread(lambda: app, http=cast(str, guarded_protocol())) as url:
        host, port = url.removeprefix("http://").split(":")
        head = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
        took, _ = await closed_after(host, int(port), head + b"b" * 100, every=0.0)
        assert bodies == [100]
        took, said = await closed_after(host, int(port), head + b"b" * 100, every=0.05, after=len(head))
        assert took < 4 and bodies == [100] and not said.startswith(b"HTTP/1.1 200"), (took, said[:100])


async def one_connection(host: str, port: int, data: bytes, replies: int) -> list[bytes]:
    """Send ``data`` (requests back to back) on one connection; the status lines of the first
    ``replies`` replies (fewer if the server closed it)."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(data)
        await writer.drain()
        found: list[bytes] = []
        while len(found) < replies:
            status = await asyncio.wait_for(reader.readline(), 30)
            if not status:
                break
            found.append(status.strip())
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
        return found
    finally:
        writer.close()


async def test_a_head_is_counted_from_its_first_byte_to_its_last_not_from_a_body_left_unread():
    """A head over the limit that arrives whole in one read is refused too (found by a probe: up
    to ~125 KiB passed); a body the app refused unread (413) is not taken for the next request's
    head: the request after it on the kept-alive connection is answered (found by a probe: 431
    and a reset)."""
    proc = start("serve", "tests.cli.apps:bank_ai", "--port", "0", "--token", f"alice={TOKEN}")
    try:
        host, port = served_at(proc).removeprefix("http://").split(":")
        auth = f"Authorization: Bearer {TOKEN}\r\n".encode()
        big_header = b"GET /v1/agents HTTP/1.1\r\nHost: x\r\n" + auth + b"X-Big: " + b"y" * 100_000 + b"\r\n\r\n"
        refused = await one_connection(host, int(port), big_header, 1)
        assert refused == [b"HTTP/1.1 431 Request Header Fields Too Large"], refused
        body = b"x" * 1_200_000  # over the API's 1 MiB: refused before it is read
        post = (
            b"POST /v1/agents/bankingAgent/sessions HTTP/1.1\r\nHost: x\r\n" + auth
            + b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )  # fmt: skip
        get = b"GET /v1/agents HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\n"
        statuses = await one_connection(host, int(port), post + get, 2)
        assert [s[:12] for s in statuses] == [b"HTTP/1.1 413", b"HTTP/1.1 200"], statuses
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)


async def test_a_chunked_bodys_trailers_never_join_the_headers_and_are_bounded():
    """Found by a probe: a trailer field after a chunked body joined the request's headers (an
    ``Authorization`` trailer ran a turn as its token's owner, past a proxy that checked the
    head), and trailers without end took the server's memory (300 MiB held per connection)."""
    proc = start("serve", "tests.cli.apps:bank_ai", "--port", "0", "--token", f"alice={TOKEN}")
    try:
        base = served_at(proc)
        host, port = base.removeprefix("http://").split(":")
        body = b'{"message": "Hello"}'
        chunked = (
            b"POST /v1/agents/bankingAgent/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n%s\r\n" + b"%x\r\n" % len(body) + body + b"\r\n0\r\n%s\r\n"
        )  # fmt: skip
        auth = f"Authorization: Bearer {TOKEN}\r\n".encode()
        as_trailer = await one_connection(host, int(port), chunked % (b"", auth), 1)
        in_the_head = await one_connection(host, int(port), chunked % (auth, b""), 1)
        assert [s[:12] for s in as_trailer + in_the_head] == [b"HTTP/1.1 401", b"HTTP/1.1 200"]

        _, writer = await asyncio.open_connection(host, int(port))
        sent, total = 0, 64 * 1024 * 1024
        try:
            writer.write((chunked % (auth, b"")).rsplit(b"\r\n\r\n", 1)[0] + b"\r\n")  # the body, then trailers
            line = b"X-Trailer: " + b"t" * 90 + b"\r\n"
            while sent < total:
                writer.write(line * 640)
                await writer.drain()
                sent += len(line) * 640
        except ConnectionError:
            pass
        finally:
            writer.close()
        assert sent < total  # the server closed the connection long before
        async with httpx.AsyncClient(timeout=30) as http:  # and serves on
            reply = await http.get(base + "/v1/agents", headers={"Authorization": f"Bearer {TOKEN}"})
            assert reply.status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
