"""Run by the reference's own Python (genkit 0.12.0): a quorum approval through its ``remote_agent``.

``python genkit_quorum.py <agent url> <token>`` asks for a transfer that two of treasury must
approve, approves it once (``interrupt.restart()``, as Genkit's users approve a tool), tries
again, and prints one JSON object: what the client saw after each step. Kept free of pausepoint
imports: it runs in genkit's environment.
"""

import asyncio
import json
import sys

from genkit.exp import remote_agent


def parts(response):
    """The output message's interrupt parts (Genkit's ``AgentInterrupt`` keeps only name, ref
    and input: the part's metadata is read where its users read it, in the message)."""
    output = response.raw.model_dump(by_alias=True, exclude_none=True, mode="json")
    content = (output.get("message") or {}).get("content", [])
    refs = {i.ref for i in response.interrupts}
    return [p for p in content if p.get("toolRequest", {}).get("ref") in refs]


async def main(url: str, token: str) -> None:
    agent = remote_agent(url, headers={"Authorization": f"Bearer {token}"}, state_management="server")
    chat = agent.chat()
    asked = await chat.send("pay 500 to savings")
    [interrupt] = asked.interrupts
    approved = await chat.resume(restart=[interrupt.restart()])
    try:
        await chat.resume(restart=[approved.interrupts[0].restart()])
        again = None
    except Exception as exc:  # the reference's AgentError
        again = {"status": getattr(exc, "status", type(exc).__name__), "message": str(exc)}
    snapshot = await chat.get_snapshot()
    print(
        json.dumps(
            {
                "session_id": chat.session_id,
                "asked": {"finish": str(asked.finish_reason), "interrupts": parts(asked)},
                "approved": {"finish": str(approved.finish_reason), "interrupts": parts(approved)},
                "again": again,
                "snapshot": [
                    m.model_dump(by_alias=True, exclude_none=True, mode="json") for m in snapshot.state.messages
                ],
            }
        )
    )


asyncio.run(main(sys.argv[1], sys.argv[2]))
