"""A cold cycle against a warm one: what a process with nothing cached pays, by history length.

A *warm* cycle is the banking cycle by the agent that has been serving the session (its state
cached). A *cold* cycle is the same cycle by another agent on the same store that has not seen
the session (a new process, a restart, a cache eviction): it loads the session first. (That agent
has served one cycle of another session before, so its own first-use costs — tool schemas,
imports — are not counted: they are the same at any history.) With checkpoints (the default) a cold
load reads the store's checkpoint and folds the records after it; *without* (the session was
grown, and is cycled, by agents with ``checkpoint_every=None``, so the store holds none) it
folds the whole log — what every cold load cost before checkpoints. Target: a cold cycle within
2x a warm one at any history.

Each configuration runs in a process of its own (``python -m benchmarks.cold SPEC``); the table
is printed by ``python -m benchmarks.run`` (``python3 dev.py bench``), or alone with
``python -m benchmarks.cold --table [--hist 10,100,1000,10000] [--k 20] [--stores memory,sqlite]
[--shapes text,cycle]``; ``--stores postgres,redis`` measures those stores too, on the servers
named by ``PAUSEPOINT_TEST_POSTGRES_URL`` / ``PAUSEPOINT_TEST_REDIS_URL``. The H prior turns are
plain text turns (``text``) or approval cycles (``cycle``), whose calls, pauses, answers and
grants the state keeps too.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import os
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

from examples.banking import build
from pausepoint import Agent, AgentFinishReason
from pausepoint.stores import InMemorySessionStore, SessionStore

from ._child import answer, child_spec, run_in_child
from ._places import drop, store_at
from ._report import Table, note, us, verdict

__all__ = ["COLD_TARGET", "GROWTH_TARGET", "SHAPES", "cold_vs_warm", "main", "table_cold"]

COLD_TARGET = 2.0
GROWTH_TARGET = 1.5  # SPEC §8: per-turn cost at 1,000 prior turns within 1.5x of the cost at 10
SHAPES = ("text", "cycle")
SERVED_CYCLES = 600  # two rounds of a base and its extensions at H = 10,000, so their phase barely shows
COMMAND = "python -m benchmarks.cold --table --hist {hist} --k {k} --stores {stores} --shapes {shapes}"


STORES = ("memory", "sqlite", "postgres", "redis")


def _place(kind: str, path: str, tag: str) -> dict[str, Any]:
    """Where a ``kind`` store lives (``_places``): SQLite in ``path``; PostgreSQL and Redis at
    the URL of ``PAUSEPOINT_TEST_POSTGRES_URL`` / ``PAUSEPOINT_TEST_REDIS_URL``, in a schema or
    key prefix named by ``tag`` (``_places.drop`` removes it)."""
    if kind == "sqlite":
        return {"backend": "sqlite", "path": path}
    if kind in ("postgres", "redis"):
        url = os.environ.get(f"PAUSEPOINT_TEST_{kind.upper()}_URL")
        if not url:
            raise ValueError(f"set PAUSEPOINT_TEST_{kind.upper()}_URL to measure {kind}")
        if kind == "postgres":
            return {"backend": "postgres", "url": url, "schema": f"ppcold_{tag}"}
        return {"backend": "redis", "url": url, "prefix": f"ppcold:{tag}:"}
    raise ValueError(f"unknown store {kind!r} (known: {', '.join(STORES)})")


def _store(kind: str, path: str, tag: str = "") -> SessionStore:
    return InMemorySessionStore() if kind == "memory" else store_at(_place(kind, path, tag))


def _agent(store: SessionStore, checkpoints: bool) -> Agent:
    _, agent = build(store)
    if not checkpoints:
        agent.checkpoint_every = None
    return agent


async def _cycle(agent: Agent, session_id: str) -> tuple[int, int]:
    """One cycle; its wall-clock and CPU time (ns). CPU time is what to compare on a busy machine."""
    chat = agent.chat(session_id)
    start, cpu = time.perf_counter_ns(), time.process_time_ns()
    paused = await chat.send("Transfer $500 to savings.")
    if paused.finish_reason != AgentFinishReason.INTERRUPTED:
        raise RuntimeError(f"expected a pause, got {paused.finish_reason}")
    done = await chat.resume(respond=[paused.interrupts[0].respond({"approved": True})])
    elapsed, cpu = time.perf_counter_ns() - start, time.process_time_ns() - cpu
    if done.finish_reason != AgentFinishReason.STOP:
        raise RuntimeError(f"unexpected end of cycle: {done.finish_reason}")
    return elapsed, cpu


async def _settle(agent: Agent) -> None:
    """Let the agent's background checkpoint writes finish (they are not part of a cycle)."""
    await agent.sessions.settle()


async def _grow(agent: Agent, turns: int, shape: str = "text") -> str:
    """A session of ``turns`` plain text turns ("text"), or of ``turns`` approval cycles
    ("cycle": each leaves calls, a pause, its answer and a used grant behind)."""
    chat = agent.chat()
    for i in range(turns):
        if shape == "cycle":
            await _cycle(agent, chat.session_id)
        else:
            await chat.send(f"hello number {i}, just chatting")
    await _settle(agent)
    return chat.session_id


async def _served(agent: Agent, session_id: str) -> float:
    """Mean CPU (ns) per warm cycle over SERVED_CYCLES, the background checkpoint writes they
    cause included (a cycle adds about 11 records, so a checkpoint every 5 to 6 cycles: mostly
    extensions, merged as they go, and a new base once they add up to a share of it)."""
    start = time.process_time_ns()
    for _ in range(SERVED_CYCLES):
        await _cycle(agent, session_id)
        await _settle(agent)
    return (time.process_time_ns() - start) / SERVED_CYCLES


async def cold_vs_warm(store: str, hist: int, k: int, shape: str = "text") -> dict[str, Any]:
    """Medians (ns, wall-clock and CPU) of K warm cycles, K cold cycles with checkpoints, K cold
    ones without, on a session of ``hist`` turns of ``shape``."""
    if shape not in SHAPES:
        raise ValueError(f"unknown history shape {shape!r} (known: {', '.join(SHAPES)})")
    tag = uuid.uuid4().hex[:12]
    with tempfile.TemporaryDirectory(prefix="pausepoint-cold-") as tmp:
        path = os.path.join(tmp, "sessions.db")
        made = _store(store, path, tag)
        try:
            result: dict[str, Any] = {"store": store, "hist": hist, "k": k, "shape": shape}
            for checkpoints in (True, False):
                grower = _agent(made, checkpoints)
                session = await _grow(grower, hist, shape)
                await _cycle(grower, session)  # the first cycle of any process warms its imports
                gc.collect()
                warm = [await _cycle(grower, session) for _ in range(k)]
                await _settle(grower)
                cold = []
                for _ in range(k):
                    # A new agent on the store (a new process, or one whose cache let the session
                    # go) that has served another session, so that what is measured is the load.
                    fresh = _agent(made, checkpoints)
                    await _cycle(fresh, fresh.chat().session_id)
                    cold.append(await _cycle(fresh, session))
                    await _settle(fresh)
                # What serving the session costs (with its checkpoint writes, or without): measured
                # after the cold loads, so that they load a session of about H turns, not H + 600.
                result["served_cpu" if checkpoints else "served_cpu_without"] = await _served(grower, session)
                label = "with" if checkpoints else "without"
                result[f"warm_{label}"] = statistics.median(w for w, _ in warm)
                result[f"cold_{label}"] = statistics.median(w for w, _ in cold)
                result[f"warm_cpu_{label}"] = statistics.median(c for _, c in warm)
                result[f"cold_cpu_{label}"] = statistics.median(c for _, c in cold)
            return result
        finally:
            await made.close()
            if store != "memory":
                await drop(_place(store, path, tag))


def table_cold(
    stores: tuple[str, ...],
    hist: tuple[int, ...],
    k: int,
    timeout: float = 1800,
    shapes: tuple[str, ...] = SHAPES,
) -> list[dict[str, Any]]:
    """Print the cold-vs-warm table, a row per store, history shape and H; returns the raw results."""
    table = Table(
        f"[2b] A cold cycle (a new agent on the same store, the session not cached) against a warm one, K={k} "
        "per row, medians (µs)",
        [
            ("store", 7),
            ("shape", 5),
            ("H", 6),
            ("warm", 8),
            ("cold", 8),
            ("cold/warm", 9),
            ("cpu warm", 8),
            ("cpu cold", 8),
            ("cpu c/w", 7),
            ("cpu served", 10),
            ("served no ckpt", 14),
            ("no ckpt", 9),
            ("no ckpt/warm", 12),
            ("cpu no ckpt", 11),
        ],
    )
    table.header()
    results = []
    worst: float | None = None
    for store, shape, h in itertools.product(stores, shapes, hist):
        r = run_in_child("benchmarks.cold", {"store": store, "hist": h, "k": k, "shape": shape}, timeout)
        results.append(r)
        if "error" in r:
            table.error(store, f"{shape} H={h}: {r['error']}")
            continue
        with_ratio = r["cold_with"] / r["warm_with"]
        cpu_ratio = r["cold_cpu_with"] / r["warm_cpu_with"]
        if store != "memory":  # the in-memory store keeps no checkpoints: its cold load folds the log
            worst = cpu_ratio if worst is None else max(worst, cpu_ratio)
        table.row(
            store,
            shape,
            f"{h:,}",
            us(r["warm_with"] / 1000),
            us(r["cold_with"] / 1000),
            f"{with_ratio:.2f}x",
            us(r["warm_cpu_with"] / 1000),
            us(r["cold_cpu_with"] / 1000),
            f"{cpu_ratio:.2f}x",
            us(r["served_cpu"] / 1000),
            us(r["served_cpu_without"] / 1000),
            us(r["cold_without"] / 1000),
            f"{r['cold_without'] / r['warm_without']:.2f}x",
            us(r["cold_cpu_without"] / 1000),
        )
    note(
        "cold: the store's checkpoint (a base and its extensions) plus the records after it (written every 64 "
        "records, in the background), reading of the base its head and the chunks the turn reads (SQLite: a "
        "mapped file; PostgreSQL, Redis: the first 64 KiB, which hold the head, then each chunk as read); "
        "no ckpt: the whole log folded, as before checkpoints"
    )
    note("cpu: the process's CPU time for the cycle (no fsync wait in it; other work on the machine barely shows)")
    note(
        f"cpu served: the mean CPU per warm cycle over {SERVED_CYCLES} cycles with the background checkpoint "
        "writes they cause (an extension of the checkpoint each, and a new base of the whole state after every "
        "few, or, from a base of 32 MiB, extensions merged and a base once they add up to 2 % of it: that base "
        "is what still grows with H)"
    )
    note(
        "served no ckpt: the same served cycles by the agent that writes no checkpoints (after its cold loads): "
        "cpu served minus this is what checkpoints cost a serving process, the price of the cold column"
    )
    note(
        f"worst CPU cold/warm with checkpoints: {verdict(worst, COLD_TARGET)} (target ≤ {COLD_TARGET}x at any H, "
        "on the stores that keep checkpoints; the in-memory store keeps none, so its cold load folds the whole "
        "log, as its no ckpt column does)"
    )
    _note_growth(results)
    note("shape: the H prior turns are plain text turns (text) or approval cycles (cycle)")
    note(
        "reproduce: "
        + COMMAND.format(hist=",".join(map(str, hist)), k=k, stores=",".join(stores), shapes=",".join(shapes))
    )
    return results


def _note_growth(results: list[dict[str, Any]]) -> None:
    """How a warm cycle, and a served one, grow from the smallest H to 1,000 and to the largest
    (SPEC: per-turn cost at 1,000 prior turns within GROWTH_TARGET of the cost at 10)."""
    done = [r for r in results if "error" not in r]
    for store, shape in dict.fromkeys((r["store"], r["shape"]) for r in done):
        rows = sorted((r for r in done if (r["store"], r["shape"]) == (store, shape)), key=lambda r: r["hist"])
        if len(rows) < 2:
            continue
        first, last = rows[0], rows[-1]
        checked = next((r for r in rows[1:] if r["hist"] == 1000), last)
        growth = [
            f"warm {r['warm_cpu_with'] / first['warm_cpu_with']:.2f}x, served "
            f"{r['served_cpu'] / first['served_cpu']:.2f}x at H={r['hist']:,}"
            for r in ([checked] if checked is last else [checked, last])
        ]
        warm = checked["warm_cpu_with"] / first["warm_cpu_with"]
        note(
            f"{store} {shape}: against H={first['hist']:,}: {'; '.join(growth)} "
            f"(warm at H={checked['hist']:,}: {verdict(warm, GROWTH_TARGET)}, target ≤ {GROWTH_TARGET}x)"
        )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if (spec := child_spec(args)) is not None:  # one configuration, in this process
        return answer(asyncio.run(cold_vs_warm(**spec)))
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cold", description=__doc__.splitlines()[0])
    parser.add_argument("--table", action="store_true", help="print the table (the default)")
    parser.add_argument("--hist", default="10,100,1000,10000", help="comma-separated prior-turn counts")
    parser.add_argument("--k", type=int, default=20, help="cycles measured per row and kind")
    parser.add_argument(
        "--stores",
        default="memory,sqlite",
        help="comma-separated: memory,sqlite,postgres,redis (the last two at PAUSEPOINT_TEST_*_URL)",
    )
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated history shapes: text,cycle")
    options = parser.parse_args(args)
    hist = tuple(int(x) for x in options.hist.split(",") if x.strip())
    stores = tuple(s for s in options.stores.split(",") if s)
    shapes = tuple(s for s in options.shapes.split(",") if s)
    results = table_cold(stores, hist, options.k, shapes=shapes)
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
