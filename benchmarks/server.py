"""The server under load: full cycles over loopback HTTP, and memory per paused session.

    python -m benchmarks.server [--cycles 400] [--paused 10000]

One server process (uvicorn, the banking example on a SQLite file) is started on a free
loopback port. A full cycle is two requests through the REST API: send (the transfer pauses
for approval) and respond (the tool runs, the model answers). With 1, 8 and 64 concurrent
clients it reports cycles per second and p50/p99 latency per request; then it pauses
``--paused`` sessions and reports the server's resident memory per paused session.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

TOKEN = "bench-token"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
# httpx writes a request's headers and body separately: without TCP_NODELAY, Nagle's algorithm
# holds the body until the server's delayed ACK (~40 ms), which would be all we measured.
NODELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]


def client(connections: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    transport = httpx.AsyncHTTPTransport(limits=limits, socket_options=NODELAY)
    return httpx.AsyncClient(headers=HEADERS, transport=transport, timeout=60)


def serve(db: str) -> None:
    """The server process: the banking example on ``db``; prints its URL, then serves."""
    import uvicorn

    from examples import banking
    from pausepoint.server import BearerTokens, create_app
    from pausepoint.stores import SqliteSessionStore

    sock = socket.socket()
    sock.setsockopt(*NODELAY[0])  # accepted connections inherit it (see NODELAY)
    sock.bind(("127.0.0.1", 0))
    print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)

    async def main() -> None:
        ai, _ = banking.build(SqliteSessionStore(db, synchronous=os.environ.get("I18_SYNC", "FULL")))
        app = create_app(ai, auth=BearerTokens({TOKEN: "bench"}))
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        await uvicorn.Server(config).serve(sockets=[sock])

    asyncio.run(main())


async def cycle(http: httpx.AsyncClient, url: str, latencies: list[float]) -> None:
    start = time.perf_counter()
    reply = await http.post(f"{url}/v1/agents/bankingAgent/sessions", json={"message": "Transfer $5 to bob."})
    mid = time.perf_counter()
    body = reply.json()
    pause = body["interrupts"][0]
    path = f"{url}/v1/agents/bankingAgent/sessions/{body['session_id']}/interrupts/{pause['ref']}/respond"
    reply = await http.post(path, json={"output": {"approved": True}})
    end = time.perf_counter()
    assert reply.json()["finish_reason"] == "stop", reply.text
    latencies += [mid - start, end - mid]


async def load(url: str, clients: int, cycles: int) -> tuple[float, float, float]:
    latencies: list[float] = []
    async with client(clients) as http:
        await cycle(http, url, [])  # warm up

        async def worker(n: int) -> None:
            for _ in range(n):
                await cycle(http, url, latencies)

        start = time.perf_counter()
        share = [cycles // clients + (i < cycles % clients) for i in range(clients)]
        await asyncio.gather(*(worker(n) for n in share))
        elapsed = time.perf_counter() - start
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return cycles / elapsed, statistics.median(ordered) * 1000, p99 * 1000


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


async def pause_many(url: str, count: int) -> None:
    async with client(32) as http:
        queue = iter(range(count))

        async def worker() -> None:
            for _ in queue:
                reply = await http.post(f"{url}/v1/agents/bankingAgent/sessions", json={"message": "Transfer $1 to x."})
                assert reply.json()["finish_reason"] == "interrupted"

        await asyncio.gather(*(worker() for _ in range(32)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=400, help="full cycles per concurrency level")
    parser.add_argument("--paused", type=int, default=10_000, help="paused sessions for the memory figure")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    with tempfile.TemporaryDirectory() as folder:
        root = Path(__file__).resolve().parents[1]
        proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.server", "--serve", str(Path(folder) / "bench.db")],
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root)},
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            time.sleep(0.5)
            rows = []
            for clients in (1, 8, 64):
                rate, p50, p99 = asyncio.run(load(url, clients, max(args.cycles, clients)))
                rows.append((clients, rate, p50, p99))
            before = rss(proc.pid)
            asyncio.run(pause_many(url, args.paused))
            after = rss(proc.pid)
        finally:
            proc.terminate()
            proc.wait(10)
    print("server: banking example, SQLite, one uvicorn process, loopback HTTP (2 requests per cycle)")
    print(f"{'clients':>8} {'cycles/s':>10} {'p50 ms/req':>11} {'p99 ms/req':>11}")
    for clients, rate, p50, p99 in rows:
        print(f"{clients:>8} {rate:>10.1f} {p50:>11.2f} {p99:>11.2f}")
    per = (after - before) / max(args.paused, 1)
    print(f"memory: {args.paused} paused sessions, server RSS {before / 2**20:.1f} -> {after / 2**20:.1f} MiB, "
          f"{per / 1024:.2f} KiB per paused session")  # fmt: skip


if __name__ == "__main__":
    main()
