"""The public store suite fails a store that breaks the contract where users cannot see it: run
as a user runs it (``pausepoint.testing.stores`` imported into a test module of theirs) on a
store that takes events and keeps none — webhooks would never fire, the feed would stay empty
(found by a probe: the suite used to pass such a store)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.cli.conftest import ROOT

SUITE = """
import pytest
from pausepoint.stores import InMemorySessionStore
from pausepoint.testing.stores import *  # noqa: F403


class {name}(InMemorySessionStore):
    async def append(self, session_id, expected_version, entries, summary, events=(), *, durable=True):
        kept = {kept}
        return await super().append(session_id, expected_version, entries, summary, kept, durable=durable)


@pytest.fixture
async def open_store():
    made = {name}()

    async def open_(**options):
        return made if not options else {name}(**options)

    return open_
"""


# The suite's event and outbox tests (the whole suite takes minutes).
EVENTS = "events or deliver or claim or prune or waiter or announces or requeue or binary"


def run_suite(
    tmp_path: Path, name: str, kept: str, tests: str = EVENTS, suite: str = SUITE
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n")
    (tmp_path / "test_my_store.py").write_text(suite.format(name=name, kept=kept))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", tests, "test_my_store.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=300,
    )


def test_a_store_that_drops_its_events_fails_the_suite(tmp_path: Path):
    # (those that fail at once: the others wait for the events to become visible, up to 30 s)
    done = run_suite(tmp_path, "Forgetful", "()", tests="one_delivery or requeue")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED test_my_store.py::test_one_delivery_per_target_claimed_with_a_lease" in done.stdout
    assert "FAILED test_my_store.py::test_retry_then_fail_then_requeue" in done.stdout


def test_a_store_that_takes_every_argument_by_kwargs_and_drops_its_events_fails_it_too(tmp_path: Path):
    """Found by a probe: the runtime gives events to an ``append`` that takes ``**kwargs``, but the
    suite skipped its event tests unless ``append`` named ``events``, so such a store losing
    every event passed (webhooks and the feed then heard nothing)."""
    suite = SUITE.replace(
        "async def append(self, session_id, expected_version, entries, summary, events=(), *, durable=True):",
        "async def append(self, *args, **kwargs):\n        session_id, expected_version, entries, summary = args",
    ).replace("kept, durable=durable)", "kept, **{{k: v for k, v in kwargs.items() if k != 'events'}})")
    done = run_suite(tmp_path, "Forwarding", "()", tests="one_delivery", suite=suite)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED test_my_store.py::test_one_delivery_per_target_claimed_with_a_lease" in done.stdout


def test_a_store_that_keeps_them_passes_it(tmp_path: Path):
    done = run_suite(tmp_path, "Faithful", "events")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "11 passed" in done.stdout and "failed" not in done.stdout


FOLDING = """
import pytest
from pausepoint.stores import InMemorySessionStore
from pausepoint.testing.stores import *  # noqa: F403


class Folding(InMemorySessionStore):
    '''Session ids folded to lower case, as a case-insensitive file system or collation would.'''

    async def append(self, session_id, expected_version, entries, summary, events=(), *, durable=True):
        return await super().append(session_id.lower(), expected_version, entries, summary, events, durable=durable)

    async def read(self, session_id, after_version=0):
        return await super().read(session_id.lower(), after_version)

    async def get_summary(self, session_id):
        return await super().get_summary(session_id.lower())

    async def delete(self, session_id):
        return await super().delete(session_id.lower())


@pytest.fixture
async def open_store():
    made = Folding()

    async def open_(**options):
        return made if not options else Folding(**options)

    return open_
"""


def test_a_store_that_folds_session_ids_fails_the_suite(tmp_path: Path):
    """Two users' sessions ``Order-42`` and ``order-42`` would be one (found by a probe: the
    suite passed such a store)."""
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n")
    (tmp_path / "test_my_store.py").write_text(FOLDING)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "ids_are or append_then",
            "test_my_store.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED test_my_store.py::test_ids_are_kept_exactly" in done.stdout
    assert "1 failed, 1 passed" in done.stdout  # the rest of it holds
