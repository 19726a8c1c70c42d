"""Read sessions back in a process of its own: what another process sees of a SQLite file.

    python -m tests.readback DB SESSION_ID...   -> one JSON line: {session_id: view or error}

``view`` is everything a reader can see of a session through the public API — its log version,
history, open pauses, audit trail and last response — as plain JSON, so a test can compare what
one process wrote with what another reads. A session that cannot be read shows the error's
type and message instead (the bug this guards against: a record written that no process can
decode).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from pydantic import TypeAdapter

from pausepoint import AgentResponse, AuditEntry, Message, Pausepoint, PendingInterrupt
from pausepoint.stores import SessionStore, SqliteSessionStore
from pausepoint.testing import ScriptedModel

_MESSAGES = TypeAdapter(list[Message])
_PAUSES = TypeAdapter(list[PendingInterrupt])
_AUDIT = TypeAdapter(list[AuditEntry])
_LAST = TypeAdapter(AgentResponse | None)


async def view(store: SessionStore, session_id: str) -> dict[str, Any]:
    """What a fresh agent of the session's (nothing cached) reads of it, as plain JSON."""
    try:
        summary = await store.get_summary(session_id)
        name = summary.agent if summary is not None and summary.agent else "reader"
        chat = Pausepoint().define_agent(name=name, model=ScriptedModel([]), store=store).chat(session_id)
        return {
            "version": None if summary is None else summary.version,
            "history": _MESSAGES.dump_python(await chat.history(), mode="json"),
            "interrupts": _PAUSES.dump_python(await chat.interrupts(), mode="json"),
            "audit": _AUDIT.dump_python(await chat.audit_trail(), mode="json"),
            "last": _LAST.dump_python(await chat.last_response(), mode="json"),
        }
    except Exception as exc:  # reported, so the test shows what failed to decode
        return {"error": f"{type(exc).__name__}: {exc}"[:2000]}


async def views(db: str, session_ids: list[str]) -> dict[str, Any]:
    store = SqliteSessionStore(db)
    try:
        return {session_id: await view(store, session_id) for session_id in session_ids}
    finally:
        await store.close()


def read_elsewhere(db: str, session_ids: list[str]) -> dict[str, Any]:
    """``views`` computed by another Python process."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-m", "tests.readback", db, *session_ids],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


if __name__ == "__main__":
    print(json.dumps(asyncio.run(views(sys.argv[1], sys.argv[2:]))))
