"""Approval cycles through the proxy as a careful client runs them, one session each: a message
(the transfer pauses for approval), then the approval; every tenth cycle sends its approval a
second time, which must be refused.

A server killed mid-request costs the client that request (nginx answers 502, or the connection
breaks). The client then does what docs/deploy.md says: it sends a message again after reading
the session (its pause may be there already), and retries an answer with the same
``Idempotency-Key``, which replays the answer's outcome once its turn has ended. A turn that
its server died in does not end by itself: the retry answers ``resume_in_progress``, and an
empty resume (``POST .../resume {}``) goes on from what the store holds — at once when the dead
server ran no tool, after ``abandon_after`` (``turn_in_progress`` until then) when it did, the
call then recorded as of unknown outcome. Everything the client met is counted in ``Tally.met``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from .proxy import ALICE, text

SESSIONS = "/v1/agents/bankingAgent/sessions"
APPROVAL = {"output": {"approved": True}}
DUPLICATE_EVERY = 10
# 409s that say "not yet": another process holds the session, or a dead one did until abandon_after
WAIT = {"turn_in_progress", "resume_in_progress", "concurrent_update"}
RETRY_FOR = 120.0  # a guard against a session that never completes, not a performance bound


@dataclass
class Tally:
    """What the clients did and met, summed over every cycle."""

    cycles: int = 0
    duplicates_sent: int = 0
    duplicates_refused: int = 0
    met: Counter[str] = field(default_factory=Counter)  # "502", "transport", "turn_in_progress", ...
    accounts: dict[str, str] = field(default_factory=dict)  # account -> its session
    progress: asyncio.Condition = field(default_factory=asyncio.Condition)  # notified at each cycle's end

    async def reached(self, cycles: int) -> None:
        """Wait until ``cycles`` cycles have ended."""
        async with self.progress:
            await self.progress.wait_for(lambda: self.cycles >= cycles)


class Client:
    """Runs cycles through ``base`` (nginx), counting into ``tally``."""

    def __init__(self, http: httpx.AsyncClient, base: str, tally: Tally) -> None:
        self.http = http
        self.base = base
        self.tally = tally
        self.pending: list[asyncio.Task[None]] = []  # cycles started beside the workers

    async def call(self, method: str, path: str, body: Any = None, key: str | None = None) -> httpx.Response | None:
        """One request; None when the connection broke (its server died under it)."""
        headers = {**ALICE, **({"Idempotency-Key": key} if key else {})}
        try:
            reply = await self.http.request(method, self.base + path, json=body, headers=headers)
        except httpx.TransportError:
            self.tally.met["transport"] += 1
            return None
        if reply.status_code >= 500:
            self.tally.met[str(reply.status_code)] += 1
        elif reply.status_code == 409:
            self.tally.met[code(reply)] += 1
        return reply

    async def cycle(self, account: str) -> None:
        """One session: its transfer to ``account`` asked for, approved, and done."""
        session = uuid.uuid4().hex
        self.tally.accounts[account] = session
        pause = await self.message(session, f"Transfer $5 to {account}.")
        path = f"{SESSIONS}/{session}/interrupts/{pause['ref']}/respond"
        await self.answer(session, path)
        async with self.tally.progress:
            self.tally.cycles += 1
            number = self.tally.cycles
            self.tally.progress.notify_all()
        if number % DUPLICATE_EVERY == 0:
            self.tally.duplicates_sent += 1
            key = uuid.uuid4().hex  # another request than the first: not a retry of it
            for _ in range(int(RETRY_FOR / 0.2)):
                reply = await self.call("POST", path, APPROVAL, key=key)
                if reply is not None and reply.status_code < 500:
                    break
                await asyncio.sleep(0.2)  # lost with a server that died: the same request again
            else:
                raise AssertionError(f"session {session}: the duplicate approval never had an answer")
            if reply.status_code == 409 and code(reply) == "already_resolved":
                self.tally.duplicates_refused += 1

    async def message(self, session: str, message: str) -> dict[str, Any]:
        """Send ``message`` to the new session ``session``; its pause."""
        deadline = time.monotonic() + RETRY_FOR
        while time.monotonic() < deadline:
            reply = await self.call("POST", f"{SESSIONS}/{session}/messages", {"message": message})
            if reply is not None and reply.status_code == 200:
                body = reply.json()
                assert body["finish_reason"] == "interrupted", body
                return dict(body["interrupts"][0])
            if reply is not None and reply.status_code == 409 and code(reply) in WAIT:
                await asyncio.sleep(0.2)
                continue
            if reply is None or reply.status_code >= 500 or code(reply) == "pending_interrupts":
                # Lost with its server, or an earlier try paused already: is its pause there?
                pauses = await self.call("GET", f"{SESSIONS}/{session}/interrupts")
                if pauses is not None and pauses.status_code == 200 and pauses.json()["interrupts"]:
                    return dict(pauses.json()["interrupts"][0])
                await asyncio.sleep(0.2)
                continue
            raise AssertionError(f"message to {session}: {reply.status_code} {reply.text}")
        raise AssertionError(f"session {session}: the message never paused")

    async def answer(self, session: str, path: str) -> None:
        """Approve the pause at ``path`` until the session's turn has ended."""
        key = uuid.uuid4().hex
        deadline = time.monotonic() + RETRY_FOR
        while time.monotonic() < deadline:
            reply = await self.call("POST", path, APPROVAL, key=key)
            if reply is not None and reply.status_code == 200:
                assert reply.json()["finish_reason"] == "stop", reply.text
                return
            if reply is not None and reply.status_code == 409 and code(reply) == "resume_in_progress":
                # The answer was taken, and its turn has not ended: the server that took it may
                # have died. An empty resume goes on from what the store holds (once the calls it
                # was running are presumed lost); then the keyed retry replays the outcome.
                self.tally.met["empty resume"] += 1
                await self.call("POST", f"{SESSIONS}/{session}/resume", {})
                await asyncio.sleep(0.2)
                continue
            if reply is None or reply.status_code >= 500 or code(reply) in WAIT:
                await asyncio.sleep(0.2)
                continue
            raise AssertionError(f"answer in {session}: {reply.status_code} {reply.text}")
        raise AssertionError(f"session {session}: the answer never ended its turn")


def code(reply: httpx.Response) -> str:
    try:
        return str(reply.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return f"{reply.status_code} without a JSON error"


async def final_texts(http: httpx.AsyncClient, base: str, sessions: dict[str, str]) -> dict[str, list[str]]:
    """Each session's model texts, in order, read from the store through ``base``."""
    found: dict[str, list[str]] = {}
    for account, session in sessions.items():
        reply = await http.get(f"{base}{SESSIONS}/{session}/history", headers=ALICE)
        assert reply.status_code == 200, reply.text
        found[account] = [text({"message": m}) for m in reply.json()["messages"] if m["role"] == "model"]
    return found
