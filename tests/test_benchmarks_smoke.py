"""The benchmark command runs end to end (tiny sizes). It checks that it works, never how fast."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_quick_benchmark_prints_every_table():
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--no-reference"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    headers = ("[1] Full cycle", "[2] One more turn", "[2b] A cold cycle", "[3] One session", "[4] Streaming")
    for header in (*headers, "[5] pausepoint vs"):
        assert header in proc.stdout, f"missing {header!r}:\n{proc.stdout}"
    assert "ERROR" not in proc.stdout, proc.stdout
    assert "skipped: not requested" in proc.stdout
