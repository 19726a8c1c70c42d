"""Fuzz the running server — the OpenAPI document's operations, the same with nasty bodies, and
the Genkit endpoint — with schemathesis and hypothesis: no 5xx, no hang, strict JSON replies."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.server.harness import ROOT, build_app, serve_in_thread


def test_openapi_fuzzing_finds_no_server_error(tmp_path):
    spec = {"backend": "sqlite", "path": str(tmp_path / "fuzz.db")}
    with serve_in_thread(lambda: build_app(spec)) as url:
        done = subprocess.run(
            [sys.executable, "-m", "tests.server.fuzz_openapi", url + "/bank", "alice-token"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,  # a hang fails the test instead of the run
            check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["operations"] >= 10  # every operation of the document but the feed was fuzzed
    assert report["nasty_operations"] >= 5  # every POST, with surrogates, NaN, long integers, deep nesting
    assert report["genkit_operations"] == 4  # the turn, getSnapshot, abort, and an unknown agent
    assert report["failures"] == []
