"""The banking example served with webhooks, metrics and an operator, and a webhook receiver.

``python -m tests.server.ops_harness '<config as JSON>'`` serves it from a process of its own
(printing its URL first), for the tests that kill a server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from examples import banking
from pausepoint.server import BearerTokens, WebhookSender, create_app
from pausepoint.webhooks import Webhook
from tests.server.harness import TOKENS, _listening_socket, make_store, serve_module

SECRET = "whsec-test-secret"
OPERATOR = {"Authorization": "Bearer desk-token"}


def build_ops_app(config: dict[str, Any]) -> Starlette:
    """``config``: ``store`` (a store spec), ``hooks`` (Webhook keyword arguments), ``lease``,
    ``metrics``, ``webhooks`` (False: send none from here)."""
    store = make_store(config["store"])
    hooks = [Webhook(**{"secret": SECRET, **hook}) for hook in config.get("hooks", [])]
    ai, _ = banking.build(store, webhooks=hooks)
    sender: bool | WebhookSender = False
    if config.get("webhooks", True):
        sender = WebhookSender(ai, lease=config.get("lease", 60.0), interval=0.5)
    return create_app(
        ai,
        auth=BearerTokens(TOKENS),
        operators={"desk"},
        metrics=config.get("metrics", False),
        webhooks=sender,
        feed_interval=config.get("feed_interval", 1.0),
        expiry_interval=None,
    )


@contextlib.contextmanager
def serve_ops_process(config: dict[str, Any]) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Serve ``build_ops_app(config)`` from a process of its own; yields its URL and the process."""
    with serve_module("tests.server.ops_harness", config) as served:
        yield served


async def until_up(base: str) -> None:
    """Wait until a server process accepts connections (it prints its URL before it listens)."""
    import httpx

    async with httpx.AsyncClient(timeout=5) as http:
        for _ in range(500):
            try:
                if (await http.get(base + "/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                await asyncio.sleep(0.02)
    raise AssertionError(f"{base} never answered")


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.body)
        return parsed

    @property
    def event_id(self) -> str:
        return self.headers["pausepoint-event-id"]


@dataclass
class Receiver:
    """A webhook receiver: ``POST /hook`` records each request; the first ``fail_first`` get a
    500, the first ``hang_first`` never get an answer."""

    fail_first: int = 0
    hang_first: int = 0
    received: list[Received] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def app(self) -> Starlette:
        async def hook(request: Request) -> Response:
            body = await request.body()
            with self._changed:
                self.received.append(Received(dict(request.headers), body))
                number = len(self.received)
                self._changed.notify_all()
            if number <= self.hang_first:
                await asyncio.Event().wait()
            if number <= self.hang_first + self.fail_first:
                return Response("not now", status_code=500)
            return Response("ok")

        return Starlette(routes=[Route("/hook", hook, methods=["POST"])])

    async def wait_for(self, count: int, max_wait: float = 60.0) -> list[Received]:
        """The first ``count`` requests, once they have come (a guard against a hang, not a timing)."""

        def wait() -> list[Received]:
            with self._changed:
                if not self._changed.wait_for(lambda: len(self.received) >= count, max_wait):
                    raise AssertionError(f"{len(self.received)} webhook requests came, not {count}")
                return list(self.received[:count])

        return await asyncio.to_thread(wait)


def run_forever(config: dict[str, Any]) -> None:
    sock = _listening_socket()
    print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)

    async def main() -> None:
        app = build_ops_app(config)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        await server.serve(sockets=[sock])

    asyncio.run(main())


if __name__ == "__main__":
    run_forever(json.loads(sys.argv[1]))
