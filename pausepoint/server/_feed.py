"""The SSE feed of new pauses and answers, across sessions and processes.

How it finds changes: while anyone is subscribed, one task per app polls each agent's store
for the most recently updated sessions every ``interval`` seconds (``list_sessions`` ordered by
update time; one cheap query per agent), and compares each session's version with the last one
seen. Changes made through this process's own routes are announced at once (``notify``), so the
poll only carries what other processes did. For a changed session it reads the pauses open now
and the audit trail, and emits what is new since the feed last looked:

    event: pause    data: {"agent", "session_id", "owner", "interrupt": PendingInterrupt}
    event: answer   data: {"agent", "session_id", "owner", "entry": AuditEntry}

(each interrupt and entry with its ``view``, as everywhere in the REST API).

A subscriber sees only the sessions its principal may view. The feed starts from "now": read
the inbox (``GET /v1/agents/{agent}/sessions?pending=true``) for what was already waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._app import Pausepoint
from ..stores import SessionSummary
from ._display import audit_json, interrupts_json

__all__ = ["Feed", "Subscription"]

log = logging.getLogger("pausepoint.server")


@dataclass(slots=True)
class _Seen:
    version: int
    open_pauses: set[str] = field(default_factory=set)
    answers: int = 0


@dataclass(slots=True, eq=False)
class Subscription:
    """One subscriber's queue of ``(event name, data)``, filtered by ``visible``."""

    visible: Callable[[SessionSummary], bool]
    queue: asyncio.Queue[tuple[str, dict[str, Any]]] = field(default_factory=lambda: asyncio.Queue(maxsize=1000))


class Feed:
    def __init__(self, ai: Pausepoint, *, interval: float = 1.0, page: int = 200) -> None:
        self.ai = ai
        self.interval = interval
        self.page = page
        self._subscribers: set[Subscription] = set()
        self._seen: dict[tuple[str, str], _Seen] = {}
        self._dirty: set[tuple[str, str]] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    def notify(self, agent: str, session_id: str) -> None:
        """A route of this process changed the session: look at it now (if anyone listens)."""
        if self._subscribers:
            self._dirty.add((agent, session_id))
            self._wake.set()

    async def subscribe(self, visible: Callable[[SessionSummary], bool]) -> Subscription:
        subscription = Subscription(visible)
        self._subscribers.add(subscription)
        if self._task is None or self._task.done():
            self._ready.clear()
            self._task = asyncio.create_task(self._run())
        await self._ready.wait()  # the baseline is taken: everything after this is news
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscribers.discard(subscription)
        if not self._subscribers and self._task is not None:
            self._task.cancel()
            self._task = None
            self._seen.clear()

    async def close(self) -> None:
        self._subscribers.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        try:
            await self._poll(baseline=True)
        finally:
            self._ready.set()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)
            self._wake.clear()
            try:
                dirty, self._dirty = self._dirty, set()
                for agent, session_id in dirty:
                    summary = await self.ai.agents[agent].store.get_summary(session_id)
                    if summary is not None:
                        await self._check(summary)
                await self._poll(baseline=False)
            except Exception:  # a store hiccup must not end the feed
                log.exception("the approvals feed failed to poll; trying again")

    async def _poll(self, *, baseline: bool) -> None:
        for name, agent in self.ai.agents.items():
            for summary in await agent.list_sessions(limit=self.page):
                key = (name, summary.session_id)
                seen = self._seen.get(key)
                if baseline:
                    if seen is None:
                        self._seen[key] = await self._state(summary)
                elif seen is None or seen.version < summary.version:
                    await self._check(summary)

    async def _state(self, summary: SessionSummary) -> _Seen:
        chat = self.ai.agents[summary.agent].chat(summary.session_id)
        open_pauses = {p.pause_id for p in await chat.interrupts()}
        return _Seen(summary.version, open_pauses, len(await chat.audit_trail()))

    async def _check(self, summary: SessionSummary) -> None:
        key = (summary.agent, summary.session_id)
        seen = self._seen.get(key) or _Seen(0)
        if seen.version >= summary.version and key in self._seen:
            return
        agent = self.ai.agents[summary.agent]
        chat = agent.chat(summary.session_id)
        pauses, trail = await chat.interrupts(), await chat.audit_trail()
        base = {"agent": summary.agent, "session_id": summary.session_id, "owner": summary.owner}
        events: list[tuple[str, dict[str, Any]]] = []
        for entry in audit_json(agent, [e for e in trail[seen.answers :] if e.decision != "message"]):
            events.append(("answer", {**base, "entry": entry}))
        new = [p for p in pauses if p.pause_id not in seen.open_pauses]  # a call that paused again is news
        for pause in interrupts_json(agent, new):
            events.append(("pause", {**base, "interrupt": pause}))
        self._seen[key] = _Seen(summary.version, {p.pause_id for p in pauses}, len(trail))
        for subscriber in list(self._subscribers):
            if subscriber.visible(summary):
                for item in events:
                    with contextlib.suppress(asyncio.QueueFull):  # a stalled reader loses events, not memory
                        subscriber.queue.put_nowait(item)
