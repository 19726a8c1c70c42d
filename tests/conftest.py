from __future__ import annotations

from collections.abc import AsyncIterator
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
