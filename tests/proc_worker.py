"""A worker process for cross-process tests: the banking agent on a shared SQLite file.

    python -m tests.proc_worker pause  DB LEDGER              -> prints {"session_id", "ref"}
    python -m tests.proc_worker answer DB LEDGER SID REF GO   -> waits for file GO, answers, prints the outcome

The ledger is a file; every transfer appends one line (O_APPEND), so it counts side effects
across processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

from examples import banking
from pausepoint import ToolResponse
from pausepoint.errors import PausepointError
from pausepoint.stores import SqliteSessionStore


class FileLedger(list[str]):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def append(self, item: str) -> None:
        with open(self.path, "a") as f:
            f.write(f"{os.getpid()} {item}\n")


def wait_for(path: str) -> None:
    while not os.path.exists(path):
        time.sleep(0.001)


async def main(argv: list[str]) -> None:
    command, db, ledger_path = argv[:3]
    store = SqliteSessionStore(db)
    _, agent = banking.build(store, FileLedger(ledger_path))
    if command == "pause":
        res = await agent.chat().send("Transfer $500 to savings.")
        print(json.dumps({"session_id": res.session_id, "ref": res.interrupts[0].ref}))
    elif command == "answer":
        session_id, ref, go = argv[3:6]
        chat = agent.chat(session_id)
        await asyncio.to_thread(wait_for, go)
        try:
            res = await chat.resume(respond=[ToolResponse(ref, "userApproval", {"approved": True})])
            print(json.dumps({"outcome": "ok", "text": res.text}))
        except PausepointError as exc:
            print(json.dumps({"outcome": exc.code}))
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
