"""The server under load: full approval cycles over loopback HTTP, one or several processes.

    python -m benchmarks.server                     # every table, about four minutes
    python -m benchmarks.server --seconds 10 --long 60 --paused 10000   # the issue's long run

A full cycle is two requests through the REST API: send (the transfer pauses for approval) and
respond (the tool runs, the model answers). The load comes from ``wrk`` (the compiled HTTP load
tool, Debian's ``wrk`` package) running ``benchmarks/cycle.lua``; with one server process the
server is pinned to CPU 0 and wrk to CPU 1, so the generator never competes with the server for
its core (wrk's own CPU use is printed beside each row). Without wrk, ``--generator python``
(httpx, pinned the same way) is used and said so; on a 2-core machine it is the bottleneck.

Tables (S5 runs first, so that S1 can divide by the reference's rate measured in the same run; S6
after S1, so that it can show S1's CPU per cycle):

- [S5] the Genkit wire against the reference: the reference's own server (``anchor_app.py``'s
  banking agent served by genkit-fastapi 0.12.0 under uvicorn, launched by ``_genkit_server.py``
  in the genkit venv, with its in-memory and its file store) and pausepoint's agent endpoint (in
  memory and SQLite ``FULL``), all driven by ``genkit_cycle.lua`` (send, then resume with the
  approval on the returned snapshot) at 1 and 8 clients: cycles/s, p50/p99, CPU per cycle, and
  pausepoint ÷ the reference at equal store role beside the SPEC's 10x. Skipped, saying why,
  without wrk or when the genkit venv cannot be made (``--genkit-python`` /
  ``PAUSEPOINT_GENKIT_PYTHON``, else the reference's ``setup.sh``);
- [S1] one process on SQLite (``synchronous=FULL``, the default, and ``NORMAL``) at 1, 8 and 64
  clients: cycles/s, p50/p99 per request, the server's CPU time per cycle, its resident memory,
  and the ratio to the reference's rate (S5's best when S5 ran first, else the SPEC's constant
  from another machine, labelled so); then the HTTP floor (``bare``): the same requests answered
  by a bare Starlette app under the same uvicorn (``_bare_app``), so the table shows what the
  HTTP stack costs a cycle and what pausepoint adds to it;
- [S6] where that CPU goes (``layers``): the same cycle in one process, through the Python API,
  through pausepoint's server app as ASGI calls, and through the bare app, so the server's CPU
  per cycle splits into the runtime and store, pausepoint's server layer, and HTTP;
- [S2] no decay: one server under 8 clients for ``--long`` seconds in back-to-back windows of
  10 s, the first window against the last;
- [S3] memory per paused session: ``--paused`` sessions left paused on one server;
- [S4] scale out: 1, 2 and 4 processes, each listening on the same port (``SO_REUSEPORT``: the
  kernel spreads the connections; a session's send and its approval often reach different
  processes) on one
  PostgreSQL and on one Redis (``PAUSEPOINT_TEST_POSTGRES_URL`` / ``_REDIS_URL`` or
  ``--postgres`` / ``--redis``; skipped when unset). Exactly once is counted, not assumed: each
  process counts the transfers its tool made and the approvals it answered, one cycle in ten
  sends its approval twice (the second must be refused), and the table compares the sums.

Every table ends with the command that reproduces it. Figures depend on the machine's other
work: the load average is printed with each table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ._inherited import LOOPS, loop_in_use, run_on, serve_inherited
from ._reference import DEFAULT_DIR, copy_reference, reference_python

TOKEN = "bench-token"
MESSAGE = {"message": "Transfer $5 to bob."}  # the banking model asks for approval, then transfers
APPROVAL = {"output": {"approved": True}}  # the answer to its pause
SESSIONS = "/v1/agents/bankingAgent/sessions"  # a send starts a session here; its pause is answered below it
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
ROOT = Path(__file__).resolve().parents[1]
LUA = Path(__file__).with_name("cycle.lua")
SYNC_STORES = {"FULL": "sqlite", "NORMAL": "sqlite-normal"}  # [S1]'s rows: the store each serves
GENKIT_LUA = Path(__file__).with_name("genkit_cycle.lua")  # [S5]: the Genkit wire's cycle, for both servers
GENKIT_SERVER = Path(__file__).with_name("_genkit_server.py")  # [S5]: the reference's server, in its own venv
TARGET_RATE = 1300  # SPEC section 8: full cycles/s per process on SQLite
TARGET_P99_MS = 20.0  # ... with p99 per request at 8 clients
REFERENCE_RATE = (113, 150)  # the reference's genkit-fastapi server, same cycle (SPEC section 8), another machine
REFERENCE_FACTOR = 10  # SPEC section 8: ≥ 10x the reference's server
# httpx writes a request's headers and body separately: without TCP_NODELAY, Nagle's algorithm
# holds the body until the server's delayed ACK (~40 ms), which would be all we measured.
NODELAY = (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


# -- the server process -----------------------------------------------------------------------


def make_store(kind: str, target: str) -> Any:
    """``memory``, ``sqlite`` / ``sqlite-normal`` (a file), ``postgres`` (URL#schema), ``redis`` (URL#prefix)."""
    if kind == "memory":
        from pausepoint.stores import InMemorySessionStore

        return InMemorySessionStore()
    if kind in ("sqlite", "sqlite-normal"):
        from pausepoint.stores import SqliteSessionStore

        return SqliteSessionStore(target, synchronous="FULL" if kind == "sqlite" else "NORMAL")
    url, _, place = target.partition("#")
    if kind == "postgres":
        from pausepoint.stores.postgres import PostgresSessionStore

        return PostgresSessionStore(url, schema=place)
    if kind == "redis":
        from pausepoint.stores.redis import RedisSessionStore

        return RedisSessionStore(url, prefix=place)
    raise ValueError(f"unknown store {kind!r}")


class Counted:
    """ASGI wrapper of the bench server: names the process in an ``x-bench-pid`` header and
    counts the approvals it answered (respond requests answered 200)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.answered = 0
        self.pid = str(os.getpid()).encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        approval = scope["path"].endswith("/respond")

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-bench-pid", self.pid)]
                if approval and message["status"] == 200:
                    self.answered += 1
            await send(message)

        await self.app(scope, receive, sending)


def serve(fd: int, store_kind: str, target: str, loop: str) -> None:
    """One server process on the inherited listening socket ``fd``; prints ``ready``, serves
    until SIGTERM, then prints the transfers its tool made and the approvals it answered.
    ``store_kind`` ``bare`` serves [S1]'s HTTP floor instead of pausepoint (``_bare_app``)."""
    from examples import banking
    from pausepoint.cli._serving import tune_garbage_collector
    from pausepoint.server import BearerTokens, create_app

    from ._bare_app import bare_app

    sock = socket.socket(fileno=fd)
    ledger: list[str] = []

    async def main() -> None:
        if store_kind == "bare":  # [S1]'s HTTP floor: no runtime, no store (``_bare_app``)
            app = Counted(bare_app())
        else:
            store = make_store(store_kind, target)
            ai, _ = banking.build(store, ledger)
            app = Counted(create_app(ai, auth=BearerTokens({TOKEN: "bench"}), console=False))
        tune_garbage_collector()  # as ``pausepoint serve`` does before serving
        await serve_inherited(app, sock, lambda: f"ran={len(ledger)} answered={app.answered}")

    run_on(loop, main())


# -- the servers, seen from the driver --------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


@dataclass
class Servers:
    """``processes`` server processes listening on one free loopback port."""

    store: str
    target: str
    processes: int = 1
    loop: str = "auto"
    pin: bool = False
    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    ran: int = 0
    answered: int = 0

    def __enter__(self) -> Servers:
        # One listening socket per process, all on one port (SO_REUSEPORT): the kernel spreads
        # new connections evenly over them, as a load balancer in front of N machines would.
        sockets: list[socket.socket] = []
        port = 0
        for _ in range(self.processes):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.setsockopt(*NODELAY)  # accepted connections inherit it (see NODELAY)
            sock.bind(("127.0.0.1", port))
            sock.listen(2048)
            port = sock.getsockname()[1]
            sockets.append(sock)
        self.url = f"http://127.0.0.1:{port}"
        for sock in sockets:
            self.procs.append(
                subprocess.Popen(
                    self.command(sock.fileno()),
                    cwd=ROOT,
                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                    stdout=subprocess.PIPE,
                    text=True,
                    pass_fds=(sock.fileno(),),
                )
            )
            sock.close()
        for proc in self.procs:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            if line != "ready":
                self.__exit__()
                raise RuntimeError(f"server did not start ({line!r})")
            if self.pin:  # every thread the server has started so far, not only its main one
                for task in os.listdir(f"/proc/{proc.pid}/task"):
                    os.sched_setaffinity(int(task), {0})
        return self

    def command(self, fd: int) -> list[str]:
        """The command line of one server process serving the listening socket ``fd``."""
        command = [sys.executable, "-m", "benchmarks.server", "--store", self.store, "--loop", self.loop]
        return [*command, "--serve", str(fd), "--target", self.target]

    def __exit__(self, *_: Any) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            out, _ = proc.communicate(timeout=30)
            for word in out.split():
                key, _, value = word.partition("=")
                if key == "ran":
                    self.ran += int(value)
                elif key == "answered":
                    self.answered += int(value)

    def cpu(self) -> float:
        return sum(cpu_seconds(p.pid) for p in self.procs)

    def rss(self) -> int:
        return sum(rss(p.pid) for p in self.procs)


@dataclass
class ReferenceServer(Servers):
    """The reference's genkit-fastapi server (``_genkit_server.py``) under the genkit venv's
    ``python``, with ``anchor_app`` from the reference folder copy ``reference``; ``store`` is
    ``memory`` or ``file`` (its files in the folder ``target``)."""

    python: str = ""
    reference: str = ""

    def command(self, fd: int) -> list[str]:
        launcher = str(GENKIT_SERVER)
        return [self.python, launcher, "--reference", self.reference, "--store", self.store, "--files", self.target,
                "--fd", str(fd), "--loop", self.loop]  # fmt: skip


# -- the load ----------------------------------------------------------------------------------


@dataclass
class Run:
    """One load window: what the generator saw and what the servers spent."""

    clients: int
    seconds: float
    cycles: int
    failures: int
    refused: int
    crossed: int
    p50_ms: float
    p99_ms: float
    server_cpu: float
    generator_cpu: float
    error: str = ""

    @property
    def rate(self) -> float:
        return self.cycles / self.seconds

    @property
    def cpu_ms_per_cycle(self) -> float:
        return self.server_cpu / max(self.cycles, 1) * 1000


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wrk(servers: Servers, clients: int, seconds: float, pin: bool, script: Path = LUA, *script_args: str) -> Run:
    """``clients`` connections on one wrk thread for ``seconds`` (wrk pinned to CPU 1 if ``pin``),
    running ``script`` with ``script_args`` (after wrk's ``--``)."""
    duration = f"-d{max(1, round(seconds))}s"
    command = ["wrk", "-t1", f"-c{clients}", duration, "--timeout", "10s", "-s", str(script), servers.url]
    if script_args:
        command += ["--", *script_args]
    if pin:
        command = ["taskset", "-c", "1", *command]
    cpu, gen = servers.cpu(), children_cpu()
    out = subprocess.run(command, capture_output=True, text=True, check=False).stdout
    cpu, gen = servers.cpu() - cpu, children_cpu() - gen
    values: dict[str, int] = {}
    error = ""
    for line in out.splitlines():
        if line.startswith("RESULT "):
            values = {k: int(v) for k, v in (item.split("=") for item in line.split()[1:])}
        elif line.startswith("LAST_ERROR "):
            error = line[len("LAST_ERROR ") :]
    if not values:
        raise RuntimeError(f"wrk gave no result:\n{out}")
    return Run(
        clients,
        values["duration_us"] / 1e6,
        values["cycles"],
        values["failures"] + values["socket_errors"],
        values["refused"],
        values["crossed"],
        values["p50_us"] / 1000,
        values["p99_us"] / 1000,
        cpu,
        gen,
        error,
    )


def python_load(servers: Servers, clients: int, seconds: float, pin: bool) -> Run:
    """The same cycle from httpx in this process (pinned to CPU 1 if ``pin``)."""
    mask = os.sched_getaffinity(0)
    if pin:
        os.sched_setaffinity(0, {1})
    latencies: list[float] = []
    counts = {"cycles": 0, "failures": 0}

    async def main() -> float:
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
        transport = httpx.AsyncHTTPTransport(limits=limits, socket_options=[NODELAY])
        async with httpx.AsyncClient(headers=HEADERS, transport=transport, timeout=60) as http:
            start = time.perf_counter()
            end = start + seconds

            async def worker() -> None:
                while time.perf_counter() < end:
                    t0 = time.perf_counter()
                    reply = await http.post(servers.url + SESSIONS, json=MESSAGE)
                    t1 = time.perf_counter()
                    body = reply.json()
                    if reply.status_code != 200 or not body.get("interrupts"):
                        counts["failures"] += 1
                        continue
                    path = f"{SESSIONS}/{body['session_id']}/interrupts/{body['interrupts'][0]['ref']}/respond"
                    reply = await http.post(servers.url + path, json=APPROVAL)
                    latencies.extend((t1 - t0, time.perf_counter() - t1))
                    counts["cycles" if reply.status_code == 200 else "failures"] += 1

            await asyncio.gather(*(worker() for _ in range(clients)))
            return time.perf_counter() - start

    cpu, gen = servers.cpu(), time.process_time()
    try:
        elapsed = asyncio.run(main())
    finally:
        os.sched_setaffinity(0, mask)
    cpu, gen = servers.cpu() - cpu, time.process_time() - gen
    ordered = sorted(latencies) or [0.0]
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return Run(clients, elapsed, counts["cycles"], counts["failures"], 0, 0,
               statistics.median(ordered) * 1000, p99 * 1000, cpu, gen)  # fmt: skip


def load(args: argparse.Namespace, servers: Servers, clients: int, seconds: float) -> Run:
    pin = servers.pin
    if args.generator == "wrk":
        return wrk(servers, clients, seconds, pin)
    return python_load(servers, clients, seconds, pin)


# -- the tables --------------------------------------------------------------------------------


def ratio(value: float, target: float) -> str:
    return f"{value / target:.2f}x"


def reproduce(args: argparse.Namespace, *extra: str) -> str:
    parts = ["python -m benchmarks.server", f"--generator {args.generator}", *extra]
    return "  reproduce: " + " ".join(parts)


def table_sqlite(args: argparse.Namespace, folder: str) -> bool:
    print(f"\n[S1] one server process on SQLite, {args.seconds:g} s per row, generator {args.generator}"
          f"{' (server on CPU 0, generator on CPU 1)' if args.pin else ''}; load average {load_average()}")  # fmt: skip
    measured = args.reference_best  # (rate, where) from [S5] when it ran first in this run
    reference = measured[0] if measured else float(REFERENCE_RATE[1])
    head = f"{'synchronous':>11} {'clients':>7} {'cycles/s':>9} {'p50 ms':>7} {'p99 ms':>7} {'cpu ms/cyc':>10} "
    print(head + f"{'gen cpu':>7} {'RSS MiB':>7} {'÷1300':>6} {f'÷ref {reference:.0f}':>8} {'fails':>5}")
    ok = True
    cpu: dict[str, float] = {}  # the server's CPU per cycle at 8 clients, by row
    for sync in (*args.sync, "bare"):
        store = SYNC_STORES.get(sync, sync)
        with Servers(store, os.path.join(folder, f"s1-{sync}.db"), loop=args.loop, pin=args.pin) as servers:
            load(args, servers, 8, 1)  # warm up
            for clients in args.clients:
                run = load(args, servers, clients, args.seconds)
                memory = servers.rss() / 2**20
                p99 = f"{run.p99_ms:7.2f}" + ("*" if clients == 8 and run.p99_ms > TARGET_P99_MS else " ")
                targets = ("-", "-") if sync == "bare" else (ratio(run.rate, TARGET_RATE), ratio(run.rate, reference))
                print(f"{sync:>11} {clients:>7} {run.rate:>9.1f} {run.p50_ms:>7.2f} {p99:>8}"
                      f"{run.cpu_ms_per_cycle:>10.2f} {run.generator_cpu / run.seconds:>6.0%} {memory:>7.1f} "
                      f"{targets[0]:>6} {targets[1]:>8} {run.failures:>5}")  # fmt: skip
                ok = ok and run.failures == 0 and run.cycles > 0
                if clients == 8:
                    cpu[sync] = run.cpu_ms_per_cycle
                if run.error:
                    print(f"      last error: {run.error}")
    low, high = REFERENCE_RATE
    print(f"  target (SPEC 8): ≥ {TARGET_RATE} cycles/s per process, p99 ≤ {TARGET_P99_MS:g} ms at 8 clients "
          f"(* misses it), and ≥ {REFERENCE_FACTOR}x the reference's genkit-fastapi")  # fmt: skip
    if measured:
        print(
            f"  ÷ref: the reference's best rate in [S5] this run, {reference:.1f} cycles/s ({measured[1]}); "
            "its Genkit-wire cycle is the same two turns"
        )
    else:
        print(
            f"  ÷ref {high}: the reference's genkit-fastapi measured on another machine (SPEC 8: {low}-{high} "
            "cycles/s), not here; --only S5,S1 measures it in this run"
        )
    print(
        "  p50/p99 per request (a cycle is two); cpu ms/cyc: the server's user+system CPU per cycle; "
        "gen cpu: the generator's CPU share of one core"
    )
    print(
        "  bare: the HTTP floor - the same two requests, uvicorn and generator, answered by a bare Starlette app "
        "with canned replies (benchmarks/_bare_app.py: no runtime, no store, no auth)"
    )
    floor = cpu.get("bare")
    if floor:
        shares = ", ".join(f"{s} {cpu[s]:.2f} ms = {ratio(cpu[s], floor)}" for s in args.sync if s in cpu)
        print(f"  server CPU per cycle at 8 clients against the floor's {floor:.2f} ms: {shares}")
    args.s1_cpu = {SYNC_STORES[s]: cpu[s] * 1000 for s in args.sync if s in cpu}  # for [S6], in µs
    sync = [] if args.sync == ["FULL", "NORMAL"] else [f"--sync {','.join(args.sync)}"]
    print(reproduce(args, f"--only S1 --seconds {args.seconds:g} --clients {','.join(map(str, args.clients))}", *sync))
    return ok


def table_layers(args: argparse.Namespace, folder: str) -> bool:
    """[S6] (``layers``): the SQLite settings of ``--sync`` and the in-memory store, beside
    [S1]'s server CPU per cycle when [S1] ran first in this run."""
    from . import layers  # here: layers imports this module

    stores = [SYNC_STORES[sync] for sync in args.sync if sync in SYNC_STORES] + ["memory"]
    return layers.table_layers(stores, args.layers_n, args.layers_rounds, args.s1_cpu)


def table_decay(args: argparse.Namespace, folder: str) -> bool:
    windows = max(2, round(args.long / 10))
    print(f"\n[S2] no decay: one process on SQLite (FULL), 8 clients, {windows} back-to-back windows of 10 s; "
          f"load average {load_average()}")  # fmt: skip
    print(f"{'window':>8} {'cycles/s':>9} {'p50 ms':>7} {'p99 ms':>7} {'cpu ms/cyc':>10} {'RSS MiB':>7}")
    runs: list[Run] = []
    with Servers("sqlite", os.path.join(folder, "s2.db"), loop=args.loop, pin=args.pin) as servers:
        for window in range(windows):
            run = load(args, servers, 8, 10)
            runs.append(run)
            if window in (0, windows - 1):
                print(f"{window * 10:>5}-{(window + 1) * 10:<2} {run.rate:>9.1f} {run.p50_ms:>7.2f} {run.p99_ms:>7.2f} "
                      f"{run.cpu_ms_per_cycle:>10.2f} {servers.rss() / 2**20:>7.1f}")  # fmt: skip
    first, last = runs[0], runs[-1]
    print(f"  last ÷ first window: cycles/s {ratio(last.rate, first.rate)}, p99 {ratio(last.p99_ms, first.p99_ms)}, "
          f"cpu per cycle {ratio(last.cpu_ms_per_cycle, first.cpu_ms_per_cycle)} "
          f"({sum(r.cycles for r in runs)} cycles in all)")  # fmt: skip
    print(reproduce(args, f"--only S2 --long {args.long:g}"))
    return all(r.failures == 0 for r in runs)


def table_paused(args: argparse.Namespace, folder: str) -> bool:
    print(f"\n[S3] memory per paused session: {args.paused} sessions left paused on one process (SQLite)")
    with Servers("sqlite", os.path.join(folder, "s3.db"), loop=args.loop) as servers:
        before = servers.rss()

        async def pause_many() -> None:
            limits = httpx.Limits(max_connections=32, max_keepalive_connections=32)
            transport = httpx.AsyncHTTPTransport(limits=limits, socket_options=[NODELAY])
            async with httpx.AsyncClient(headers=HEADERS, transport=transport, timeout=60) as http:
                queue = iter(range(args.paused))

                async def worker() -> None:
                    for _ in queue:
                        reply = await http.post(servers.url + SESSIONS,
                                                json={"message": "Transfer $1 to x."})  # fmt: skip
                        assert reply.json()["finish_reason"] == "interrupted", reply.text

                await asyncio.gather(*(worker() for _ in range(32)))

        asyncio.run(pause_many())
        after = servers.rss()
    per = (after - before) / max(args.paused, 1)
    print(f"  server RSS {before / 2**20:.1f} -> {after / 2**20:.1f} MiB, {per / 1024:.2f} KiB per paused session")
    print(reproduce(args, f"--only S3 --paused {args.paused}"))
    return True


class Unavailable(Exception):
    """Why the reference's server cannot run here (S5 is then skipped, the run goes on)."""


def genkit_python(args: argparse.Namespace, work: Path) -> tuple[str, str]:
    """The genkit venv's Python and its genkit / genkit-fastapi versions: ``--genkit-python`` (or
    ``PAUSEPOINT_GENKIT_PYTHON``), else what the reference's ``setup.sh`` makes in ``work``."""
    python: str | None = args.genkit_python
    if python is None:
        python, reason = reference_python(work)
        if python is None:
            raise Unavailable(reason)
    elif not os.path.isfile(python):
        raise Unavailable(f"no Python at {python} (--genkit-python / PAUSEPOINT_GENKIT_PYTHON)")
    probe = "import fastapi, genkit_fastapi, uvicorn; from importlib.metadata import version as v; "
    probe += "print(v('genkit'), v('genkit-fastapi'))"
    check = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=False)
    if check.returncode != 0:
        last = (check.stderr.strip().splitlines() or ["?"])[-1]
        raise Unavailable(f"{python} cannot serve the reference (needs genkit-fastapi, fastapi, uvicorn): {last}")
    genkit, fastapi = check.stdout.split()
    return python, f"genkit {genkit}, genkit-fastapi {fastapi}"


# [S5]'s rows, in the order they run: each pausepoint store after the reference's of the same role.
WIRE_ROWS = (("reference", "memory"), ("pausepoint", "memory"), ("reference", "file"), ("pausepoint", "sqlite"))
ROLE = {"memory": "memory", "sqlite": "file"}  # pausepoint's store -> the reference's of the same role


def table_genkit(args: argparse.Namespace, folder: str) -> bool:
    title = "[S5] the Genkit wire: pausepoint against the reference's genkit-fastapi, same cycle, same generator"
    if args.generator != "wrk":
        print(f"\n{title}: skipped (needs --generator wrk: the cycle is {GENKIT_LUA.name}, a wrk script)")
        return True
    directory = Path(args.reference_dir)
    if not (directory / "anchor_app.py").is_file():
        print(f"\n{title}: skipped (no anchor_app.py in {directory}; --reference-dir or PAUSEPOINT_REFERENCE_BENCH)")
        return True
    with tempfile.TemporaryDirectory(prefix="pausepoint-genkit-reference-") as tmp:
        work = copy_reference(directory, Path(tmp))
        try:
            python, versions = genkit_python(args, work)
        except Unavailable as why:
            print(f"\n{title}: skipped ({why})")
            return True
        print(f"\n{title}, {args.seconds:g} s per row{' (server on CPU 0, wrk on CPU 1)' if args.pin else ''}; "
              f"load average {load_average()}")  # fmt: skip
        print(f"{'server':>10} {'store':>11} {'clients':>7} {'cycles/s':>9} {'p50 ms':>7} {'p99 ms':>7} "
              f"{'cpu ms/cyc':>10} {'srv cpu':>7} {'gen cpu':>7} {'RSS MiB':>7} {'÷ ref':>7} {'cpu ÷':>7} "
              f"{'fails':>5}")  # fmt: skip
        ok = True
        rates: dict[tuple[str, int], float] = {}
        costs: dict[tuple[str, int], float] = {}
        for system, store in WIRE_ROWS:
            servers: Servers
            if system == "reference":
                files = os.path.join(tmp, f"{store}-snapshots")
                os.makedirs(files)
                servers = ReferenceServer(
                    store, files, loop=args.loop, pin=args.pin, python=python, reference=str(work)
                )
                script_args: tuple[str, ...] = ("/bankingAgent",)
                label = store
            else:
                target = os.path.join(folder, "s5.db") if store == "sqlite" else ""
                servers = Servers(store, target, loop=args.loop, pin=args.pin)
                script_args = ("/agents/bankingAgent", TOKEN)
                label = "sqlite FULL" if store == "sqlite" else store
            try:
                with servers:
                    wrk(servers, 8, 1, args.pin, GENKIT_LUA, *script_args)  # warm up
                    for clients in args.genkit_clients:
                        run = wrk(servers, clients, args.seconds, args.pin, GENKIT_LUA, *script_args)
                        shown, cheaper = "", ""
                        if system == "reference":
                            rates[store, clients] = run.rate
                            costs[store, clients] = run.cpu_ms_per_cycle
                        else:
                            ok = ok and run.failures == 0
                            key = (ROLE[store], clients)
                            if rates.get(key):
                                times = run.rate / rates[key]
                                shown = f"{times:.2f}x" + ("*" if times < REFERENCE_FACTOR else " ")
                                cheaper = ratio(costs[key], run.cpu_ms_per_cycle)
                        share, gen = run.server_cpu / run.seconds, run.generator_cpu / run.seconds
                        print(f"{system:>10} {label:>11} {clients:>7} {run.rate:>9.1f} {run.p50_ms:>7.2f} "
                              f"{run.p99_ms:>7.2f} {run.cpu_ms_per_cycle:>10.2f} {share:>7.0%} {gen:>7.0%} "
                              f"{servers.rss() / 2**20:>7.1f} {shown:>8}{cheaper:>7} {run.failures:>5}")  # fmt: skip
                        if run.error:
                            print(f"      last error: {run.error}")
                        if system == "reference" and store == "file":
                            print(f"      {len(os.listdir(files))} snapshot files in its store after this row")
            except RuntimeError as error:  # a server that did not start, or wrk without a result
                print(f"{system:>10} {label:>11}  did not run: {error}")
                ok = ok and system == "reference"
    if rates:
        (store, clients), best = max(rates.items(), key=lambda item: item[1])
        args.reference_best = (best, f"its {store} store, {clients} clients")
    print(f"  ÷ ref: pausepoint's cycles/s ÷ the reference's at the same store role (memory ÷ memory, SQLite ÷ its "
          f"file store) and clients; target (SPEC 8) ≥ {REFERENCE_FACTOR}x (* misses it); cpu ÷: the reference's CPU "
          "per cycle ÷ pausepoint's (the cost ratio, steadier than the rates when the core is shared)")  # fmt: skip
    print("  srv cpu: the server's CPU share of one core (well under 100% with 8 clients: it waited, or another "
          "process held its core); gen cpu: wrk's")  # fmt: skip
    print(f"  the reference: {versions}, anchor_app.py's banking agent and scripted model served by serve_agent() "
          "under uvicorn, one process, on the event loop --loop names (as pausepoint's server); its file store "
          "writes a JSON file per snapshot and never fsyncs, SQLite FULL fsyncs each commit")  # fmt: skip
    print("  the reference's new chat looks its new session id up in the store (get_snapshot(session_id=...)), which "
          "reads every snapshot (the file store parses every file): its cost per cycle grows with the snapshots the "
          "run has made, so its file rows depend on how long they ran")  # fmt: skip
    print(f"  a cycle: send (pauses) + resume with the approval on snapshotId, non-streamed ({GENKIT_LUA.name}); "
          "p50/p99 per request; cpu ms/cyc: the server's user+system CPU per cycle")  # fmt: skip
    print(reproduce(args, f"--only S5 --seconds {args.seconds:g} --genkit-clients "
                          f"{','.join(map(str, args.genkit_clients))}"))  # fmt: skip
    print(f"  one row by hand: wrk -t1 -c8 -d5s -s {GENKIT_LUA.relative_to(ROOT)} URL -- /bankingAgent "
          f"(the reference) or -- /agents/bankingAgent {TOKEN} (pausepoint)")  # fmt: skip
    return ok


@contextlib.contextmanager
def place(kind: str, url: str) -> Any:
    """A fresh PostgreSQL schema / Redis key prefix for one run, removed afterwards."""
    name = f"ppsrv_{uuid.uuid4().hex[:10]}"
    try:
        yield f"{url}#{name}" if kind == "postgres" else f"{url}#{name}:"
    finally:
        asyncio.run(_drop(kind, url, name))


async def _drop(kind: str, url: str, name: str) -> None:
    if kind == "postgres":
        import asyncpg

        conn = await asyncpg.connect(url)
        try:
            await conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        finally:
            await conn.close()
    else:
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(url)
        try:
            keys = [key async for key in client.scan_iter(match=f"{name}:*", count=1000)]
            for start in range(0, len(keys), 1000):
                await client.delete(*keys[start : start + 1000])
        finally:
            await client.aclose()


def table_scale(args: argparse.Namespace) -> bool:
    stores = [(kind, url) for kind, url in (("postgres", args.postgres), ("redis", args.redis)) if url]
    if not stores:
        print("\n[S4] scale out: skipped (no --postgres / --redis, PAUSEPOINT_TEST_POSTGRES_URL / _REDIS_URL unset)")
        return True
    print(f"\n[S4] scale out: N processes on one port, one database, {args.scale_clients} clients, "
          f"{args.seconds:g} s per row, {os.cpu_count()} CPUs; load average {load_average()}")  # fmt: skip
    print(f"{'store':>8} {'procs':>5} {'cycles/s':>9} {'÷ 1 proc':>8} {'p50 ms':>7} {'p99 ms':>7} {'cpu ms/cyc':>10} "
          f"{'crossed':>7} {'approved':>8} {'ran':>6} {'dups refused':>12} {'once':>5}")  # fmt: skip
    ok = True
    for kind, url in stores:
        base = 0.0
        for processes in args.processes:
            with place(kind, url) as target:
                servers = Servers(kind, target, processes=processes, loop=args.loop)
                with servers:
                    warm = load(args, servers, args.scale_clients, 1)
                    run = load(args, servers, args.scale_clients, args.seconds)
                # Every approval answered 200 ran the tool once; every duplicate was refused.
                once = servers.ran == servers.answered and warm.failures + run.failures == 0
                ok = ok and once
                base = base or run.rate
                print(f"{kind:>8} {processes:>5} {run.rate:>9.1f} {ratio(run.rate, base):>8} {run.p50_ms:>7.2f} "
                      f"{run.p99_ms:>7.2f} {run.cpu_ms_per_cycle:>10.2f} {run.crossed / max(run.cycles, 1):>7.0%} "
                      f"{servers.answered:>8} {servers.ran:>6} {warm.refused + run.refused:>12} "
                      f"{'yes' if once else 'NO':>5}")  # fmt: skip
                if run.error:
                    print(f"      last error: {run.error}")
    print("  crossed: cycles whose approval reached another process than their send; approved: approvals the servers")
    print("  answered 200; ran: transfers the tool made (must equal approved); dups refused: second approvals refused")
    print("  cpu ms/cyc: the pausepoint processes' CPU only (the database's own is not counted)")
    print(reproduce(args, f"--only S4 --processes {','.join(map(str, args.processes))} "
                          f"--scale-clients {args.scale_clients} --seconds {args.seconds:g}"))  # fmt: skip
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ints = lambda text: [int(x) for x in text.split(",")]  # noqa: E731
    parser.add_argument("--generator", choices=("wrk", "python"), default="wrk" if shutil.which("wrk") else "python")
    parser.add_argument("--seconds", type=float, default=5, help="seconds per row of S1 and S4 (default 5)")
    parser.add_argument("--clients", type=ints, default=[1, 8, 64], help="S1's concurrency levels (1,8,64)")
    parser.add_argument("--sync", type=lambda t: t.upper().split(","), default=["FULL", "NORMAL"])
    parser.add_argument("--long", type=float, default=20, help="S2's run in seconds (default 20; the issue's: 60)")
    parser.add_argument("--paused", type=int, default=10_000, help="paused sessions for S3 (default 10,000)")
    parser.add_argument("--processes", type=ints, default=[1, 2, 4], help="S4's process counts (1,2,4)")
    parser.add_argument("--scale-clients", type=int, default=32, help="S4's concurrent clients (32)")
    parser.add_argument("--postgres", default=os.environ.get("PAUSEPOINT_TEST_POSTGRES_URL"))
    parser.add_argument("--redis", default=os.environ.get("PAUSEPOINT_TEST_REDIS_URL"))
    parser.add_argument(
        "--loop", choices=LOOPS, default="auto", help="the servers' event loop (auto: uvloop if installed, as serve)"
    )
    parser.add_argument("--genkit-clients", type=ints, default=[1, 8], help="S5's concurrency levels (1,8)")
    parser.add_argument(
        "--genkit-python",
        default=os.environ.get("PAUSEPOINT_GENKIT_PYTHON"),
        help="S5: the genkit 0.12 venv's python (default: the one the reference's setup.sh makes)",
    )
    parser.add_argument("--reference-dir", default=str(DEFAULT_DIR), help="S5: the reference-bench folder")
    parser.add_argument("--layers-n", type=int, default=300, help="S6's cycles per round and way (300)")
    parser.add_argument("--layers-rounds", type=int, default=5, help="S6's rounds (5)")
    parser.add_argument("--only", help="run only these tables (e.g. S1,S4)")
    parser.add_argument("--no-pin", dest="pin", action="store_false", help="do not pin server and generator to CPUs")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--store", default="sqlite", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, args.store, args.target, args.loop)
        return 0
    args.pin = args.pin and len(os.sched_getaffinity(0)) >= 2
    args.reference_best = None
    args.s1_cpu = None
    only = set((args.only or "S1,S2,S3,S4,S5,S6").upper().split(","))
    generator = f"wrk with {LUA.name}" if args.generator == "wrk" else "httpx in this process, slower than the server"
    print(f"server benchmark: banking example, REST API over loopback, 2 requests per cycle; generator "
          f"{generator}; event loop {args.loop} ({loop_in_use(args.loop)} here); {os.cpu_count()} CPUs")  # fmt: skip
    ok = True
    with tempfile.TemporaryDirectory(prefix="pausepoint-server-bench-") as folder:
        # S5 first: S1 divides by the reference's rate it measured; S6 after S1: it shows S1's CPU.
        tables = (("S5", table_genkit), ("S1", table_sqlite), ("S6", table_layers), ("S2", table_decay),
                  ("S3", table_paused))  # fmt: skip
        for name, table in tables:
            if name in only:
                ok = table(args, folder) and ok
    if "S4" in only:
        ok = table_scale(args) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
