"""A worker process for the cross-process tests: the banking agent on a shared store.

Run as ``python -m tests.stores.worker '<store spec JSON>' <ledger file>`` from the repository
root. It prints ``{"ready": pid, "cycle_seconds": ...}`` once warmed up, then reads one JSON
command per line from stdin and answers with JSON lines on stdout:

- ``{"op": "send", "account": A}``: start a session asking to transfer $5 to A; prints
  ``{"session": id}`` before sending, then ``{"paused": id, "ref": ..., "name": ...}``.
- ``{"op": "answer", "session": id}``: load the session's pause, print ``{"armed": id}``, wait
  for a line ``go``, then approve it; prints ``{"outcome": "won" | <error class>, ...}``.
- ``{"op": "cycles", "tag": T}``: run full cycles (send, pause, approve, final) forever on new
  sessions, printing ``session``, ``paused`` and ``done`` lines; the crash test kills it.
- ``{"op": "die_in_transfer"}``: from now on, SIGKILL this process right after a transfer's
  ledger line is written (the next approved transfer is the last thing it does).
- ``{"op": "exit"}``.

Every transfer the agent makes is appended to the ledger file (one line, ``O_APPEND``), which
the test reads to count side effects across processes — including processes it killed.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from typing import Any

from examples.banking import build
from pausepoint import AgentFinishReason
from pausepoint.errors import PausepointError

from .backends import open_store


class FileLedger(list[str]):
    """The banking example's ledger, made durable and shared: each transfer is one line of a file.

    With ``die_after_write`` the process SIGKILLs itself the moment a line is written: a crash
    right after the tool's side effect, before the runtime could record its result.
    """

    def __init__(self, path: str, *, die_after_write: bool = False) -> None:
        super().__init__()
        self.path = path
        self.die_after_write = die_after_write

    def append(self, item: str) -> None:
        # One write(2) on an O_APPEND descriptor: lines from racing processes never interleave,
        # and the line is in the kernel's hands before the tool returns (a SIGKILL cannot lose it).
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{os.getpid()} {item}\n".encode())
        finally:
            os.close(fd)
        if self.die_after_write:
            os.kill(os.getpid(), signal.SIGKILL)
        super().append(item)


def transfers(ledger_path: str, account: str) -> int:
    """How many transfers to ``account`` the ledger file records, by every process."""
    try:
        with open(ledger_path) as lines:
            return sum(1 for line in lines if line.rstrip("\n").endswith(f"->{account}"))
    except FileNotFoundError:
        return 0


def say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def main(spec: dict[str, Any], ledger_path: str) -> None:
    store = open_store(spec)
    ledger = FileLedger(ledger_path)
    _, agent = build(store, ledger)
    principal = f"worker-{os.getpid()}"
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)

    async def cycle(account: str) -> None:
        chat = agent.chat(principal=principal)
        say({"session": chat.session_id, "account": account})
        res = await chat.send(f"Transfer $7 to {account}.")
        say({"paused": chat.session_id, "ref": res.interrupts[0].ref})
        res = await chat.resume(respond=[res.interrupts[0].respond({"approved": True})])
        assert res.finish_reason == AgentFinishReason.STOP, res
        say({"done": chat.session_id, "text": res.text})

    # Warm up (connections, prepared statements, imports) so a crash test's random kill lands
    # in steady-state turns, and tell it how long one such cycle takes here.
    await cycle(f"warmup{os.getpid()}a")
    started = time.perf_counter()
    await cycle(f"warmup{os.getpid()}b")
    say({"ready": os.getpid(), "cycle_seconds": time.perf_counter() - started})

    while line := await stdin.readline():
        command = json.loads(line)
        op = command["op"]
        if op == "exit":
            break
        if op == "die_in_transfer":
            ledger.die_after_write = True
        elif op == "send":
            chat = agent.chat(principal=principal)
            say({"session": chat.session_id})
            res = await chat.send(f"Transfer $5 to {command['account']}.")
            pause = res.interrupts[0]
            say({"paused": chat.session_id, "ref": pause.ref, "name": pause.name})
        elif op == "answer":
            chat = agent.chat(command["session"], principal=principal)
            # Read the pause now, so that after "go" every racer goes straight to its claim.
            pause = next(i for i in await chat.interrupts() if i.ref == command["ref"])
            say({"armed": command["session"]})
            await stdin.readline()
            try:
                res = await chat.resume(respond=[pause.respond({"approved": True})])
            except PausepointError as exc:
                say({"outcome": type(exc).__name__, "message": str(exc), "pid": os.getpid()})
            else:
                say({"outcome": "won", "text": res.text, "finish": res.finish_reason.value, "pid": os.getpid()})
        elif op == "cycles":
            n = 0
            while True:
                n += 1
                await cycle(f"{command['tag']}x{n}")
        else:
            raise ValueError(f"unknown command {op!r}")
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1]), sys.argv[2]))
