"""The app the deployment tests serve: ``pausepoint serve tests.deploy.app:ai`` (the store comes
from the command line or the config file, as in production).

- ``bankingAgent``: the banking example. Every transfer is one line of the ledger file named by
  ``PAUSEPOINT_DEPLOY_LEDGER`` (``tests.stores.worker.FileLedger``: one ``write(2)`` on an
  ``O_APPEND`` descriptor), so the test counts side effects across processes, killed ones too.
  A call left running by a killed process is presumed lost after ``ABANDON_AFTER``, not 15 min.
  A transfer to an account named ``slow...`` holds its process for ``SLOW_TRANSFER`` seconds
  after the ledger line is written (the whole process: its event loop waits): the kill test
  kills the process the line names meanwhile, with the transfer made and its result not yet
  recorded, and requests of other sessions waiting there.
- ``narrator``: a model that streams its first words, then waits until the file
  ``$PAUSEPOINT_DEPLOY_GATES/<word>`` exists (``<word>``: the message), then ends its turn. The
  test opens that gate only once the first words reached it through the proxy: a proxy that
  held the stream would leave the gate shut, and the turn would end saying so.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from pausepoint import Message, ModelRequest, ModelResponse, TextDelta, TextPart
from pausepoint.demo import build
from pausepoint.stores import InMemorySessionStore
from tests.stores.worker import FileLedger

__all__ = ["ABANDON_AFTER", "FIRST_WORDS", "GATE_WAIT", "SLOW_TRANSFER", "GatedModel", "SlowLedger", "ai"]

ABANDON_AFTER = timedelta(seconds=2)
SLOW_TRANSFER = 30.0  # the test kills the process at once: a guard long enough for a loaded machine
GATE_WAIT = 60.0  # a guard: a gate nobody opens ends the turn after this long, saying so
FIRST_WORDS = "Waiting at the gate"


class GatedModel:
    """Streams ``FIRST_WORDS``, waits for its gate file, then ends with whether it opened."""

    name = "test/gated"

    def __init__(self, gates: Path) -> None:
        self.gates = gates

    async def generate(
        self, request: ModelRequest, on_chunk: Callable[[TextDelta], None] | None = None
    ) -> ModelResponse:
        gate = self.gates / request.messages[-1].text
        if on_chunk is not None:
            on_chunk(TextDelta(FIRST_WORDS))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + GATE_WAIT
        while not gate.exists() and loop.time() < deadline:  # noqa: ASYNC110 - a file another process makes
            await asyncio.sleep(0.02)
        rest = ": the gate opened." if gate.exists() else ": the gate stayed shut."
        if on_chunk is not None:
            on_chunk(TextDelta(rest))
        return ModelResponse(Message("model", [TextPart(FIRST_WORDS + rest)]))


class SlowLedger(FileLedger):
    """The shared ledger file; a transfer to a ``slow...`` account takes ``SLOW_TRANSFER`` s."""

    def append(self, item: str) -> None:
        super().append(item)
        if item.partition("->")[2].startswith("slow"):
            time.sleep(SLOW_TRANSFER)  # blocks the process: its other requests wait too


ai, _ = build(
    InMemorySessionStore(),  # replaced by serve's store
    SlowLedger(os.environ.get("PAUSEPOINT_DEPLOY_LEDGER", os.devnull)),
    abandon_after=ABANDON_AFTER,
)
ai.define_agent(
    name="narrator",
    model=GatedModel(Path(os.environ.get("PAUSEPOINT_DEPLOY_GATES", "."))),
    store=InMemorySessionStore(),
)
