from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from pausepoint.server import Limits
from tests.server.harness import build_app, serve_in_thread
from tests.server.lab import LabEvents


class Served:
    """The examples served in a thread on loopback; ``ledger``/``executed``/``events`` see what
    tools (and the lab's model) did."""

    def __init__(self, url: str, ledger: list[str], executed: list[dict[str, Any]], events: LabEvents) -> None:
        self.url = url
        self.bank = url + "/bank"
        self.shell = url + "/shell"
        self.lab = url + "/lab"
        self.ledger = ledger
        self.executed = executed
        self.events = events


@pytest.fixture
def served(tmp_path: Any) -> Iterator[Served]:
    ledger: list[str] = []
    executed: list[dict[str, Any]] = []
    events = LabEvents()
    spec = {"backend": "sqlite", "path": str(tmp_path / "sessions.db")}
    limits = Limits(max_body_bytes=64 * 1024, max_message_bytes=8 * 1024, max_history=60)
    with serve_in_thread(
        lambda: build_app(spec, ledger=ledger, executed=executed, limits=limits, events=events)
    ) as url:
        yield Served(url, ledger, executed, events)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


ALICE = {"Authorization": "Bearer alice-token"}
BOB = {"Authorization": "Bearer bob-token"}
