"""The proxied deployment's figures: approval cycles through nginx against the same servers
reached directly, on one PostgreSQL and on one Redis, with every side effect counted.

    .venv/bin/python -m tests.deploy.bench                      # ~3 min; --seconds 10 --rounds 5 --clients 64
    .venv/bin/python -m tests.deploy.bench --stores redis --processes 3

The deployment is the tests' (``tests.deploy.proxy``): ``pausepoint serve`` processes started by
docs/deploy.md's unit, behind nginx running its site. The load is ``wrk`` (Debian's ``wrk``)
running ``cycle.lua`` (two threads, ``--clients`` connections): a message to a session it names
(the transfer pauses), then the approval on another connection; one approval in ten sent twice.
For each store, one server and then ``--processes`` servers, each measured two ways, in
alternating rounds (direct, nginx, direct, ...: the machine's other work moves both alike):

- ``direct``: wrk's threads straight to the servers, each thread on one (a session's two
  requests on one server: what a client that knows the servers would do);
- ``nginx``: wrk to nginx, which spreads the requests round-robin (``crossed``: the sessions
  whose approval reached another server than their message, read from nginx's access log).

A row shows the median of its rounds' rates and latencies. Counted, not assumed, over all of a
row's rounds: the approvals the store holds answered (``answered``: its sessions that
paused and whose pause is no longer pending), the transfers in the ledger the
servers share (one line per transfer, per account: ``made``; must equal ``answered``),
accounts with more than one transfer (``twice``: must be 0), and the duplicate approvals
refused. Figures, not assertions: the machine's other work moves them (the load average is
printed).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.stores.backends import Backend, PostgresBackend, RedisBackend

from .proxy import ALICE, TOKENS, Deployment

LUA = Path(__file__).with_name("cycle.lua")
WAYS = ("direct", "nginx")
URLS = {"postgres": "PAUSEPOINT_TEST_POSTGRES_URL", "redis": "PAUSEPOINT_TEST_REDIS_URL"}
SESSIONS = "/v1/agents/bankingAgent/sessions"


@dataclass
class Row:
    """One load window and what it left in the store and the ledger."""

    store: str
    processes: int
    way: str
    rate: float
    p50_ms: float
    p99_ms: float
    failures: int
    crossed: float | None
    answered: int
    made: int
    twice: int
    dups: int
    refused: int
    error: str
    server_cpu_ms: float = 0.0  # the servers' CPU per cycle
    nginx_cpu_ms: float = 0.0  # nginx's worker's CPU per cycle

    @property
    def once(self) -> bool:
        """Every approval answered made one transfer, none two, nothing failed, and no duplicate was
        taken (a duplicate sent as the run ended may have no reply: ``refused`` can lag ``dups``)."""
        return self.made == self.answered and self.twice == 0 and self.failures == 0


def wrk(url: str, run: str, seconds: float, clients: int, direct: list[int] | None) -> dict[str, Any]:
    """wrk's RESULT line (and LAST_ERROR) for ``seconds`` of ``cycle.lua`` against ``url``."""
    env = {**os.environ, "PP_BENCH_RUN": run, "PP_BENCH_TOKEN": TOKENS["alice"],
           "PP_BENCH_DIRECT": ",".join(map(str, direct or []))}  # fmt: skip
    command = ["wrk", "-t2", f"-c{clients}", f"-d{max(1, round(seconds))}s", "--timeout", "10s", "-s", str(LUA), url]
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=False).stdout
    found: dict[str, Any] = {"error": ""}
    for line in out.splitlines():
        if line.startswith("RESULT "):
            found |= {k: int(v) for k, v in (item.split("=") for item in line.split()[1:])}
        elif line.startswith("LAST_ERROR "):
            found["error"] = line[len("LAST_ERROR ") :]
    if "cycles" not in found:
        raise RuntimeError(f"wrk gave no result:\n{out}")
    return found


async def answered(url: str, run: str) -> int:
    """How many of the run's sessions paused and had their pause answered (the store's view)."""
    counts = Counter[bool]()
    async with httpx.AsyncClient(timeout=60, headers=ALICE) as http:
        for pending in (False, True):
            offset = 0
            while True:
                params: dict[str, Any] = {"limit": 500, "offset": offset}
                if pending:
                    params["pending"] = "true"
                page = (await http.get(url + SESSIONS, params=params)).json()["sessions"]
                counts[pending] += sum(1 for s in page if s["session_id"].startswith(run + "-"))
                offset += len(page)
                if len(page) < 500:
                    break
    return counts[False] - counts[True]


def ledger(path: Path, run: str) -> Counter[str]:
    """Transfers per account of the run, by every server."""
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter(a for line in lines if (a := line.rsplit("->", 1)[1]).startswith(f"b{run}x"))


def crossed(deployed: Deployment, run: str) -> float:
    """The share of the run's answered sessions whose approval reached another server than their message."""
    sent: dict[str, str] = {}
    approved: dict[str, str] = {}
    for request in deployed.served():
        parts = request.path.split("/")
        if len(parts) > 5 and parts[5].startswith(run + "-") and request.status == 200:
            (sent if parts[-1] == "messages" else approved)[parts[5]] = request.upstream
    both = [s for s in approved if s in sent]
    return sum(sent[s] != approved[s] for s in both) / max(len(both), 1)


def rounds(deployed: Deployment, store: str, args: argparse.Namespace) -> list[Row]:
    """``direct`` and ``nginx`` in alternating rounds (the machine's other work moves both alike),
    after a warm-up of each; each way's row has the median of its rounds' rates and latencies."""
    for way in WAYS:
        warm(deployed, way, args)
    measured: dict[str, list[Row]] = {way: [] for way in WAYS}
    for _ in range(args.rounds):
        for way in WAYS:
            measured[way].append(measure(deployed, store, way, args))
    return [median_row(measured[way]) for way in WAYS]


def median_row(rows: list[Row]) -> Row:
    """One row for a way: the median rate and latencies of its rounds; every count summed."""

    def middle(values: list[float]) -> float:
        return statistics.median(values)

    return Row(
        rows[0].store, rows[0].processes, rows[0].way, middle([r.rate for r in rows]), middle([r.p50_ms for r in rows]),
        middle([r.p99_ms for r in rows]), sum(r.failures for r in rows),
        None if rows[0].crossed is None else middle([r.crossed or 0.0 for r in rows]),
        sum(r.answered for r in rows), sum(r.made for r in rows), sum(r.twice for r in rows),
        sum(r.dups for r in rows), sum(r.refused for r in rows), next((r.error for r in rows if r.error), ""),
        middle([r.server_cpu_ms for r in rows]), middle([r.nginx_cpu_ms for r in rows]),
    )  # fmt: skip


def target(deployed: Deployment, way: str) -> tuple[str, list[int] | None]:
    return (deployed.url, None) if way == "nginx" else (deployed.direct[0], deployed.ports)


def warm(deployed: Deployment, way: str, args: argparse.Namespace) -> None:
    """A second of load: connections, the servers' caches, wrk's Lua JIT."""
    url, direct = target(deployed, way)
    wrk(url, uuid.uuid4().hex[:8], 1, args.clients, direct)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu(deployed: Deployment) -> tuple[float, float]:
    """CPU seconds so far of the servers, and of nginx's worker (the master's children)."""
    servers = sum(cpu_seconds(p.pid) for p in deployed.servers if p is not None)
    assert deployed.nginx is not None
    master = deployed.nginx.pid
    workers = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return servers, sum(cpu_seconds(int(pid)) for pid in workers)


def measure(deployed: Deployment, store: str, way: str, args: argparse.Namespace) -> Row:
    url, direct = target(deployed, way)
    run = uuid.uuid4().hex[:8]
    before = cpu(deployed)
    result = wrk(url, run, args.seconds, args.clients, direct)
    spent = [after - was for after, was in zip(cpu(deployed), before, strict=True)]
    time.sleep(1)  # the approvals still in flight when wrk stopped finish (their turns run on)
    made = ledger(deployed.ledger, run)
    return Row(
        store, deployed.processes, way, result["cycles"] / (result["duration_us"] / 1e6), result["p50_us"] / 1000,
        result["p99_us"] / 1000, result["failures"] + result["socket_errors"],
        crossed(deployed, run) if way == "nginx" else None, asyncio.run(answered(deployed.url, run)),
        sum(made.values()), sum(1 for n in made.values() if n > 1), result["dups"], result["refused"], result["error"],
        *(1000 * seconds / max(result["cycles"], 1) for seconds in spent),
    )  # fmt: skip


def backend(store: str) -> Backend:
    url = os.environ[URLS[store]]
    return PostgresBackend(url) if store == "postgres" else RedisBackend(url)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5, help="seconds per round and way (5)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each direct then through nginx (3)")
    parser.add_argument("--clients", type=int, default=32, help="wrk's connections (32)")
    parser.add_argument("--processes", type=int, default=2, help="servers behind nginx, beside one (2)")
    parser.add_argument("--stores", default="postgres,redis", help="postgres,redis")
    args = parser.parse_args()
    missing = [tool for tool in ("wrk", "nginx") if not (shutil.which(tool) or os.access(f"/usr/sbin/{tool}", os.X_OK))]
    stores = [s for s in args.stores.split(",") if os.environ.get(URLS[s])]
    if missing or not stores:
        print(f"needs {' and '.join(missing) or 'PAUSEPOINT_TEST_POSTGRES_URL / _REDIS_URL'} "
              "(apt-get install wrk nginx; source .ci/services.sh && start_services)")  # fmt: skip
        return 2
    print(f"proxied deployment: the banking cycle through nginx ({nginx_version()}) and direct, wrk -t2 "
          f"-c{args.clients}, {args.rounds} rounds of {args.seconds:g} s a way, {os.cpu_count()} CPUs; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
    print(f"{'store':>8} {'procs':>5} {'way':>6} {'cycles/s':>9} {'÷direct':>7} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'srv cpu':>7} {'nginx':>6} {'crossed':>7} {'answered':>8} {'made':>6} {'twice':>5} {'dups refused':>12} "
          f"{'once':>4}")  # fmt: skip
    ok = True
    with tempfile.TemporaryDirectory(prefix="pausepoint-proxy-bench-") as folder:
        for store in stores:
            for processes in sorted({1, args.processes}):
                place = backend(store)
                try:
                    with Deployment(place, Path(folder) / f"{store}-{processes}", processes) as deployed:
                        rows = rounds(deployed, store, args)
                finally:
                    asyncio.run(place.cleanup())
                for row in rows:
                    ok = ok and row.once
                    print(f"{row.store:>8} {row.processes:>5} {row.way:>6} {row.rate:>9.1f} "
                          f"{row.rate / rows[0].rate:>6.2f}x {row.p50_ms:>7.2f} {row.p99_ms:>7.2f} "
                          f"{row.server_cpu_ms:>7.2f} {row.nginx_cpu_ms:>6.2f} "
                          f"{'' if row.crossed is None else f'{row.crossed:.0%}':>7} {row.answered:>8} {row.made:>6} "
                          f"{row.twice:>5} {f'{row.refused}/{row.dups}':>12} {'yes' if row.once else 'NO':>4}"
                          + (f"  last error: {row.error}" if row.error else ""))  # fmt: skip
    print("  cycles/s, p50/p99 (per request; a cycle is two): the median of the rounds; counts: all rounds summed")
    print("  srv cpu, nginx: CPU ms per cycle of the servers and of nginx's worker (the database's not counted)")
    print("  crossed: answered sessions whose approval reached another server than their message")
    print("  answered: approvals the store holds answered; made: transfers in the ledger (must equal answered)")
    print("  twice: accounts with two transfers (must be 0); dups refused: second approvals refused / sent (one")
    print("  sent as a round ended may have had no reply); once: made = answered, twice = 0, no failed request")
    print(f"  reproduce: .venv/bin/python -m tests.deploy.bench --seconds {args.seconds:g} --rounds {args.rounds} "
          f"--clients {args.clients} --processes {args.processes} --stores {','.join(stores)}")  # fmt: skip
    return 0 if ok else 1


def nginx_version() -> str:
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    found = subprocess.run([binary, "-v"], capture_output=True, text=True, check=False).stderr.strip()
    return found.rpartition("/")[2] or "nginx"


if __name__ == "__main__":
    sys.exit(main())
