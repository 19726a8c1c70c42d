"""The hand-written floor: the banking cycle on SQLite with no framework, to compare commits with.

Two cycles, written the way a careful person would without pausepoint, with the same tables,
the same conditional update on a version, and records of the same sizes as pausepoint writes:

- ``naive`` — one commit per step: the send writes the pause; the resume runs the tool, then
  writes the answer, the call, its result and the final text in one commit. Two commits per
  cycle, the fewest possible — but a crash after the transfer and before that commit loses the
  answer: after the restart the pause is open again, and approving it transfers twice.
- ``safe`` — the same guarantees as pausepoint: the answer is claimed (a conditional commit)
  before the model runs, the call is committed before the tool starts, the result and the final
  text at the end. Four commits per cycle; three must reach stable storage (the claim need not:
  the next one covers it, see ``pausepoint.turn._journal.Journal``).

``synchronous`` is SQLite's: ``FULL`` syncs every commit that must be durable, ``NORMAL`` none.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import tempfile
import time
from datetime import UTC, datetime
from typing import Any

from ._measure import summarize

__all__ = ["Floor", "floor"]

_SCHEMA = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, version INTEGER NOT NULL, pending INTEGER NOT NULL);
CREATE TABLE records (session_id TEXT NOT NULL, version INTEGER NOT NULL, kind TEXT NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (session_id, version));
"""


def _record(kind: str, **fields: Any) -> tuple[str, bytes]:
    body = {"kind": kind, "at": datetime.now(UTC).isoformat(), **fields}
    return kind, json.dumps(body, separators=(",", ":")).encode()


class _Cycle:
    def __init__(self, conn: sqlite3.Connection, synchronous: str) -> None:
        self.conn = conn
        self.synchronous = synchronous
        self.ledger: list[str] = []
        self.commits = 0
        self.durable = 0

    def commit(self, session: str, version: int, records: list[tuple[str, bytes]], *, durable: bool) -> int:
        """One conditional commit of ``records`` on ``session`` at ``version``; the new version."""
        conn = self.conn
        if self.synchronous == "FULL":
            conn.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")
        conn.execute("BEGIN IMMEDIATE")
        if version == 0:
            conn.execute("INSERT INTO sessions VALUES (?, ?, 1)", (session, len(records)))
        elif (
            conn.execute(
                "UPDATE sessions SET version = ?, pending = 0 WHERE id = ? AND version = ?",
                (version + len(records), session, version),
            ).rowcount
            != 1
        ):
            conn.execute("ROLLBACK")
            raise RuntimeError("conflict")
        conn.executemany(
            "INSERT INTO records VALUES (?, ?, ?, ?)",
            [(session, version + i, kind, data) for i, (kind, data) in enumerate(records, 1)],
        )
        conn.execute("COMMIT")
        self.commits += 1
        self.durable += durable and self.synchronous == "FULL"
        return version + len(records)

    def send(self) -> tuple[str, str, int]:
        session, call, pause = secrets.token_hex(16), secrets.token_hex(12), secrets.token_hex(12)
        prompt = "Transfer $500 to savings."
        approval = {"action": "transfer_money", "details": "Transfer $500 to savings"}
        version = self.commit(
            session,
            0,
            [
                _record("session_started", agent="bankingAgent", owner=None),
                _record("message", message={"role": "user", "content": [{"text": prompt}]}, via="python"),
                _record("message", message={"role": "model", "content": [{"toolRequest": {
                    "name": "userApproval", "ref": call, "input": approval}}]}),
                _record("call_paused", ref=pause, call_ref=call, name="userApproval", input=approval),
                _record("turn_ended", turn=1, finish_reason="interrupted", open_refs=[pause]),
            ],
            durable=True,
        )  # fmt: skip
        return session, call, version

    def resume(self, session: str, call: str, version: int, *, safe: bool) -> None:
        answer = _record("call_answered", call_ref=call, name="userApproval", decision="respond",
                         output={"approved": True})  # fmt: skip
        transfer = secrets.token_hex(12)
        request = {"name": "transfer_money", "ref": transfer, "input": {"amount": "500", "to_account": "savings"}}
        asked = _record("message", message={"role": "model", "content": [{"toolRequest": request}]})
        if safe:
            version = self.commit(session, version, [answer], durable=False)  # the claim
            version = self.commit(session, version, [asked], durable=True)  # the call, before the tool
        self.ledger.append("500->savings")  # the tool's side effect
        final = "Transferred $500 to savings."
        done = [
            _record("call_completed", call_ref=transfer, name="transfer_money", output=final),
            _record("message", message={"role": "model", "content": [{"text": final}]}),
            _record("turn_ended", turn=1, finish_reason="stop"),
        ]
        self.commit(session, version, done if safe else [answer, asked, *done], durable=True)


class Floor:
    """A hand-written cycle (``mode``: ``naive`` or ``safe``) on its own SQLite file, WAL mode."""

    def __init__(self, folder: str, mode: str, synchronous: str) -> None:
        if mode not in ("naive", "safe") or synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"unknown floor {mode!r} / {synchronous!r}")
        self.mode = mode
        self.path = os.path.join(folder, f"floor-{mode}.db")
        conn = sqlite3.connect(self.path, isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.executescript(_SCHEMA)
        self.cycle = _Cycle(conn, synchronous)

    def run(self) -> int:
        """One cycle; its wall time in nanoseconds."""
        start = time.perf_counter_ns()
        session, call, version = self.cycle.send()
        self.cycle.resume(session, call, version, safe=self.mode == "safe")
        return time.perf_counter_ns() - start

    def close(self) -> None:
        self.cycle.conn.close()


async def floor(mode: str, synchronous: str, n: int, warmup: int) -> dict[str, Any]:
    """N hand-written cycles, alone in this process."""
    with tempfile.TemporaryDirectory(prefix="pausepoint-floor-") as tmp:
        hand = Floor(tmp, mode, synchronous)
        for _ in range(warmup):
            hand.run()
        hand.cycle.commits = hand.cycle.durable = 0
        cpu = time.process_time_ns()
        times = [hand.run() for _ in range(n)]
        cpu = time.process_time_ns() - cpu
        hand.close()
    return {
        "mode": mode,
        "synchronous": synchronous,
        "n": n,
        "cycle": summarize(times),
        "cpu_per_cycle": cpu / n / 1000,
        "commits": hand.cycle.commits / n,
        "durable": hand.cycle.durable / n,
    }
