#!/usr/bin/env python3
"""Set up and run pausepoint with nothing but python3: ``python3 dev.py demo`` / ``python3 dev.py test``.

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
EXTRAS = "dev"


def ensure_environment() -> None:
    if not PYTHON.exists():
        print("creating .venv ...", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    stamp = VENV / ".pausepoint-installed"
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + EXTRAS.encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == wanted:
        return
    print(f"installing pausepoint[{EXTRAS}] into .venv ...", flush=True)
    pip = [str(PYTHON), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, "-e", f"{ROOT}[{EXTRAS}]"], check=True)
    stamp.write_text(wanted)


COMMANDS = {
    "demo": [str(PYTHON), "-m", "examples.banking"],
    "test": [str(PYTHON), "-m", "pytest"],
    "bench": [str(PYTHON), "-m", "benchmarks.run"],
    "lint": [str(PYTHON), "-m", "ruff", "check", "pausepoint", "tests", "examples", "benchmarks"],
    "typecheck": [str(PYTHON), "-m", "mypy"],
}


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(f"usage: python3 dev.py {{{'|'.join(COMMANDS)}}} [args...]", file=sys.stderr)
        return 2
    ensure_environment()
    command = COMMANDS[sys.argv[1]] + sys.argv[2:]
    os.chdir(ROOT)
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
