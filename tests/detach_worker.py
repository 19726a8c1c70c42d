"""``python -m tests.detach_worker '<store spec JSON>' <events file>``: a process that detaches a
slow turn of the lab agent (``tests.server.lab``) and then only waits — to be aborted from
another process, or killed. Prints ``{"session", "turn"}`` once the turn is recorded as running,
then ``{"response": <finish reason>}`` if the turn ends while this process lives."""

from __future__ import annotations

import asyncio
import json
import sys

from tests.server.lab import LabEvents, build
from tests.stores.backends import open_store


async def main(spec: dict[str, object], events: str) -> None:
    ai = build(open_store(spec), LabEvents(events))
    chat = ai.agents["labAgent"].chat(principal="worker")
    turn = await chat.detach("Slow: take your time")
    print(json.dumps({"session": turn.session_id, "turn": turn.turn_id}), flush=True)
    response = await turn.wait()
    print(json.dumps({"response": response.finish_reason.value}), flush=True)
    await asyncio.Event().wait()  # stay alive until told to go (the test closes stdin or kills)


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1]), sys.argv[2]))
