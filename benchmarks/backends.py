"""The session stores compared: ``python -m benchmarks.backends``.

For each backend — in-memory, SQLite (a temporary file), PostgreSQL and Redis (the servers named
by ``PAUSEPOINT_TEST_POSTGRES_URL`` / ``PAUSEPOINT_TEST_REDIS_URL`` or ``--postgres`` /
``--redis``; skipped when neither is given) — it runs the banking example's full cycle: new chat →
``send("Transfer $500 to savings.")`` → pause → ``resume(respond=[approved])`` → transfer → final
text. One cycle is one *turn* below. It prints a table per backend, then one line per backend:

- cycles/s and p50/p99 latency of a cycle, one at a time; cycles/s with ``--concurrency``
  sessions at once in this one process (where a network round trip dominates, this is the
  figure a server sees);
- bytes written per turn: the log records a turn appends, read back from the store, and the
  growth of the backend's own storage (file, relations, or Redis memory) per turn;
- per-turn cost at 10 and at 1,000 prior turns: the median cycle on one session once it holds
  that many turns (the target: within 1.5x).

PostgreSQL and Redis get a fresh schema / key prefix, removed at the end. Nothing here asserts a
figure; a cycle that does not pause or end as expected stops the run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from examples.banking import build
from pausepoint import Agent, AgentFinishReason, Chat
from pausepoint.stores import InMemorySessionStore, SessionStore, SqliteSessionStore

__all__ = ["main"]

PROMPT = "Transfer $500 to savings."
FINAL = "Transferred $500 to savings."
BACKENDS = ("memory", "sqlite", "postgres", "redis")


@dataclass
class Place:
    """A store on a fresh place of one backend, with a way to size and remove that place."""

    store: SessionStore
    footprint: Callable[[], Awaitable[int | None]]
    cleanup: Callable[[], Awaitable[None]]


@dataclass
class Figures:
    backend: str
    cycles: int
    cycles_per_s: float
    p50_ms: float
    p99_ms: float
    concurrent_per_s: float
    payload_bytes: float
    stored_bytes: float | None
    at_history: dict[int, float] = field(default_factory=dict)


# -- the places ----------------------------------------------------------------------------------


async def _nothing() -> None:
    return None


async def _unknown() -> int | None:
    return None


async def open_memory(_: argparse.Namespace, __: Path) -> Place:
    return Place(InMemorySessionStore(), _unknown, _nothing)


async def open_sqlite(_: argparse.Namespace, tmp: Path) -> Place:
    path = tmp / "sessions.db"

    async def footprint() -> int | None:
        if not path.exists():
            return None
        # Fold the write-ahead log into the database first: the WAL file only grows between
        # checkpoints, and its size says little about what is stored.
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        return path.stat().st_size

    return Place(SqliteSessionStore(path), footprint, _nothing)


async def open_postgres(args: argparse.Namespace, _: Path) -> Place:
    import asyncpg

    from pausepoint.stores import PostgresSessionStore

    schema = f"ppbench_{uuid.uuid4().hex[:10]}"
    pool = await asyncpg.create_pool(args.postgres, min_size=1, max_size=args.concurrency)

    async def footprint() -> int:
        sql = "SELECT pg_total_relation_size($1::regclass) + pg_total_relation_size($2::regclass)"
        return int(await pool.fetchval(sql, f"{schema}.pausepoint_sessions", f"{schema}.pausepoint_records"))

    async def cleanup() -> None:
        await pool.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await pool.close()

    return Place(PostgresSessionStore(pool, schema=schema), footprint, cleanup)


async def open_redis(args: argparse.Namespace, _: Path) -> Place:
    import redis.asyncio as aioredis

    from pausepoint.stores import RedisSessionStore

    prefix = f"ppbench:{uuid.uuid4().hex[:10]}:"
    client = aioredis.Redis.from_url(args.redis)

    async def keys() -> list[bytes]:
        return [key async for key in client.scan_iter(match=prefix + "*", count=1000)]

    async def footprint() -> int:
        sizes = [await client.memory_usage(key) for key in await keys()]
        return sum(size or 0 for size in sizes)

    async def cleanup() -> None:
        found = await keys()
        if found:
            await client.delete(*found)
        await client.aclose()

    return Place(RedisSessionStore(client, prefix=prefix), footprint, cleanup)


OPENERS = {"memory": open_memory, "sqlite": open_sqlite, "postgres": open_postgres, "redis": open_redis}


# -- the workloads -------------------------------------------------------------------------------


async def cycle(chat: Chat) -> None:
    """One full cycle on ``chat``, checked: a cycle that goes wrong must not be timed."""
    res = await chat.send(PROMPT)
    if res.finish_reason != AgentFinishReason.INTERRUPTED:
        raise RuntimeError(f"the cycle did not pause: {res}")
    res = await chat.resume(respond=[res.interrupts[0].respond({"approved": True})])
    if res.finish_reason != AgentFinishReason.STOP or res.text != FINAL:
        raise RuntimeError(f"the cycle did not end as expected: {res}")


async def timed_cycles(agent: Agent, count: int) -> list[float]:
    """Seconds per cycle, each on a new session, one after another."""
    latencies = []
    for _ in range(count):
        started = time.perf_counter()
        await cycle(agent.chat())
        latencies.append(time.perf_counter() - started)
    return latencies


async def concurrent_rate(agent: Agent, count: int, concurrency: int) -> float:
    """Cycles per second with ``concurrency`` sessions in flight at once."""
    remaining = count

    async def lane() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await cycle(agent.chat())

    started = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    return count / (time.perf_counter() - started)


async def history_costs(agent: Agent, marks: list[int], sample: int) -> dict[int, float]:
    """Median seconds of a cycle on one session once it holds each of ``marks`` turns."""
    chat = agent.chat()
    turns = 0
    costs = {}
    for mark in sorted(marks):
        while turns < mark:
            await cycle(chat)
            turns += 1
        measured = []
        for _ in range(sample):
            started = time.perf_counter()
            await cycle(chat)
            measured.append(time.perf_counter() - started)
            turns += 1
        costs[mark] = statistics.median(measured)
    return costs


async def payload_per_turn(store: SessionStore, session_ids: list[str]) -> float:
    """Bytes of the records one cycle appends, as the store returns them."""
    total = 0
    for session_id in session_ids:
        found = await store.read(session_id)
        assert found is not None
        total += sum(len(e.data) + len(e.kind) for e in found.entries)
    return total / len(session_ids)


async def measure(backend: str, args: argparse.Namespace) -> Figures:
    with tempfile.TemporaryDirectory(prefix="pausepoint-bench-") as tmp:
        place = await OPENERS[backend](args, Path(tmp))
        try:
            _, agent = build(place.store)
            await timed_cycles(agent, args.warmup)
            before = await place.footprint()
            first = len(await place.store.list_sessions(limit=10**9))
            started = time.perf_counter()
            latencies = await timed_cycles(agent, args.cycles)
            elapsed = time.perf_counter() - started
            after = await place.footprint()
            recent = await place.store.list_sessions(limit=args.cycles)
            if len(recent) != args.cycles or first != args.warmup:
                raise RuntimeError("the store does not hold the sessions just made")
            payload = await payload_per_turn(place.store, [s.session_id for s in recent])
            concurrent = await concurrent_rate(agent, args.cycles, args.concurrency)
            at_history = await history_costs(agent, args.history, args.sample)
        finally:
            await place.store.close()
            await place.cleanup()
    ordered = sorted(latencies)
    return Figures(
        backend=backend,
        cycles=args.cycles,
        cycles_per_s=args.cycles / elapsed,
        p50_ms=statistics.median(ordered) * 1000,
        p99_ms=ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))] * 1000,
        concurrent_per_s=concurrent,
        payload_bytes=payload,
        stored_bytes=None if before is None or after is None else (after - before) / args.cycles,
        at_history={mark: cost * 1000 for mark, cost in at_history.items()},
    )


# -- printing ------------------------------------------------------------------------------------


def _bytes(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def print_backend(figures: Figures, args: argparse.Namespace) -> None:
    low, high = min(figures.at_history), max(figures.at_history)
    rows = [
        (f"cycles/s, one at a time ({figures.cycles} cycles)", f"{figures.cycles_per_s:,.0f}"),
        ("cycle latency p50 (ms)", f"{figures.p50_ms:.2f}"),
        ("cycle latency p99 (ms)", f"{figures.p99_ms:.2f}"),
        (f"cycles/s, {args.concurrency} sessions at once", f"{figures.concurrent_per_s:,.0f}"),
        ("log bytes written per turn", _bytes(figures.payload_bytes)),
        ("storage growth per turn (bytes)", _bytes(figures.stored_bytes)),
        *((f"turn at {mark:,} prior turns (ms, median)", f"{cost:.2f}") for mark, cost in figures.at_history.items()),
        (f"cost at {high:,} / cost at {low:,}", f"{figures.at_history[high] / figures.at_history[low]:.2f}x"),
    ]
    width = max(len(label) for label, _ in rows)
    print(f"\n{figures.backend}", flush=True)
    for label, value in rows:
        print(f"  {label:<{width}}  {value:>10}", flush=True)


def print_summary(all_figures: list[Figures], args: argparse.Namespace) -> None:
    low, high = min(args.history), max(args.history)
    columns = ["backend", "cycles/s", "p50 ms", "p99 ms", f"x{args.concurrency}/s", "log B/turn", "stored B/turn"]
    columns += [f"@{low} ms", f"@{high} ms", "growth"]
    rows = [
        [
            f.backend,
            f"{f.cycles_per_s:,.0f}",
            f"{f.p50_ms:.2f}",
            f"{f.p99_ms:.2f}",
            f"{f.concurrent_per_s:,.0f}",
            _bytes(f.payload_bytes),
            _bytes(f.stored_bytes),
            f"{f.at_history[low]:.2f}",
            f"{f.at_history[high]:.2f}",
            f"{f.at_history[high] / f.at_history[low]:.2f}x",
        ]
        for f in all_figures
    ]
    widths = [max(len(row[i]) for row in [columns, *rows]) for i in range(len(columns))]
    print("\nsummary (one turn = one full cycle: send, pause, resume, transfer, final text)")
    for row in [columns, *rows]:
        cells = [row[0].ljust(widths[0])] + [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        print("  " + "  ".join(cells))


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.backends", description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated, of: " + ", ".join(BACKENDS))
    parser.add_argument("--cycles", type=int, default=500, help="measured cycles (default 500)")
    parser.add_argument("--warmup", type=int, default=50, help="cycles before measuring (default 50)")
    parser.add_argument("--concurrency", type=int, default=16, help="sessions at once (default 16)")
    parser.add_argument("--history", default="10,1000", help="prior turns to measure at (default 10,1000)")
    parser.add_argument("--sample", type=int, default=20, help="cycles measured at each history size (default 20)")
    parser.add_argument("--postgres", default=os.environ.get("PAUSEPOINT_TEST_POSTGRES_URL"), help="postgresql:// URL")
    parser.add_argument("--redis", default=os.environ.get("PAUSEPOINT_TEST_REDIS_URL"), help="redis:// URL")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args(argv)
    args.history = [int(h) for h in args.history.split(",")]
    if args.quick:
        args.cycles, args.warmup, args.sample, args.history = 30, 5, 3, [10, 50]
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = set(args.backends) - set(BACKENDS)
    if unknown:
        parser.error(f"unknown backends: {', '.join(sorted(unknown))}")
    return args


async def run(args: argparse.Namespace) -> list[Figures]:
    results = []
    for backend in args.backends:
        if backend in ("postgres", "redis") and not getattr(args, backend):
            variable = f"PAUSEPOINT_TEST_{backend.upper()}_URL"
            print(f"\n{backend}\n  skipped: no server (set {variable} or --{backend})", flush=True)
            continue
        figures = await measure(backend, args)
        print_backend(figures, args)
        results.append(figures)
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    print(f"pausepoint store backends — python {sys.version.split()[0]}, {os.cpu_count()} CPUs", flush=True)
    results = asyncio.run(run(args))
    if results:
        print_summary(results, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
