"""A real HTTP server on loopback that speaks whatever wire format a test scripts.

Provider SDKs talk to it through their ``base_url`` exactly as they would to the provider:
real sockets, real HTTP/1.1, JSON bodies and server-sent events. Each test scripts replies
with a handler and asserts on the requests the SDK actually sent (``server.requests``).

    def handler(request: WireRequest) -> Reply:
        return Json({"id": "x", ...})              # or Sse([...]), or Hang(5), or Json(..., status=429)

    with WireServer(handler) as server:
        client = SomeSDK(base_url=server.url, api_key="test")
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Handler", "Hang", "Json", "Raw", "Reply", "Sse", "WireRequest", "WireServer", "scripted"]


@dataclass
class WireRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON when the body is JSON, else the raw text

    @property
    def json(self) -> Any:
        return self.body


@dataclass
class Json:
    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Raw:
    """A reply of any body and content type (an HTML login page a proxy answers with, say)."""

    body: bytes
    content_type: str
    status: int = 200


@dataclass
class Sse:
    """A ``text/event-stream`` reply. Each event is a dict sent as ``data: <json>``, or a
    ``(event_name, data)`` tuple, or a raw string sent as ``data: <string>`` (e.g. ``[DONE]``)."""

    events: Sequence[Any]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # between events, to make streaming observable (or to stall a stream)
    delay_from: int = 0  # wait only after this many events were sent (0: after every event)


@dataclass
class Hang:
    """Accept the request and answer nothing for ``seconds`` (to trigger client timeouts)."""

    seconds: float


Reply = Json | Sse | Hang | Raw
Handler = Callable[[WireRequest], Reply]


def scripted(replies: Sequence[Reply]) -> Handler:
    """A handler giving ``replies`` in order, one per request (the last one repeats)."""
    index = {"next": 0}

    def handler(_request: WireRequest) -> Reply:
        i = min(index["next"], len(replies) - 1)
        index["next"] += 1
        return replies[i]

    return handler


class WireServer(AbstractContextManager["WireServer"]):
    """A threaded HTTP server on 127.0.0.1 with a free port; ``url`` is its base URL."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[WireRequest] = []
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length).decode() if length else ""
                try:
                    body: Any = json.loads(raw) if raw else None
                except json.JSONDecodeError:
                    body = raw
                request = WireRequest(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                server.requests.append(request)
                reply = server.handler(request)
                if isinstance(reply, Hang):
                    time.sleep(reply.seconds)
                    self.close_connection = True
                    return
                if isinstance(reply, Raw):
                    self.send_response(reply.status)
                    self.send_header("content-type", reply.content_type)
                    self.send_header("content-length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                    return
                if isinstance(reply, Json):
                    payload = json.dumps(reply.body).encode()
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self.send_response(reply.status)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.close_connection = True
                for sent, event in enumerate(reply.events, start=1):
                    self.wfile.write(_sse_bytes(event))
                    self.wfile.flush()
                    if reply.delay and sent >= reply.delay_from:
                        time.sleep(reply.delay)

            do_GET = do_POST = do_PUT = do_DELETE = _handle  # noqa: N815 - http.server names

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        # A short poll interval: shutdown() waits up to one interval, once per test.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> WireServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def posts(self, path_contains: str = "") -> Iterator[WireRequest]:
        return (r for r in self.requests if r.method == "POST" and path_contains in r.path)


def _sse_bytes(event: Any) -> bytes:
    if isinstance(event, tuple):
        name, data = event
        text = data if isinstance(data, str) else json.dumps(data)
        return f"event: {name}\ndata: {text}\n\n".encode()
    text = event if isinstance(event, str) else json.dumps(event)
    return f"data: {text}\n\n".encode()
