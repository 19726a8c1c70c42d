"""The store kit, run on a store of one's own, reports a broken promise with its values, as the
author's own asserts do (found by a probe: every failure was a bare ``AssertionError``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_failing_check_of_the_kit_shows_what_it_compared(tmp_path):
    (tmp_path / "test_mine.py").write_text(
        textwrap.dedent(
            """
            import pytest
            from pausepoint.stores import InMemorySessionStore, LogSlice
            from pausepoint.testing.stores import *  # noqa: F403

            class Backwards(InMemorySessionStore):
                async def read(self, session_id, after_version=0):
                    found = await super().read(session_id, after_version)
                    return None if found is None else LogSlice(found.version, list(reversed(found.entries)))

            @pytest.fixture
            async def open_store():
                shared = Backwards()
                async def open_(**options):
                    return shared
                return open_
            """
        )
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-k", "test_append_then_read"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [line for line in done.stdout.splitlines() if line.startswith("E ")]
    assert any("LogSlice(" in line for line in failed), done.stdout
