"""The reference system, genkit 0.12.0, running the same cycle from ``shared/reference-bench``.

That folder is read-only and lives beside the repository. It is copied to a temporary directory;
its ``setup.sh`` creates (or reuses) a virtual environment with genkit installed from PyPI, and its
``bench.py`` runs with parameters matching ours, writing its raw results as JSON. The comparison
is optional: every failure comes back as a reason to print, never as an exception.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_DIR", "STORES", "ReferenceRun", "copy_reference", "reference_python", "run_reference"]

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIR = Path(os.environ.get("PAUSEPOINT_REFERENCE_BENCH", ROOT.parent / "shared" / "reference-bench"))

# Our store -> the reference's store of the same role (its durable store is a JSON file per snapshot).
STORES = {"memory": "memory", "sqlite": "file"}

SETUP_TIMEOUT = 900.0


@dataclass
class ReferenceRun:
    """What the reference run produced: its raw results, or the reason there are none."""

    results: list[dict[str, Any]] = field(default_factory=list)
    version: str | None = None
    reason: str | None = None
    output: str = ""

    def find(self, kind: str, store: str, hist: int | None = None) -> dict[str, Any] | None:
        """The reference's result for a workload kind (``cycles``/``history``) and our store name."""
        for result in self.results:
            if (
                result.get("kind") == kind
                and result.get("store") == STORES.get(store)
                and (hist is None or result.get("hist_turns") == hist)
                and "error" not in result
            ):
                return result
        return None


def _tail(text: str, lines: int = 5) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:] if line.strip())


def copy_reference(directory: Path, into: Path) -> Path:
    """A writable copy of the reference folder ``directory`` inside ``into`` (the source is read-only)."""
    work = into / "reference-bench"
    shutil.copytree(directory, work)
    for path in work.iterdir():
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return work


def reference_python(work: Path) -> tuple[str | None, str | None]:
    """``(python, None)``: the genkit venv's Python that the reference's ``setup.sh`` (run in the
    copy ``work``) created or reused; or ``(None, reason)``."""
    if not (work / "setup.sh").is_file():
        return None, f"no setup.sh in {work}"
    if shutil.which("bash") is None:
        return None, "bash is needed to run the reference's setup.sh"
    try:
        setup = subprocess.run(
            ["bash", "setup.sh"], cwd=work, capture_output=True, text=True, timeout=SETUP_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        return None, f"the reference's setup.sh took longer than {SETUP_TIMEOUT:.0f}s"
    python = setup.stdout.strip().splitlines()[-1] if setup.stdout.strip() else ""
    if setup.returncode != 0 or not os.path.isfile(python):
        return None, f"the reference's setup.sh failed (rc={setup.returncode}): {_tail(setup.stderr)}"
    return python, None


def run_reference(
    directory: Path, *, n: int, warmup: int, hist: list[int], k: int, stores: list[str], timeout: float
) -> ReferenceRun:
    """Set up and run the reference benchmark; see the module docstring."""
    if not (directory / "bench.py").is_file() or not (directory / "setup.sh").is_file():
        return ReferenceRun(reason=f"no reference benchmark at {directory} (set PAUSEPOINT_REFERENCE_BENCH)")
    their_stores = [STORES[s] for s in stores if s in STORES]
    with tempfile.TemporaryDirectory(prefix="pausepoint-reference-") as tmp:
        work = copy_reference(directory, Path(tmp))
        python, reason = reference_python(work)
        if python is None:
            return ReferenceRun(reason=reason)

        out = work / "results.json"
        command = [python, "bench.py", "--n", str(n), "--warmup", str(warmup), "--k", str(k)]
        command += ["--hist", ",".join(map(str, hist)), "--stores", ",".join(their_stores)]
        command += ["--json", str(out), "--timeout", str(timeout)]
        workers = len(their_stores) * (1 + len(hist))  # bench.py's timeout is per worker process
        try:
            bench = subprocess.run(
                command, cwd=work, capture_output=True, text=True, timeout=timeout * workers, check=False
            )
        except subprocess.TimeoutExpired:
            return ReferenceRun(reason=f"the reference benchmark took longer than {timeout:.0f}s per configuration")
        if bench.returncode != 0 or not out.is_file():
            return ReferenceRun(reason=f"the reference benchmark failed (rc={bench.returncode}): {_tail(bench.stderr)}")
        version = subprocess.run(
            [python, "-c", "from importlib.metadata import version; print(version('genkit'))"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        return ReferenceRun(results=json.loads(out.read_text()), version=version or None, output=bench.stdout)
