"""The feed across processes: how soon a pause made through one server appears in another's feed.

    python -m benchmarks.feed [--pauses 50] [--backends sqlite,postgres,redis]

Two server processes (the banking example) share one store; a client reads server B's SSE
feed while pauses are made, one at a time, through server A. For each pause it measures the
time from the moment A's reply arrived (the pause is written: the append committed before A
answered) to the moment B's feed delivered the pause event. PostgreSQL (``LISTEN/NOTIFY``) and
Redis (pub/sub) wake B at once; SQLite is checked every 50 ms. PostgreSQL and Redis come from
``PAUSEPOINT_TEST_POSTGRES_URL`` / ``PAUSEPOINT_TEST_REDIS_URL`` (a fresh schema / key prefix,
removed at the end); a backend without its URL is skipped. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from ._places import drop, store_at
from ._report import Table, note

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-token"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


def serve(spec: dict[str, Any]) -> None:
    """A server process on the store ``spec``: prints its URL, then serves."""
    import uvicorn

    from examples import banking
    from pausepoint.server import BearerTokens, create_app

    sock = socket.socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)

    async def main() -> None:
        ai, _ = banking.build(store_at(spec))
        app = create_app(ai, auth=BearerTokens({TOKEN: "bench"}), request_log=False, expiry_interval=None)
        config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False, timeout_graceful_shutdown=2)
        await uvicorn.Server(config).serve(sockets=[sock])

    asyncio.run(main())


def start(spec: dict[str, Any]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.feed", "--serve", json.dumps(spec)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


async def up(http: httpx.AsyncClient, base: str) -> None:
    for _ in range(1000):
        try:
            if (await http.get(base + "/healthz")).status_code == 200:
                return
        except httpx.TransportError:
            await asyncio.sleep(0.02)
    raise RuntimeError(f"{base} did not start")


async def measure(spec: dict[str, Any], pauses: int) -> tuple[list[float], list[float]]:
    """Milliseconds from A's reply to B's feed event (negative: the event came first), and from
    the request to A, per pause."""
    processes = [start(spec), start(spec)]
    (_, a), (_, b) = processes
    seen: dict[str, float] = {}
    arrived = asyncio.Condition()
    connected = asyncio.Event()

    async def read() -> None:
        async with httpx.AsyncClient(timeout=None) as http, http.stream("GET", b + "/v1/feed", headers=HEADERS) as r:
            name = ""
            async for line in r.aiter_lines():
                if line.startswith(": connected"):
                    connected.set()
                elif line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:") and name == "pause":
                    async with arrived:
                        seen[json.loads(line[5:])["session_id"]] = time.perf_counter()
                        arrived.notify_all()

    try:
        async with httpx.AsyncClient(timeout=60, headers=HEADERS) as http:
            await up(http, a)
            await up(http, b)
            reader = asyncio.create_task(read())
            await asyncio.wait_for(connected.wait(), 30)
            latencies, totals = [], []
            for i in range(pauses):
                sent = time.perf_counter()
                reply = await http.post(
                    a + "/v1/agents/bankingAgent/sessions", json={"message": f"Transfer ${i} to x."}
                )
                replied = time.perf_counter()
                session = reply.json()["session_id"]
                async with arrived:
                    await asyncio.wait_for(arrived.wait_for(lambda s=session: s in seen), 30)
                latencies.append((seen[session] - replied) * 1000)
                totals.append((seen[session] - sent) * 1000)
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            return latencies, totals
    finally:
        for proc, _ in processes:
            proc.terminate()
            proc.wait(10)


async def run(pauses: int, backends: list[str]) -> None:
    table = Table(
        f"Feed across two server processes: pause made through A, seen in B's feed ({pauses} pauses; ms)",
        [("backend", 10), ("wakes by", 14), ("p50", 8), ("p95", 8), ("max", 8), ("req p50", 8), ("req max", 8)],
    )
    table.header()
    tag = uuid.uuid4().hex[:10]
    with tempfile.TemporaryDirectory() as directory:
        for backend in backends:
            if backend == "sqlite":
                spec: dict[str, Any] = {"backend": "sqlite", "path": str(Path(directory) / "feed.db")}
                wakes = "50 ms check"
            elif backend == "postgres":
                url = os.environ.get("PAUSEPOINT_TEST_POSTGRES_URL")
                spec = {"backend": "postgres", "url": url, "schema": f"ppbench_{tag}"}
                wakes = "LISTEN/NOTIFY"
            else:
                url = os.environ.get("PAUSEPOINT_TEST_REDIS_URL")
                spec = {"backend": "redis", "url": url, "prefix": f"ppbench:{tag}:"}
                wakes = "pub/sub"
            if backend != "sqlite" and not url:
                table.error(backend, f"skipped: PAUSEPOINT_TEST_{backend.upper()}_URL is not set")
                continue
            try:
                found, totals = await measure(spec, pauses)
            finally:
                await drop(spec)
            ordered = sorted(found)
            p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
            table.row(
                backend, wakes, f"{statistics.median(found):.1f}", f"{p95:.1f}", f"{max(found):.1f}",
                f"{statistics.median(totals):.1f}", f"{max(totals):.1f}",
            )  # fmt: skip
    note("p50/p95/max: from A's reply (the pause is committed by then) to B's SSE event; negative: B's feed")
    note("had the event before A's reply reached the client. req: from sending the request to A. Goal: 100 ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pauses", type=int, default=50, help="pauses measured per backend (default 50)")
    parser.add_argument("--backends", default="sqlite,postgres,redis", help="comma-separated backends")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(json.loads(args.serve))
        return
    asyncio.run(run(args.pauses, args.backends.split(",")))


if __name__ == "__main__":
    main()
