"""The measured workloads, one configuration per process: ``python -m benchmarks._workloads CONFIG``.

CONFIG is a JSON object, ``{"workload": name, ...arguments}``; the result is printed as one JSON
line on stdout. Running each configuration in a fresh process keeps peak RSS, the heap and the
allocator's state per configuration, so one workload cannot tax the next.

Every workload drives the public API only, on the banking example's scripted model (a rule-based
stand-in for a real model, like the reference's ``anchor_app``), and checks each outcome so a
broken runtime fails the run instead of timing the wrong thing.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from examples.banking import build
from pausepoint import (
    Agent,
    AgentFinishReason,
    Chat,
    Message,
    ModelChunk,
    ModelRequest,
    ModelResponse,
    Pausepoint,
    TextChunk,
    TextDelta,
    TextPart,
)
from pausepoint.stores import InMemorySessionStore, SessionStore, SqliteSessionStore
from pausepoint.testing import ScriptedModel

from ._floor import Floor, floor
from ._measure import TimedModel, json_safe, rss_now, rss_peak, summarize

__all__ = ["WORKLOADS", "main"]

PROMPT = "Transfer $500 to savings."
FINAL = "Transferred $500 to savings."

Result = dict[str, Any]


# -- set-up ---------------------------------------------------------------------------------------


@dataclass
class Bench:
    """The banking agent under test, its store, and the timing wrapper around its model."""

    agent: Agent
    store: SessionStore
    model: TimedModel
    path: str | None
    appends: Appends


def make_store(kind: str, path: str) -> SessionStore:
    """``memory``, ``sqlite`` (the default durability, ``synchronous="FULL"``), ``sqlite-normal``."""
    if kind == "memory":
        return InMemorySessionStore()
    if kind == "sqlite":
        return SqliteSessionStore(path)
    if kind == "sqlite-normal":
        return SqliteSessionStore(path, synchronous="NORMAL")
    raise ValueError(f"unknown store {kind!r} (known: memory, sqlite, sqlite-normal)")


class Appends:
    """Counts a store's appends and the durable ones among them (the commits a cycle makes)."""

    def __init__(self, store: SessionStore, *, wrap: bool = True) -> None:
        self.total = 0
        self.durable = 0
        if not wrap:
            return
        inner = store.append

        async def append(*args: Any, durable: bool = True, **kwargs: Any) -> int:
            self.total += 1
            self.durable += durable
            return await inner(*args, durable=durable, **kwargs)

        store.append = append  # type: ignore[method-assign]


@asynccontextmanager
async def banking(store_kind: str, *, count: bool = False) -> AsyncIterator[Bench]:
    """The banking example on a fresh store (SQLite: a file in a temporary directory); with
    ``count``, its appends are counted (a wrapper that costs a little per append)."""
    with tempfile.TemporaryDirectory(prefix="pausepoint-bench-") as tmp:
        path = os.path.join(tmp, "sessions.db")
        store = make_store(store_kind, path)
        _, agent = build(store)
        model = TimedModel(agent.model)
        agent.model = model
        appends = Appends(store, wrap=count)
        try:
            yield Bench(agent, store, model, path if store_kind.startswith("sqlite") else None, appends)
        finally:
            await store.close()


async def cycle(agent: Agent, chat: Chat | None = None) -> tuple[int, int]:
    """One full cycle; returns the send and resume times in nanoseconds."""
    chat = chat if chat is not None else agent.chat()
    start = time.perf_counter_ns()
    res = await chat.send(PROMPT)
    sent = time.perf_counter_ns()
    if res.finish_reason != AgentFinishReason.INTERRUPTED or not res.interrupts:
        raise RuntimeError(f"expected a pause, got {res.finish_reason}: {res.text!r}")
    res = await chat.resume(respond=[res.interrupts[0].respond({"approved": True})])
    resumed = time.perf_counter_ns()
    if res.finish_reason != AgentFinishReason.STOP or res.text != FINAL:
        raise RuntimeError(f"unexpected end of cycle: {res.finish_reason}: {res.text!r}")
    return sent - start, resumed - sent


async def plain_send(chat: Chat, text: str) -> int:
    """One plain text turn; returns its time in nanoseconds."""
    start = time.perf_counter_ns()
    res = await chat.send(text)
    elapsed = time.perf_counter_ns() - start
    if res.finish_reason != AgentFinishReason.STOP:
        raise RuntimeError(f"a plain turn ended {res.finish_reason}")
    return elapsed


async def warm_up(agent: Agent, cycles: int) -> None:
    """Run throwaway cycles so imports, caches and the allocator settle before measuring."""
    for _ in range(cycles):
        await cycle(agent)
    gc.collect()


def tenth_means(ns: list[int]) -> tuple[float, float]:
    """Mean of the first and of the last tenth, in µs: a difference shows cost growing with N."""
    tenth = max(1, len(ns) // 10)
    return statistics.fmean(ns[:tenth]) / 1000, statistics.fmean(ns[-tenth:]) / 1000


# -- 1. full cycles -------------------------------------------------------------------------------


async def cycles(store: str, n: int, warmup: int) -> Result:
    """N full cycles, each on a new chat."""
    async with banking(store) as bench:
        await warm_up(bench.agent, warmup)
        model_ns = bench.model.ns
        sends: list[int] = []
        resumes: list[int] = []
        wall, cpu = time.perf_counter_ns(), time.process_time_ns()
        for _ in range(n):
            send, resume = await cycle(bench.agent)
            sends.append(send)
            resumes.append(resume)
        wall, cpu = time.perf_counter_ns() - wall, time.process_time_ns() - cpu
        totals = [s + r for s, r in zip(sends, resumes, strict=True)]
        first, last = tenth_means(totals)
        return {
            "store": store,
            "n": n,
            "cycle": summarize(totals),
            "send": summarize(sends),
            "resume": summarize(resumes),
            "wall_per_cycle": wall / n / 1000,
            "cpu_per_cycle": cpu / n / 1000,
            "model_per_cycle": (bench.model.ns - model_ns) / n / 1000,
            "first_tenth": first,
            "last_tenth": last,
        }


# Cycles whose WAL pages are counted: few enough that the WAL stays under SQLite's automatic
# checkpoint (1,000 pages), which would empty it.
WAL_CYCLES = 30


async def wal_pages(path: str, one_cycle: Callable[[], Any]) -> float:
    """The pages a cycle writes to the WAL of the SQLite file at ``path``: WAL_CYCLES cycles on
    an emptied WAL, counted by a connection of its own (what SQLite's checkpoint reports)."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as side:
        if side.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]:
            raise RuntimeError(f"could not empty the WAL of {path}")
        for _ in range(WAL_CYCLES):
            done = one_cycle()
            if inspect.isawaitable(done):
                await done
        frames = side.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
    return int(frames) / WAL_CYCLES


async def durability(synchronous: str, n: int, warmup: int) -> Result:
    """pausepoint's cycle on SQLite beside the two hand-written ones (``_floor``), alternated
    cycle by cycle in this process so that the disk's mood (fsync times vary with the
    machine's other work) weighs on all three alike."""
    store = "sqlite" if synchronous == "FULL" else "sqlite-normal"
    async with banking(store, count=True) as bench:
        folder = os.path.dirname(bench.path or "")
        floors = {mode: Floor(folder, mode, synchronous) for mode in ("naive", "safe")}
        ours: list[int] = []
        theirs: dict[str, list[int]] = {mode: [] for mode in floors}
        cpu = {"pausepoint": 0, **{mode: 0 for mode in floors}}
        counts = (0, 0)
        for i in range(warmup + n):
            if i == warmup:
                counts = (bench.appends.total, bench.appends.durable)
                for hand in floors.values():
                    hand.cycle.commits = hand.cycle.durable = 0
            started = time.process_time_ns()
            send, resume = await cycle(bench.agent)
            if i >= warmup:
                ours.append(send + resume)
                cpu["pausepoint"] += time.process_time_ns() - started
            for mode, hand in floors.items():
                started = time.process_time_ns()
                elapsed = hand.run()
                if i >= warmup:
                    theirs[mode].append(elapsed)
                    cpu[mode] += time.process_time_ns() - started
        fsyncs = synchronous == "FULL"
        result: Result = {
            "synchronous": synchronous,
            "n": n,
            "wal_cycles": WAL_CYCLES,
            "pausepoint": {
                "cycle": summarize(ours),
                "cpu_per_cycle": cpu["pausepoint"] / n / 1000,
                "commits": (bench.appends.total - counts[0]) / n,
                "durable": (bench.appends.durable - counts[1]) / n if fsyncs else 0,
            },
            **{
                mode: {
                    "cycle": summarize(theirs[mode]),
                    "cpu_per_cycle": cpu[mode] / n / 1000,
                    "commits": hand.cycle.commits / n,
                    "durable": hand.cycle.durable / n,
                }
                for mode, hand in floors.items()
            },
        }
        result["pausepoint"]["wal_pages"] = await wal_pages(bench.path or "", lambda: cycle(bench.agent))
        for mode, hand in floors.items():
            result[mode]["wal_pages"] = await wal_pages(hand.path, hand.run)
            hand.close()
        return result


# -- 2. cost with history -------------------------------------------------------------------------


async def grow(agent: Agent, turns: int, times: list[int] | None = None) -> Chat:
    """A new session holding ``turns`` plain text turns (each a user and a model message)."""
    chat = agent.chat()
    for i in range(turns):
        elapsed = await plain_send(chat, f"hello number {i}, just chatting")
        if times is not None:
            times.append(elapsed)
    return chat


async def history(store: str, hist: int, k: int, warmup: int) -> Result:
    """Per-turn cost on top of ``hist`` prior turns.

    pausepoint cannot fork a session (on purpose), so every measured operation gets a session
    of its own, grown to exactly ``hist`` turns beforehand: k sessions for a plain send, k for
    a full cycle. Each operation therefore sees the same history, as in the reference's forks.
    """
    async with banking(store) as bench:
        agent = bench.agent
        await warm_up(agent, warmup)
        building: list[int] = []
        for_plain = [await grow(agent, hist, building if i == 0 else None) for i in range(k)]
        for_cycle = [await grow(agent, hist) for _ in range(k)]
        messages = len(await for_cycle[0].history())
        gc.collect()  # start measuring without the garbage of the build pending

        plain = [await plain_send(chat, "one more plain message") for chat in for_plain]
        sends: list[int] = []
        resumes: list[int] = []
        cpu: list[int] = []
        for chat in for_cycle:
            started = time.process_time_ns()
            send, resume = await cycle(agent, chat)
            cpu.append(time.process_time_ns() - started)
            sends.append(send)
            resumes.append(resume)

        # What a process that has nothing cached pays to load such a session (reads every record).
        loads: list[int] = []
        for chat in for_plain:
            _, fresh = build(bench.store)
            start = time.perf_counter_ns()
            await fresh.chat(chat.session_id).history()
            loads.append(time.perf_counter_ns() - start)

        tail = max(1, min(10, hist // 10))
        return {
            "store": store,
            "hist": hist,
            "k": k,
            "messages": messages,
            "plain": summarize(plain),
            "cycle": summarize([s + r for s, r in zip(sends, resumes, strict=True)]),
            "send": summarize(sends),
            "resume": summarize(resumes),
            "cycle_cpu": statistics.fmean(cpu) / 1000,
            "build_first": statistics.fmean(building[:tail]) / 1000 if building else None,
            "build_last": statistics.fmean(building[-tail:]) / 1000 if building else None,
            "cold_load": summarize(loads),
        }


# -- 3. memory and bytes stored -------------------------------------------------------------------

SHAPES = ("text", "text-1k", "cycle")


def sqlite_file_bytes(path: str) -> int:
    """The database's size on disk once the WAL is folded into the main file."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


async def memory(store: str, turns: int, shape: str, warmup: int) -> Result:
    """One session grown to ``turns`` turns: the memory it holds and the bytes each turn stored.

    Shapes: ``text`` (a short user message and its echo), ``text-1k`` (a 1 KiB user message,
    so a turn adds ~2 KiB of text) and ``cycle`` (a full approval cycle per turn).
    """
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r} (known: {', '.join(SHAPES)})")
    async with banking(store) as bench:
        await warm_up(bench.agent, warmup)
        rss_before = rss_now()
        file_before = sqlite_file_bytes(bench.path) if bench.path else 0

        chat = bench.agent.chat()
        stored: list[int] = []  # bytes of the records each turn appended
        text: list[int] = []  # bytes of text the turn added (user message and final reply)
        version = 0
        for i in range(turns):
            if shape == "cycle":
                await cycle(bench.agent, chat)
                added = PROMPT + FINAL
            else:
                message = f"hello number {i}, just chatting"
                if shape == "text-1k":
                    message = message.ljust(1024, ".")
                res = await chat.send(message)
                added = message + res.text
            text.append(len(added.encode()))
            log = await bench.store.read(chat.session_id, after_version=version)
            assert log is not None
            stored.append(sum(len(entry.data) for entry in log.entries))
            version = log.version

        gc.collect()
        rss_after = rss_now()
        file_after = sqlite_file_bytes(bench.path) if bench.path else 0
        tail = max(1, min(10, turns // 10))
        return {
            "store": store,
            "shape": shape,
            "turns": turns,
            "records": version,
            "rss_delta": rss_after - rss_before,
            "stored_first": statistics.fmean(stored[:tail]),
            "stored_last": statistics.fmean(stored[-tail:]),
            "stored_total": sum(stored),
            "text_per_turn": statistics.fmean(text),
            "file_per_turn": (file_after - file_before) / turns if bench.path else None,
        }


# -- 4. streaming ---------------------------------------------------------------------------------


def story(words: int) -> str:
    return " ".join(f"word{i}" for i in range(words))


def paced_model(ai: Pausepoint, text: str) -> Any:
    """A model that yields to the event loop before each word, as a network stream would."""
    words = text.split(" ")
    pieces = [w + " " for w in words[:-1]] + words[-1:]

    async def generate(request: ModelRequest, on_chunk: Callable[[ModelChunk], None] | None) -> ModelResponse:
        for piece in pieces:
            await asyncio.sleep(0)
            if on_chunk is not None:
                on_chunk(TextDelta(piece))
        return ModelResponse(Message("model", [TextPart(text)]))

    return ai.define_model(name="paced", fn=generate)


async def streamed(chat: Chat, prompt: str) -> tuple[int, int, list[Any], Any]:
    """Send ``prompt`` streamed, reading every chunk: (first-chunk ns, total ns, chunks, response)."""
    start = time.perf_counter_ns()
    turn = chat.send_stream(prompt)
    first = 0
    chunks: list[Any] = []
    async for chunk in turn:
        if not chunks:
            first = time.perf_counter_ns() - start
        chunks.append(chunk)
    res = await turn.response
    return first, time.perf_counter_ns() - start, chunks, res


async def streaming(model: str, words: int, n: int, warmup: int) -> Result:
    """A turn of ``words`` small text deltas, streamed and not, on a new chat each time.

    ``burst``: the scripted model, which emits every delta at once; ``paced``: a model that
    yields to the event loop between deltas, so the consumer reads each as it comes.
    """
    text = story(words)
    ai = Pausepoint()
    if model == "burst":
        chosen: Any = ScriptedModel(lambda _request: text, stream=True)
    elif model == "paced":
        chosen = paced_model(ai, text)
    else:
        raise ValueError(f"unknown streaming model {model!r} (known: burst, paced)")
    agent = ai.define_agent(name="storyteller", model=chosen, store=InMemorySessionStore())
    prompt = "Tell me a long story."

    plain: list[int] = []
    total: list[int] = []
    first: list[int] = []
    count = 0
    for i in range(warmup + n):
        # Alternate the two modes so drift in machine load hits both alike.
        elapsed = await plain_send(agent.chat(), prompt)
        ttfc, whole, chunks, res = await streamed(agent.chat(), prompt)
        if "".join(c.text for c in chunks if isinstance(c, TextChunk)) != res.text or res.text != text:
            raise RuntimeError("the streamed text does not add up to the response text")
        if i >= warmup:
            plain.append(elapsed)
            total.append(whole)
            first.append(ttfc)
            count = len(chunks)

    # The model's own share of the streaming cost: creating the deltas, with a no-op sink.
    request = ModelRequest([Message("user", [TextPart(prompt)])])
    quiet: list[int] = []
    loud: list[int] = []
    for _ in range(n):
        start = time.perf_counter_ns()
        await chosen.generate(request, None)
        quiet.append(time.perf_counter_ns() - start)
        start = time.perf_counter_ns()
        await chosen.generate(request, lambda _chunk: None)
        loud.append(time.perf_counter_ns() - start)

    plain_s, total_s = summarize(plain), summarize(total)
    return {
        "model": model,
        "words": words,
        "chunks": count,
        "plain": plain_s,
        "streamed": total_s,
        "first_chunk": summarize(first),
        "per_chunk": (total_s["median"] - plain_s["median"]) / count,
        "model_per_chunk": (statistics.median(loud) - statistics.median(quiet)) / 1000 / count,
    }


async def streamed_cycle(agent: Agent) -> tuple[int, int, int]:
    """One full cycle through ``send_stream`` / ``resume_stream``: (first-chunk ns, total ns, chunks)."""
    chat = agent.chat()
    first, sent, chunks, res = await streamed(chat, PROMPT)
    if res.finish_reason != AgentFinishReason.INTERRUPTED:
        raise RuntimeError(f"expected a pause, got {res.finish_reason}")
    start = time.perf_counter_ns()
    turn = chat.resume_stream(respond=[res.interrupts[0].respond({"approved": True})])
    more = [chunk async for chunk in turn]
    res = await turn.response
    resumed = time.perf_counter_ns() - start
    if res.text != FINAL:
        raise RuntimeError(f"unexpected end of cycle: {res.text!r}")
    return first, sent + resumed, len(chunks) + len(more)


async def stream_cycles(n: int, warmup: int) -> Result:
    """The banking cycle streamed (every chunk read) beside the same cycle not streamed (memory)."""
    async with banking("memory") as bench:
        plain: list[int] = []
        total: list[int] = []
        first: list[int] = []
        count = 0
        for i in range(warmup + n):
            send, resume = await cycle(bench.agent)
            ttfc, whole, count = await streamed_cycle(bench.agent)
            if i >= warmup:
                plain.append(send + resume)
                first.append(ttfc)
                total.append(whole)
        return {
            "model": "cycle",
            "chunks": count,
            "plain": summarize(plain),
            "streamed": summarize(total),
            "first_chunk": summarize(first),
            "per_chunk": (statistics.median(total) - statistics.median(plain)) / 1000 / count,
        }


# -- entry point ----------------------------------------------------------------------------------

WORKLOADS: dict[str, Callable[..., Coroutine[Any, Any, Result]]] = {
    "cycles": cycles,
    "floor": floor,
    "durability": durability,
    "history": history,
    "memory": memory,
    "streaming": streaming,
    "stream_cycles": stream_cycles,
}


def main(argv: list[str]) -> None:
    spec = json.loads(argv[1])
    name = spec.pop("workload")
    result = asyncio.run(WORKLOADS[name](**spec))
    result.update(workload=name, peak_rss=rss_peak(), load=os.getloadavg()[0])
    print(json.dumps(json_safe(result)))


if __name__ == "__main__":
    main(sys.argv)
