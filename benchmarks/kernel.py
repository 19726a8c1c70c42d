"""[K] This tree's banking cycle beside an earlier commit's, in one run: CPU per cycle as a ratio.

    python -m benchmarks.kernel                          # against main@d3e238e, the kernel issue's baseline
    python -m benchmarks.kernel --base HEAD~5 --rounds 7 --n 200

The earlier commit's ``pausepoint`` is taken out of git (``git archive``) into a temporary folder;
each round runs the same public-API cycle (``_kernel_child.py``) in a fresh interpreter, once per
tree, alternating which goes first, so both see the same machine. Rows: a new chat per cycle
(``new``) and a long-lived warm session (``warm``: cycles continuing one session that already
holds ``--long`` cycles; its ``served`` column counts the background work the cycles caused, such
as checkpoint writes). The figure is the median over rounds of each round's median CPU per cycle;
``÷ base`` is this tree's over the base's (the kernel issue's target in memory: ≤ 0.5).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from ._report import Table, note

ROOT = Path(__file__).resolve().parent.parent
CHILD = Path(__file__).resolve().parent / "_kernel_child.py"
BASE = "d3e238e"  # main when the kernel issue (41) was filed

__all__ = ["main"]


def extract(commit: str, into: Path) -> Path:
    """``commit``'s ``pausepoint`` package, unpacked under ``into``; the folder to put on the path."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit, "pausepoint"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    tar = into / "base.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as unpacked:
        unpacked.extractall(into, filter="data")
    return into


def run(tree: Path, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(
        [sys.executable, str(CHILD), json.dumps(spec)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{tree}: {done.stderr.strip().splitlines()[-1:] or 'no output'}")
    result: dict[str, Any] = json.loads(lines[-1])
    if Path(result["pausepoint"]).resolve().parent != tree.resolve():
        raise RuntimeError(f"ran {result['pausepoint']}, not {tree}'s pausepoint")
    return result


def measure(trees: dict[str, Path], spec: dict[str, Any], rounds: int, timeout: float) -> dict[str, dict[str, float]]:
    """Per tree: the median over rounds of the round's median CPU per cycle, and of ``served``."""
    found: dict[str, dict[str, list[float]]] = {name: {"cpu": [], "served": []} for name in trees}
    names = list(trees)
    for index in range(rounds):
        for name in names if index % 2 == 0 else reversed(names):
            result = run(trees[name], spec, timeout)
            found[name]["cpu"].append(statistics.median(result["cpu"]))
            found[name]["served"].append(result["served"])
    return {name: {k: statistics.median(v) for k, v in values.items()} for name, values in found.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kernel", description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=BASE, help=f"the commit to compare with (default {BASE})")
    parser.add_argument("--stores", default="memory,sqlite-normal,sqlite-full")
    parser.add_argument("--n", type=int, default=200, help="measured cycles per run")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--long", type=int, default=100, help="cycles the warm row's session holds first")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="pausepoint-kernel-base-") as tmp:
        trees = {"this": ROOT, "base": extract(args.base, Path(tmp))}
        table = Table(
            f"[K] this tree against {args.base}: CPU µs per banking cycle, median of {args.rounds} rounds",
            [("store / row", 20), ("this", 8), ("base", 8), ("÷ base", 7), ("served", 8), ("base", 8), ("÷ base", 7)],
        )
        table.header()
        for store in args.stores.split(","):
            for row, long in (("new", 0), ("warm", args.long)):
                spec = {"store": store, "n": args.n, "warmup": args.warmup, "long": long}
                got = measure(trees, spec, args.rounds, args.timeout)
                this, base = got["this"], got["base"]
                table.row(
                    f"{store} {row}",
                    f"{this['cpu']:,.0f}",
                    f"{base['cpu']:,.0f}",
                    f"{this['cpu'] / base['cpu']:.2f}",
                    f"{this['served']:,.0f}",
                    f"{base['served']:,.0f}",
                    f"{this['served'] / base['served']:.2f}",
                )
        note("new: a new chat per cycle; warm: one session that held --long cycles first, kept warm")
        note("served: the process's CPU per cycle over the run, with the background work it caused")
        note(f"reproduce: python -m benchmarks.kernel --base {args.base} --rounds {args.rounds} --n {args.n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
