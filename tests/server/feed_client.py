"""Reading the SSE feed of a server over HTTP: events with their ids, as they come."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class FeedReader:
    """Reads ``GET {base}/v1/feed`` in a task: ``connected`` is set once the feed is listening;
    ``events`` holds ``(id, name, data)`` as they come; ``wait_for(n)`` waits for the n-th."""

    base: str
    headers: dict[str, str]
    last_event_id: str | None = None
    events: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    _arrived: asyncio.Condition = field(default_factory=asyncio.Condition)
    _task: asyncio.Task[None] | None = None
    arrival: list[float] = field(default_factory=list)

    async def __aenter__(self) -> FeedReader:
        self._task = asyncio.create_task(self._read())
        await asyncio.wait_for(self.connected.wait(), 30)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _read(self) -> None:
        headers = dict(self.headers)
        if self.last_event_id is not None:
            headers["Last-Event-ID"] = self.last_event_id
        async with (
            httpx.AsyncClient(timeout=None) as http,
            http.stream("GET", self.base + "/v1/feed", headers=headers) as reply,
        ):
            assert reply.status_code == 200, await reply.aread()
            event_id, name = "", ""
            async for line in reply.aiter_lines():
                if line.startswith(": connected"):
                    self.connected.set()
                elif line.startswith("id:"):
                    event_id = line[3:].strip()
                elif line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    async with self._arrived:
                        self.events.append((event_id, name, json.loads(line[5:])))
                        self.arrival.append(asyncio.get_running_loop().time())
                        self._arrived.notify_all()

    async def wait_for(self, count: int, max_wait: float = 30.0) -> list[tuple[str, str, dict[str, Any]]]:
        async def arrived() -> None:
            async with self._arrived:
                await self._arrived.wait_for(lambda: len(self.events) >= count)

        await asyncio.wait_for(arrived(), max_wait)
        return self.events[:count]

    async def ended(self, max_wait: float = 30.0) -> None:
        """Wait until the server ends the stream (``TimeoutError`` if it does not)."""
        assert self._task is not None
        await asyncio.wait_for(asyncio.shield(self._task), max_wait)
