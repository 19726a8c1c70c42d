from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.stores.backends import Backend, make_backend

from .proxy import Deployment, nginx_binary


@pytest.fixture(params=["postgres", "redis"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """One PostgreSQL schema or one Redis key prefix for the whole deployment, removed at the end."""
    nginx_binary()  # skip (or fail in CI) before anything starts
    made = make_backend(request.param, tmp_path)
    try:
        yield made
    finally:
        await made.cleanup()


@pytest.fixture
def deployed(backend: Backend, tmp_path: Path) -> Iterator[Deployment]:
    """Two servers behind nginx, as docs/deploy.md runs them."""
    with Deployment(backend, tmp_path) as deployment:
        yield deployment


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=60) as client:
        yield client
