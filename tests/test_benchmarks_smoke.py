"""The benchmark command runs end to end (tiny sizes). It checks that it works, never how fast."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def quick_benchmark(*options: str, timeout: float) -> str:
    """What ``python -m benchmarks.run --quick OPTIONS`` printed; it must exit 0."""
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", *options],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_quick_benchmark_prints_every_table():
    out = quick_benchmark("--no-reference", timeout=300)
    headers = ("[1] Full cycle", "[2] One more turn", "[2b] A cold cycle", "[2c] A cold cycle against a warm one in",
               "[3] One session", "[4] Streaming")  # fmt: skip
    for header in (*headers, "[5] pausepoint vs"):
        assert header in out, f"missing {header!r}:\n{out}"
    assert "ERROR" not in out, out
    assert "skipped: not requested" in out
    counted = out.partition("[2c]")[2].partition("[3]")[0]
    if shutil.which("valgrind"):  # CI installs it (.ci/apt-packages)
        assert re.search(r"^10 +[\d.]+ M +[\d.]+ M +[\d.]+x$", counted, re.MULTILINE), counted
    else:
        assert "skipped: valgrind is not installed" in counted, counted


def test_quick_benchmark_compares_with_the_reference():
    """Table 5 divides the reference's figures by ours: it runs genkit 0.12.0 (installed from
    PyPI into its own venv by reference-bench/setup.sh on first use)."""
    table = quick_benchmark(timeout=900).partition("[5] pausepoint vs")[2]
    if "skipped:" in table:  # the reference could not be set up here (no PyPI): say why
        pytest.skip(table.strip().splitlines()[1])
    for row in (
        "memory: cycle median µs",
        "memory: full cycle @H=100 mean µs",
        "durable: sqlite vs file: CPU per cycle µs",
    ):
        assert row in table, table


def test_server_benchmark_prints_s1_beside_its_http_floor():
    """[S1] serves the REST cycle from a real server process under load, then the same cycle
    from a bare Starlette app (the HTTP floor), and says what pausepoint's server costs against it."""
    command = ["benchmarks.server", "--only", "S1", "--seconds", "1", "--clients", "1,8", "--sync", "NORMAL"]
    proc = subprocess.run(
        [sys.executable, "-m", *command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    table = proc.stdout.partition("[S1]")[2]
    for row in ("NORMAL", "bare"):
        for clients in (1, 8):
            found = re.search(rf"^ +{row} +{clients} +([\d.]+) .* (\d+)$", table, re.MULTILINE)
            assert found, f"no {row} row at {clients} clients:\n{table}"
            assert float(found.group(1)) > 0 and found.group(2) == "0", found.group(0)  # cycles ran, none failed
    assert re.search(r"against the floor's [\d.]+ ms: NORMAL [\d.]+ ms = [\d.]+x$", table, re.MULTILINE), table
    assert "--sync NORMAL" in table, table
