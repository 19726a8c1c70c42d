"""One side of ``benchmarks.kernel``: the banking cycle run by whichever ``pausepoint`` is first on
``PYTHONPATH`` (this tree, or an older commit's), through the public API alone, so that the same
file measures both. Prints one JSON line: the CPU and wall time of each cycle, and the mean CPU
a cycle cost the process with the background work it caused (``served``), in microseconds.

    python benchmarks/_kernel_child.py '{"store": "memory", "n": 300, "warmup": 30, "long": 0}'

``store``: ``memory``, ``sqlite-full`` or ``sqlite-normal``. ``long``: cycles one session holds
before the measured ones (0: a new chat per cycle; else every measured cycle continues that
long-lived session, as a server that keeps it warm would).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from typing import Any

import pausepoint
from pausepoint.demo import build
from pausepoint.stores import InMemorySessionStore, SqliteSessionStore

PROMPT = "Transfer $500 to savings."
FINAL = "Transferred $500 to savings."


async def cycle(chat: Any) -> None:
    res = await chat.send(PROMPT)
    res = await chat.resume(respond=[res.interrupts[0].respond({"approved": True})])
    if res.text != FINAL:
        raise RuntimeError(f"unexpected end of cycle: {res.finish_reason}: {res.text!r}")


async def measure(spec: dict[str, Any], path: str) -> dict[str, Any]:
    kind = spec["store"]
    store = (
        InMemorySessionStore()
        if kind == "memory"
        else SqliteSessionStore(path, synchronous="FULL" if kind == "sqlite-full" else "NORMAL")
    )
    _, agent = build(store)
    long = int(spec.get("long", 0))
    warm = agent.chat() if long else None
    for _ in range(long or int(spec["warmup"])):
        await cycle(warm if warm is not None else agent.chat())
        await asyncio.sleep(0)  # as a server's loop between requests: background work may run
    cpu: list[float] = []
    wall: list[float] = []
    began = time.process_time()
    for _ in range(int(spec["n"])):
        chat = warm if warm is not None else agent.chat()
        started, ticked = time.perf_counter(), time.process_time()
        await cycle(chat)
        cpu.append((time.process_time() - ticked) * 1e6)
        wall.append((time.perf_counter() - started) * 1e6)
        # A cycle that never waits on the loop (the stores here answer at once) would leave the
        # checkpoint writes it made due queued until the end; a server's loop runs them between
        # requests, and so does this one, outside the cycle's own CPU and inside ``served``.
        await asyncio.sleep(0)
    if hasattr(agent, "sessions"):
        await agent.sessions.settle()  # background checkpoint writes the measured cycles caused
    served = (time.process_time() - began) * 1e6 / int(spec["n"])  # with those writes
    await store.close()
    return {"cpu": cpu, "wall": wall, "served": served, "pausepoint": os.path.dirname(pausepoint.__file__)}


def main() -> None:
    spec = json.loads(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="pausepoint-kernel-") as tmp:
        print(json.dumps(asyncio.run(measure(spec, os.path.join(tmp, "sessions.db")))))


if __name__ == "__main__":
    main()
