"""Driving ``worker.py`` processes from a test: start, command, read replies, kill -9."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# A guard against a hung worker, not a performance assertion.
REPLY_TIMEOUT = 120.0


class Worker:
    """One ``python -m tests.stores.worker`` process on a shared store and ledger."""

    def __init__(self, process: asyncio.subprocess.Process, stderr: Path) -> None:
        self.process = process
        self.pid = process.pid
        self._stderr = stderr

    @classmethod
    async def start(
        cls, spec: dict[str, Any], ledger: Path, stderr: Path, *, module: str = "tests.stores.worker", extra: str = ""
    ) -> Worker:
        with stderr.open("wb") as errors:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                module,
                json.dumps(spec),
                str(ledger),
                *([extra] if extra else []),
                cwd=ROOT,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=errors,
            )
        return cls(process, stderr)

    def errors(self) -> str:
        return self._stderr.read_text(errors="replace")

    async def expect(self, key: str) -> dict[str, Any]:
        """The next reply carrying ``key`` (earlier replies are progress lines, skipped)."""
        assert self.process.stdout is not None
        while True:
            line = await asyncio.wait_for(self.process.stdout.readline(), REPLY_TIMEOUT)
            if not line:
                raise AssertionError(f"worker {self.pid} exited before replying {key!r}:\n{self.errors()}")
            reply: dict[str, Any] = json.loads(line)
            if key in reply:
                return reply

    async def command(self, command: dict[str, Any] | str) -> None:
        assert self.process.stdin is not None
        text = command if isinstance(command, str) else json.dumps(command)
        self.process.stdin.write(text.encode() + b"\n")
        await self.process.stdin.drain()

    async def exit(self) -> None:
        await self.command({"op": "exit"})
        assert await asyncio.wait_for(self.process.wait(), REPLY_TIMEOUT) == 0, self.errors()

    async def kill(self) -> list[dict[str, Any]]:
        """SIGKILL the process; returns the replies it printed and the test had not read."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
        return await self.wait()

    async def wait(self) -> list[dict[str, Any]]:
        """Wait for the process to end by itself; returns the replies the test had not read."""
        assert self.process.stdout is not None
        rest = await asyncio.wait_for(self.process.stdout.read(), REPLY_TIMEOUT)
        await self.process.wait()
        replies = []
        for line in rest.splitlines():
            try:
                replies.append(json.loads(line))
            except json.JSONDecodeError:  # the line the kill cut short
                continue
        return replies
