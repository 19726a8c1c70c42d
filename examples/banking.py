"""The banking example: transfer_money guarded by a userApproval interrupt.

The agent itself lives in the package (``pausepoint.demo``, what ``pausepoint demo`` serves);
this example runs one pause and approval on it. Run it with ``python -m examples.banking`` (it
uses the offline scripted model).
"""

from __future__ import annotations

import asyncio

from pausepoint import AgentFinishReason
from pausepoint.demo import ApprovalOutput, TransferMoneyInput, UserApprovalInput, banking_script, build

__all__ = ["ApprovalOutput", "TransferMoneyInput", "UserApprovalInput", "banking_script", "build", "main"]


async def main() -> None:
    _, agent = build()
    chat = agent.chat()
    res = await chat.send("Transfer $500 to savings.")
    print(f"user> Transfer $500 to savings.\nagent paused: {res.finish_reason}")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    for interrupt in res.interrupts:
        print(f"  {interrupt.name} ref={interrupt.ref} input={interrupt.input}")
    print("approver> approved")
    res = await chat.resume(respond=[res.interrupts[0].respond({"approved": True, "feedback": "Looks good!"})])
    print(f"agent> {res.text}  [{res.finish_reason}]")


if __name__ == "__main__":
    asyncio.run(main())
