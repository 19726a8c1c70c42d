"""[S6] where a cycle's server CPU goes: the REST cycle in process, layer by layer.

Table [S1] measures the server under ``wrk``: its CPU per cycle, beside the HTTP floor (a bare
Starlette app under the same uvicorn). This table splits what is left, in one process, with no
sockets and no uvicorn, so that a figure is a difference of CPU times the machine's noise moves
little. In one process per store, alternating in rounds, the same banking cycle runs three ways:

- ``api``: through the Python API (``chat.send``, then ``chat.resume`` with the approval): the
  runtime and the store;
- ``rest``: the same two REST requests, each an ASGI call to pausepoint's server app
  (``create_app``, with bearer tokens, as ``benchmarks.server`` serves it) made by a small
  in-process driver: the runtime, the store and pausepoint's server layer (authentication, the
  access check, reading and validating the body, the reply and the pause's view, the
  middleware and routing);
- ``bare``: the same driver against the bare Starlette app of [S1]'s floor (``_bare_app``):
  Starlette and the driver alone.

So pausepoint's server layer costs ``rest - api - bare`` a cycle. What a server under load
spends beyond ``rest`` (the ``S1 - rest`` column, when [S1] ran in the same run) is uvicorn's
HTTP work and the event loop's, which [S1]'s floor row measures on its own, less what 8 clients
let the server share (one fsync for several sessions' commits at ``FULL``: there the column can
be below zero).

    python -m benchmarks.layers [--stores sqlite,sqlite-normal,memory] [--n 300] [--rounds 5]

or as part of ``python -m benchmarks.server`` (``--only S6``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ._bare_app import bare_app
from ._child import answer, child_spec, run_in_child
from ._report import Table, note, us
from .server import APPROVAL, MESSAGE, SESSIONS, TOKEN, make_store

__all__ = ["STORES", "WAYS", "banking_cycles", "cpu_per_cycle", "main", "table_layers"]

STORES = ("sqlite", "sqlite-normal", "memory")
WAYS = ("api", "rest", "bare")


async def post(app: Any, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """One POST of ``body`` as JSON to the ASGI ``app``, as uvicorn would hand it over; the
    reply's JSON (an error status raises)."""
    raw = json.dumps(body).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"authorization", f"Bearer {TOKEN}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(raw)).encode()),
        ],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
    }
    messages = [{"type": "http.request", "body": raw, "more_body": False}]
    replies: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await asyncio.Event().wait()  # the client stays connected
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        replies.append(message)

    await app(scope, receive, send)
    status = replies[0]["status"]
    data = b"".join(message.get("body", b"") for message in replies[1:])
    if status != 200:
        raise RuntimeError(f"{path}: {status} {data[:200]!r}")
    reply: dict[str, Any] = json.loads(data)
    return reply


async def rest_cycle(app: Any) -> None:
    """Send, then approve the pause the reply names, through ``app``."""
    paused = await post(app, SESSIONS, MESSAGE)
    if paused["finish_reason"] != "interrupted":
        raise RuntimeError(f"expected a pause, got {paused['finish_reason']}")
    ref = paused["interrupts"][0]["ref"]
    done = await post(app, f"{SESSIONS}/{paused['session_id']}/interrupts/{ref}/respond", APPROVAL)
    if done["finish_reason"] != "stop":
        raise RuntimeError(f"unexpected end of cycle: {done['finish_reason']}")


Cycle = Callable[[], Awaitable[None]]


def banking_cycles(store: Any) -> dict[str, Cycle]:
    """The banking cycle on ``store``, each way (``WAYS``), as served by ``benchmarks.server``:
    bearer tokens, no console; the garbage collector set as ``pausepoint serve`` sets it."""
    from examples import banking
    from pausepoint import AgentFinishReason
    from pausepoint.cli._serving import tune_garbage_collector
    from pausepoint.server import BearerTokens, create_app

    ai, agent = banking.build(store, [])
    app = create_app(ai, auth=BearerTokens({TOKEN: "bench"}), console=False)
    bare = bare_app()
    tune_garbage_collector()

    async def api_cycle() -> None:
        chat = agent.chat()
        paused = await chat.send(MESSAGE["message"])
        if paused.finish_reason != AgentFinishReason.INTERRUPTED:
            raise RuntimeError(f"expected a pause, got {paused.finish_reason}")
        done = await chat.resume(respond=[paused.interrupts[0].respond({"approved": True})])
        if done.finish_reason != AgentFinishReason.STOP:
            raise RuntimeError(f"unexpected end of cycle: {done.finish_reason}")

    return {"api": api_cycle, "rest": lambda: rest_cycle(app), "bare": lambda: rest_cycle(bare)}


async def cpu_per_cycle(cycle: Cycle, n: int) -> float:
    """CPU µs per cycle over ``n`` cycles."""
    start = time.process_time_ns()
    for _ in range(n):
        await cycle()
    return (time.process_time_ns() - start) / n / 1000


async def measure(store_kind: str, n: int, rounds: int) -> dict[str, Any]:
    """CPU µs per cycle of each way, a median over ``rounds`` rounds of ``n`` cycles each."""
    with tempfile.TemporaryDirectory(prefix="pausepoint-layers-") as folder:
        store = make_store(store_kind, os.path.join(folder, "sessions.db"))
        cycles = banking_cycles(store)
        samples: dict[str, list[float]] = {way: [] for way in WAYS}
        for way in WAYS:  # warm up
            for _ in range(max(20, n // 5)):
                await cycles[way]()
        for _ in range(rounds):
            for way in WAYS:
                samples[way].append(await cpu_per_cycle(cycles[way], n))
        await store.close()
    return {"store": store_kind, **{way: statistics.median(samples[way]) for way in WAYS}}


def table_layers(stores: list[str], n: int, rounds: int, under_load: dict[str, float] | None = None) -> bool:
    """Print [S6]; ``under_load`` maps a store to its server CPU per cycle in [S1] (µs at 8
    clients) when [S1] ran first in the same run. False when a configuration failed."""
    table = Table(
        f"[S6] where a cycle's server CPU goes, in one process per store (no sockets, no uvicorn): "
        f"CPU µs per cycle, median of {rounds} rounds of {n} cycles; load average "
        + " ".join(f"{x:.2f}" for x in os.getloadavg()),
        [("store", 15), ("api", 7), ("rest", 7), ("bare", 6), ("server layer", 13), ("÷ api", 6), ("S1", 7),
         ("S1 - rest", 10)],
    )  # fmt: skip
    table.header()
    ok = True
    for store in stores:
        result = run_in_child("benchmarks.layers", {"store": store, "n": n, "rounds": rounds}, timeout=900)
        if "error" in result:
            table.error(store, result["error"])
            ok = False
            continue
        api, rest, bare = (float(result[way]) for way in WAYS)
        layer = rest - api - bare
        loaded = (under_load or {}).get(store)
        table.row(
            store, us(api), us(rest), us(bare), us(layer), f"{layer / api:.2f}x",
            us(loaded), us(loaded - rest) if loaded else "-",
        )  # fmt: skip
    note("api: the cycle through the Python API (runtime and store); rest: the same two requests as ASGI calls")
    note("to pausepoint's server app; bare: the same calls to [S1]'s bare Starlette app (the driver and Starlette)")
    note("server layer = rest - api - bare: authentication, the access check, the body's validation, the reply and")
    note("the pause's view, middleware, routing; ÷ api: the server layer against api")
    note("S1: the server's CPU per cycle at 8 clients in [S1] this run; S1 - rest: what serving over HTTP adds")
    note("(uvicorn, sockets, the event loop under load; [S1]'s bare row is that cost on its own); it is less, even")
    note("below zero (FULL), where 8 clients let the server share work that cycles one at a time here do not:")
    note("one fsync for the commits of several sessions (GroupSync), one pass of the event loop for several sockets")
    note(f"reproduce: python -m benchmarks.layers --stores {','.join(stores)} --n {n} --rounds {rounds}")
    return ok


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if (spec := child_spec(argv)) is not None:  # one configuration, in a child process
        return answer(asyncio.run(measure(spec["store"], spec["n"], spec["rounds"])))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", default=",".join(STORES), help=f"of {', '.join(STORES)}")
    parser.add_argument("--n", type=int, default=300, help="cycles per round and way (300)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, alternating the ways (5)")
    args = parser.parse_args(argv)
    stores = args.stores.split(",")
    unknown = [store for store in stores if store not in STORES]
    if unknown:
        parser.error(f"unknown store {unknown[0]!r} (known: {', '.join(STORES)})")
    return 0 if table_layers(stores, args.n, args.rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
