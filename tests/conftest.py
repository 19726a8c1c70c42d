from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from pausepoint.stores import InMemorySessionStore, SessionStore, SqliteSessionStore


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    """Each runtime scenario runs on the in-memory store and on a real SQLite file."""
    made: SessionStore = (
        InMemorySessionStore() if request.param == "memory" else SqliteSessionStore(tmp_path / "sessions.db")
    )
    yield made
    await made.close()


@pytest.fixture(autouse=True)
def _loggers_as_they_were() -> Iterator[None]:
    """The CLI, run in this process by some tests, sets up pausepoint's and uvicorn's loggers for
    a terminal (own handler, no propagation): put them back after each test, so that a later
    test's ``caplog`` sees their records."""
    loggers = [logging.getLogger(name) for name in ("pausepoint", "uvicorn", "uvicorn.access")]
    saved = [(lg, lg.handlers[:], lg.level, lg.propagate, lg.disabled) for lg in loggers]
    yield
    for lg, handlers, level, propagate, disabled in saved:
        lg.handlers, lg.level, lg.propagate, lg.disabled = handlers, level, propagate, disabled
