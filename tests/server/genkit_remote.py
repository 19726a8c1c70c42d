"""Run by the reference's own Python (genkit 0.12.0): its ``remote_agent`` against our server.

``python genkit_remote.py <agent url> <token>`` prints one JSON object describing what the
reference client saw. Kept free of pausepoint imports: it runs in genkit's environment.
"""

import asyncio
import json
import sys

from genkit.exp import remote_agent


async def main(url: str, token: str) -> None:
    agent = remote_agent(url, headers={"Authorization": f"Bearer {token}"}, state_management="server")
    chat = agent.chat()
    res = await chat.send("Transfer $500 to savings.")
    interrupt = res.interrupts[0]
    paused = {"finish": str(res.finish_reason), "name": interrupt.name, "input": interrupt.input}
    turn = chat.resume_stream(respond=[interrupt.respond({"approved": True, "feedback": "ok"})])
    texts = [chunk.text async for chunk in turn.stream if chunk.text]
    done = await turn.response
    snapshot = await chat.get_snapshot()
    status = await chat.abort()
    print(
        json.dumps(
            {
                "paused": paused,
                "texts": texts,
                "text": done.text,
                "finish": str(done.finish_reason),
                "session_id": chat.session_id,
                "snapshot_id": chat.snapshot_id,
                "snapshot_messages": len(snapshot.state.messages) if snapshot and snapshot.state else None,
                "abort": str(status),
            }
        )
    )


asyncio.run(main(sys.argv[1], sys.argv[2]))
