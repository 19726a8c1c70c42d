"""[S7] what one piece of a served cycle costs, in context: each piece taken out in turn.

A piece of code a cycle runs once costs several times more there than in a loop of its own (its
code and data are no longer in the caches by the time the cycle comes back to it), so a
micro-benchmark misjudges it. Here the banking cycle runs in one process, as in [S6] (the
``api`` or the ``rest`` way, ``benchmarks.layers``), and for each lever the piece is taken out
and put back in alternating rounds: the difference of the medians is what it costs a cycle,
where it runs. The ``aa`` lever changes nothing: its difference is the noise.

The levers reach into pausepoint's internals (a benchmark's privilege): each names what it takes
out. Taking a piece out is a measurement, not a proposal: some of them keep a promise (the turn's
own task keeps a cancelled request from cutting a turn short).

    python -m benchmarks.ablation [--store memory|sqlite-normal|sqlite] [--levers aa,no-view,...]
                                  [--n 300] [--rounds 9]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ._child import answer, child_spec, run_in_child
from ._report import Table, note, us
from .layers import STORES, banking_cycles, cpu_per_cycle
from .server import make_store

__all__ = ["main", "table_ablation"]


@dataclass(frozen=True)
class Lever:
    """What taking a piece out means: ``take_out()`` and ``put_back()``, on the ``way`` (``api``
    or ``rest``) whose cycle runs the piece."""

    way: str
    what: str
    take_out: Callable[[], None]
    put_back: Callable[[], None]


def _swap(owner: Any, name: str, replacement: Any) -> tuple[Callable[[], None], Callable[[], None]]:
    original = getattr(owner, name)
    return (lambda: setattr(owner, name, replacement)), (lambda: setattr(owner, name, original))


def _young_generation(threshold: int) -> tuple[Callable[[], None], Callable[[], None]]:
    before: list[tuple[int, int, int]] = []

    def take_out() -> None:
        before.append(gc.get_threshold())
        gc.set_threshold(threshold, *before[-1][1:])

    def put_back() -> None:
        gc.set_threshold(*before.pop())

    return take_out, put_back


def _levers() -> dict[str, Lever]:
    from starlette.responses import Response

    from pausepoint.server import _display, _messages, _replies, _service, _turns
    from pausepoint.turn import _journal

    async def replied(running: Awaitable[Any], on_done: Callable[[], None], reply: Any) -> Any:
        """``run_turn``'s JSON reply once ``running`` (the turn) ends, however it runs."""
        try:
            response = await running
        except Exception as exc:
            return _turns.error_response(exc)
        finally:
            on_done()
        return Response(_turns.dumps(reply(response)), media_type="application/json")

    async def turn_in_request_task(request: Any, turn: Any, *, on_done: Any, reply: Any, **_: Any) -> Any:
        """``run_turn``'s non-streamed path with the turn awaited in the request's own task."""
        return await replied(turn(False), on_done, reply)

    async def turn_task_without_shield(
        request: Any, turn: Any, *, keep_alive: Any, on_done: Any, reply: Any, **_: Any
    ) -> Any:
        """``run_turn``'s non-streamed path with the turn's task awaited directly."""
        task = asyncio.ensure_future(turn(False))
        keep_alive.add(task)
        task.add_done_callback(keep_alive.discard)
        return await replied(task, on_done, reply)

    announce = _journal.announce

    def built_not_written(*args: Any) -> list[Any]:
        announce(*args)
        return []

    async def principal(self: Any, request: Any) -> str:
        return "bench"

    def no_views(agent: Any, items: list[dict[str, Any]], pauses: Any, tenant: Any) -> list[dict[str, Any]]:
        for item in items:
            item["view"] = None
        return items

    return {
        "aa": Lever("rest", "nothing: the noise", lambda: None, lambda: None),
        "turn-in-request-task": Lever(
            "rest",
            "the turn's own task (the turn awaited in the request's task)",
            *_swap(_replies, "run_turn", turn_in_request_task),
        ),
        "no-shield": Lever(
            "rest", "asyncio.shield around the turn's task", *_swap(_replies, "run_turn", turn_task_without_shield)
        ),
        "no-view": Lever("rest", "the pause's view in the reply", *_swap(_display, "_with_views", no_views)),
        "no-auth": Lever(
            "rest", "authentication (Service.principal)", *_swap(_service.Service, "principal", principal)
        ),
        "no-message-size": Lever(
            "rest", "the user message's size check", *_swap(_messages, "check_message_size", lambda *_: None)
        ),
        "events-unwritten": Lever(
            "api",
            "writing the events (built as before, not given to the store)",
            *_swap(_journal, "announce", built_not_written),
        ),
        "no-events": Lever(
            "api", "the events (built, then written with the records)", *_swap(_journal, "announce", lambda *_: [])
        ),
        "gc-young-20000": Lever(
            "api", "young-generation collections (every 20,000 allocations, not 700)", *_young_generation(20_000)
        ),
    }


async def measure(store_kind: str, levers: list[str], n: int, rounds: int) -> dict[str, Any]:
    """For each lever: the median CPU µs per cycle of its way with the piece in and out."""
    found = _levers()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="pausepoint-ablation-") as folder:
        store = make_store(store_kind, os.path.join(folder, "sessions.db"))
        cycles = banking_cycles(store)
        for way in ("api", "rest"):  # warm up
            for _ in range(max(20, n // 5)):
                await cycles[way]()
        for name in levers:
            lever = found[name]
            cycle = cycles[lever.way]
            with_piece: list[float] = []
            without: list[float] = []
            try:
                for _ in range(rounds):
                    with_piece.append(await cpu_per_cycle(cycle, n))
                    lever.take_out()
                    try:
                        without.append(await cpu_per_cycle(cycle, n))
                    finally:
                        lever.put_back()
            except Exception as exc:  # a lever that no longer fits the code: say which
                results[name] = {"error": f"{type(exc).__name__}: {exc}"}
                continue
            results[name] = {
                "way": lever.way,
                "with": statistics.median(with_piece),
                "without": statistics.median(without),
            }
        await store.close()
    return {"store": store_kind, "levers": results}


def table_ablation(store: str, levers: list[str], n: int, rounds: int) -> bool:
    """Print [S7] for ``store``. False when a lever failed."""
    table = Table(
        f"[S7] what one piece of a cycle costs where it runs, store {store}: CPU µs a cycle with it and without "
        f"it, medians of {rounds} alternating rounds of {n} cycles; load average "
        + " ".join(f"{x:.2f}" for x in os.getloadavg()),
        [("lever", 21), ("way", 4), ("with", 7), ("without", 7), ("costs", 7), ("share", 6)],
    )
    table.header()
    result = run_in_child("benchmarks.ablation", {"store": store, "levers": levers, "n": n, "rounds": rounds}, 1800)
    if "error" in result:
        table.error(store, result["error"])
        return False
    ok = True
    whats = {name: lever.what for name, lever in _levers().items()}  # the parent never takes one out
    for name in levers:
        found = result["levers"][name]
        if "error" in found:
            table.error(name, found["error"])
            ok = False
            continue
        costs = found["with"] - found["without"]
        table.row(
            name, found["way"], us(found["with"]), us(found["without"]), us(costs), f"{costs / found['with']:.1%}"
        )
    for name in levers:
        note(f"{name}: {whats[name]}")
    note("costs: with - without; share: of the cycle with it; aa's cost is the noise of the others")
    command = f"python -m benchmarks.ablation --store {store} --levers {','.join(levers)}"
    note(f"reproduce: {command} --n {n} --rounds {rounds}")
    return ok


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if (spec := child_spec(argv)) is not None:  # one store, in a child process
        return answer(asyncio.run(measure(spec["store"], spec["levers"], spec["n"], spec["rounds"])))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", default="memory", help=f"one of {', '.join(STORES)} (memory)")
    known = list(_levers())
    parser.add_argument("--levers", default=",".join(known), help=f"of {', '.join(known)} (all)")
    parser.add_argument("--n", type=int, default=300, help="cycles per round (300)")
    parser.add_argument("--rounds", type=int, default=9, help="rounds, each with the piece and without it (9)")
    args = parser.parse_args(argv)
    if args.store not in STORES:
        parser.error(f"unknown store {args.store!r} (known: {', '.join(STORES)})")
    levers = args.levers.split(",")
    unknown = [lever for lever in levers if lever not in known]
    if unknown:
        parser.error(f"unknown lever {unknown[0]!r} (known: {', '.join(known)})")
    return 0 if table_ablation(args.store, levers, args.n, args.rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
