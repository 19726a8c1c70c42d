"""Fixtures of the store suite: every test here runs once per backend it takes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pausepoint.stores import SessionStore

from .backends import ALL, DURABLE, Backend, make_backend


@pytest.fixture(params=ALL)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """Each backend in a place of its own (memory, a SQLite file, a PostgreSQL schema, a Redis prefix)."""
    made = make_backend(request.param, tmp_path)
    yield made
    await made.cleanup()


@pytest.fixture(params=DURABLE)
async def durable_backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """The backends that outlive a process and can be shared by several."""
    made = make_backend(request.param, tmp_path)
    yield made
    await made.cleanup()


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[SessionStore]:
    """A store on the test's backend. (Overrides the memory/SQLite ``store`` of tests/conftest.py.)"""
    made = await backend.open()
    yield made
    await made.close()
