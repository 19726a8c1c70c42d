"""Serving the examples over real HTTP on loopback: in a thread, or in a process of its own.

The app is built inside the server's own event loop (its stores belong to that loop). Tests
talk to it only over HTTP, and read the ledgers the example tools write to.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount

from examples import banking, shell
from pausepoint.server import AccessPolicy, BearerTokens, Limits, create_app
from pausepoint.stores import InMemorySessionStore, SessionStore
from tests.helpers import stop
from tests.server import lab
from tests.stores.backends import open_store

TOKENS = {"alice-token": "alice", "bob-token": "bob", "desk-token": "desk"}
ROOT = Path(__file__).resolve().parents[2]


def make_store(spec: dict[str, Any]) -> SessionStore:
    return InMemorySessionStore() if spec["backend"] == "memory" else open_store(spec)


def build_app(
    spec: dict[str, Any],
    *,
    ledger: list[str] | None = None,
    executed: list[dict[str, Any]] | None = None,
    limits: Limits | None = None,
    feed_interval: float = 0.2,
    policy: AccessPolicy | None = None,
    events: lab.LabEvents | None = None,
) -> Starlette:
    """The banking app at ``/bank``, the shell app at ``/shell`` and the lab at ``/lab``
    (``tests.server.lab``; its events also go to the file ``spec["events"]``, when given), all
    on the store ``spec``."""
    store = make_store(spec)
    bank_ai, _ = banking.build(store, ledger)
    shell_ai, _ = shell.build(store, executed)
    lab_ai = lab.build(store, events or lab.LabEvents(spec.get("events")))
    auth = BearerTokens(TOKENS)
    options: dict[str, Any] = {"auth": auth, "limits": limits, "feed_interval": feed_interval, "policy": policy}
    return Starlette(
        routes=[
            Mount("/bank", create_app(bank_ai, **options)),
            Mount("/shell", create_app(shell_ai, **options)),
            Mount("/lab", create_app(lab_ai, **options)),
        ]
    )


def _listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted connections inherit it
    sock.bind(("127.0.0.1", 0))
    # Listening before the URL is printed: a client that connects while the server is still
    # starting waits in the backlog instead of being refused (seen on a loaded machine).
    sock.listen(128)
    return sock


@contextlib.contextmanager
def serve_in_thread(factory: Callable[[], Starlette], *, http: str = "auto") -> Iterator[str]:
    """Serve ``factory()`` (built in the server's loop) on a free loopback port; yields the URL.
    ``http``: uvicorn's HTTP parser (``"auto"``: httptools when installed, as ``pausepoint serve``
    runs; ``"h11"``, ``"httptools"``)."""
    sock = _listening_socket()
    port = sock.getsockname()[1]
    holder: dict[str, uvicorn.Server] = {}
    ready = threading.Event()

    async def main() -> None:
        config = uvicorn.Config(factory(), http=http, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
        server = holder["server"] = uvicorn.Server(config)
        ready.set()
        await server.serve(sockets=[sock])

    thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    thread.start()
    ready.wait(10)
    server = holder["server"]
    for _ in range(500):
        if server.started:
            break
        threading.Event().wait(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@contextlib.contextmanager
def serve_in_process(spec: dict[str, Any]) -> Iterator[str]:
    """Serve the examples on ``spec`` from a process of its own; yields the URL."""
    with serve_module("tests.server.serve", spec) as (url, _):
        yield url


@contextlib.contextmanager
def serve_module(module: str, config: dict[str, Any]) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Run ``python -m module '<config>'``, a server that prints its URL once it listens; yields
    the URL and the process, and stops it at the end."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", module, json.dumps(config)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("http://"):
            raise RuntimeError(f"the server process did not start: {line!r}")
        yield line.strip(), proc
    finally:
        stop(proc)


def run_forever(spec: dict[str, Any]) -> None:
    """The server process: print the URL, then serve until terminated."""
    sock = _listening_socket()
    print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)

    async def main() -> None:
        config = uvicorn.Config(build_app(spec), log_level="warning", lifespan="off")
        await uvicorn.Server(config).serve(sockets=[sock])

    asyncio.run(main())
