"""One benchmark configuration in a fresh interpreter, so that no run warms another's caches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def run_in_child(module: str, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run ``python -m module '<spec as JSON>'``; the last JSON line it prints, or ``{"error": ...}``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    command = [sys.executable, "-m", module, json.dumps(spec)]
    try:
        proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {**spec, "error": f"took longer than {timeout:.0f}s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        last = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        return {**spec, "error": f"rc={proc.returncode}: {last[0]}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def child_spec(argv: list[str]) -> dict[str, Any] | None:
    """The configuration ``run_in_child`` gave this process (its first argument, as JSON), or
    None when the module was started by hand."""
    if argv and argv[0].startswith("{"):
        spec: dict[str, Any] = json.loads(argv[0])
        return spec
    return None


def answer(result: Any) -> int:
    """Hand ``result`` back to ``run_in_child`` (it reads the last JSON line printed); the exit status."""
    print(json.dumps(result))
    return 0
