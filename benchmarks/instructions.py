"""A cold cycle against a warm one in instructions executed, which a busy machine does not move.

    python -m benchmarks.instructions                      # H = 10, 1,000 and 10,000, about 6 minutes
    python -m benchmarks.instructions --hist 1000 --sessions 2

CPU time on a shared machine moves by tens of per cent from one run to the next (other work on
the host, caches, clock speed), so table [2b]'s ratios are noisy; the instructions a cycle
executes are not. This counts them with valgrind's cachegrind (Debian's ``valgrind`` package;
the table is skipped, saying why, without it). Instructions are not time: a cold load also
touches memory a warm cycle finds in the caches, which costs time and no instructions, so CPU
time ratios stay above these.

For each H, a child process (natively) grows ``--sessions`` + 1 sessions of H approval cycles
in a SQLite file, checkpointed as the default does. Then four runs under cachegrind, each on a
copy of that file (``synchronous="NORMAL"``: no ``fsync``, whose timing would pick where it
runs), count the instructions of the whole process:

- ``warm 0``: an agent runs a cycle on a new session, then two on session 0, which it loads
  cold first (so every code path a cycle or a load takes has run once);
- ``warm n``: the same, then ``n`` more cycles on session 0 (``n`` = ``--sessions``);
- ``fresh``: the same as ``warm 0``, then, for each of sessions 1 to ``n``, a new agent that
  runs a cycle on a new session;
- ``cold``: the same as ``fresh``, each new agent then running a cycle on its session, which
  it loads cold.

A warm cycle is (``warm n`` - ``warm 0``) / ``n``, a cold one (``cold`` - ``fresh``) / ``n``:
what loading the session costs, and the cycle after it. The measuring agents write no
checkpoint (only the cycle is counted), and every counted run has ``PYTHONHASHSEED=0``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from examples.banking import build
from pausepoint.stores import SqliteSessionStore

from ._child import answer, child_spec
from ._report import Table, note
from .cold import _cycle

__all__ = ["INSTRUCTIONS_MODES", "main", "table_instructions"]

ROOT = Path(__file__).resolve().parent.parent
INSTRUCTIONS_MODES = ("warm 0", "warm n", "fresh", "cold")
COMMAND = "python -m benchmarks.instructions --hist {hist} --sessions {sessions}"
_NO_WRITES = 10**9  # checkpoint_every for the measuring agents: they write no checkpoint


async def _grow(path: str, hist: int, sessions: int) -> list[str]:
    """Grow ``sessions`` sessions of ``hist`` approval cycles in the SQLite file ``path``."""
    store = SqliteSessionStore(path, synchronous="NORMAL")
    try:
        _, agent = build(store)
        ids = []
        for _ in range(sessions):
            chat = agent.chat()
            for _ in range(hist):
                await _cycle(agent, chat.session_id)
            ids.append(chat.session_id)
        await agent.sessions.settle()
        return ids
    finally:
        await store.close()


async def _run(path: str, ids: list[str], mode: str) -> None:
    """What one cachegrind run does (see the module's docstring)."""
    store = SqliteSessionStore(path, synchronous="NORMAL")

    def agent() -> Any:
        _, made = build(store)
        made.checkpoint_every = _NO_WRITES
        return made

    try:
        warm = agent()
        await _cycle(warm, warm.chat().session_id)
        for _ in range(2):  # the first loads session 0 cold: every mode has warmed the loading code
            await _cycle(warm, ids[0])
        if mode == "warm n":
            for _ in ids[1:]:
                await _cycle(warm, ids[0])
        elif mode != "warm 0":
            for session in ids[1:]:
                fresh = agent()
                await _cycle(fresh, fresh.chat().session_id)
                if mode == "cold":
                    await _cycle(fresh, session)
    finally:
        await store.close()


def _count(folder: Path, ids: list[str], mode: str, timeout: float) -> int:
    """The instructions one run executes, under cachegrind, on a copy of the grown file."""
    with tempfile.TemporaryDirectory(prefix="pausepoint-instr-") as tmp:
        copy = os.path.join(tmp, "sessions.db")
        for name in os.listdir(folder):
            source = folder / name
            target = os.path.join(tmp, name)
            (shutil.copytree if source.is_dir() else shutil.copy)(source, target)
        spec = json.dumps({"run": mode, "path": copy, "ids": ids})
        env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(ROOT))
        proc = subprocess.run(
            ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
             sys.executable, "-m", "benchmarks.instructions", spec],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        found = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
        if proc.returncode != 0 or found is None:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"{mode}: rc={proc.returncode}: {last}")
        return int(found.group(1).replace(",", ""))


def instructions(hist: int, sessions: int, timeout: float = 1800) -> dict[str, Any]:
    """Instructions per warm and per cold cycle on sessions of ``hist`` approval cycles."""
    with tempfile.TemporaryDirectory(prefix="pausepoint-instr-grown-") as tmp:
        path = os.path.join(tmp, "sessions.db")
        spec = json.dumps({"grow": hist, "path": path, "sessions": sessions + 1})
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.instructions", spec],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"growing: {(proc.stderr.strip().splitlines() or ['no output'])[-1]}")
        ids = json.loads(proc.stdout.strip().splitlines()[-1])
        counts = {mode: _count(Path(tmp), ids, mode, timeout) for mode in INSTRUCTIONS_MODES}
    warm = (counts["warm n"] - counts["warm 0"]) / sessions
    cold = (counts["cold"] - counts["fresh"]) / sessions
    return {"hist": hist, "sessions": sessions, "warm": warm, "cold": cold, "counts": counts}


def table_instructions(hist: tuple[int, ...], sessions: int) -> list[dict[str, Any]]:
    """Print the table, a row per H; returns the raw results."""
    table = Table(
        f"[2c] A cold cycle against a warm one in instructions (cachegrind), SQLite, {sessions} cycles each",
        [("H", 6), ("warm", 10), ("cold", 10), ("cold/warm", 9)],
    )
    table.header()
    if shutil.which("valgrind") is None:
        note("skipped: valgrind is not installed (apt-get install valgrind)")
        return []
    results = []
    for h in hist:
        try:
            r = instructions(h, sessions)
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            note(f"H={h}: ERROR {error}")
            continue
        results.append(r)
        table.row(f"{h:,}", f"{r['warm'] / 1e6:.2f} M", f"{r['cold'] / 1e6:.2f} M", f"{r['cold'] / r['warm']:.2f}x")
    note("instructions per cycle, the whole process's; a cold cycle loads the session from its checkpoint and log")
    note("reproduce: " + COMMAND.format(hist=",".join(map(str, hist)), sessions=sessions))
    return results


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if (spec := child_spec(argv)) is not None:  # a child: grow, or one counted run
        if "grow" in spec:
            return answer(asyncio.run(_grow(spec["path"], spec["grow"], spec["sessions"])))
        asyncio.run(_run(spec["path"], spec["ids"], spec["run"]))
        return 0
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions", description=__doc__.splitlines()[0])
    parser.add_argument("--hist", default="10,1000,10000", help="approval cycles before the measured ones")
    parser.add_argument("--sessions", type=int, default=3, help="cold cycles (and warm ones) counted per H")
    options = parser.parse_args(argv)
    if options.sessions < 1:
        parser.error("--sessions must be at least 1")
    table_instructions(tuple(int(h) for h in options.hist.split(",")), options.sessions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
