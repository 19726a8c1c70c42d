"""The banking agent on an MCP bank: approvals before MCP calls, the bank's questions as pauses,
and the agent itself served over MCP.

- The bank is an MCP server (``examples/bank_mcp_server.py``, started over stdio).
- ``ai.mcp_tools(...)`` gives its tools to the agent; ``transfer_money`` needs approval, so the
  call pauses *before* it reaches the bank and runs, once, with exactly the approved arguments.
- ``open_account`` makes the bank ask who holds the account (MCP elicitation): the call pauses
  with the bank's question; ``respond({"holder": ...})`` answers it and the call completes.

``python -m examples.banking_mcp`` runs both flows on the offline scripted model.
``pausepoint serve examples.banking_mcp:ai --mcp`` serves the agent over HTTP and at ``/mcp``
(an MCP client sends messages with ``send_message`` and approves with ``answer_pause``);
``pausepoint serve examples.banking_mcp:ai --mcp-stdio alice`` speaks MCP on stdin/stdout.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from pausepoint import AgentFinishReason, ModelRequest, Pausepoint
from pausepoint.mcp import McpConnection
from pausepoint.testing import ScriptedModel, Step, last_tool_results, tool_call

__all__ = ["ai", "bank", "banking_agent", "main"]

ROOT = Path(__file__).resolve().parent.parent


def scripted_banker(request: ModelRequest) -> Step:
    """An offline stand-in for a model: transfers and opens accounts when asked, reports results."""
    results = last_tool_results(request)
    if results:
        (output,) = results.values()
        if isinstance(output, dict) and output.get("denied"):
            return f"I did not do it: {output.get('reason') or 'it was denied'}."
        return str(output)
    text = request.messages[-1].text.lower() if request.messages else ""
    if "transfer" in text:
        return [tool_call("transfer_money", {"amount": "500", "to_account": "savings"})]
    if "open" in text:
        return [tool_call("open_account", {"kind": "savings"})]
    return "I can transfer money or open an account."


ai = Pausepoint()

bank = McpConnection.stdio(sys.executable, ["-m", "examples.bank_mcp_server"], cwd=ROOT, name="bank")

banking_agent = ai.define_agent(
    name="bankingAgent",
    model=ScriptedModel(scripted_banker),
    system="Use the bank's tools. Transfers wait for the customer's approval.",
    description="Moves money and opens accounts at an MCP bank; transfers wait for approval.",
    tools=ai.mcp_tools(bank, requires_approval={"transfer_money"}),
)


async def main() -> None:
    chat = banking_agent.chat(principal="alice")
    res = await chat.send("Transfer $500 to savings.")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    pause = res.interrupts[0]
    print(f"paused before the bank was called: {pause.name} {pause.input} {pause.metadata}")
    res = await chat.resume(restart=[banking_agent.approval(pause)])
    print(f"approved: {res.text}")

    res = await chat.send("Open a savings account.")
    question = res.interrupts[0]
    print(f"the bank asks: {question.metadata['elicitation']['message']}")
    res = await chat.resume(respond=[question.respond({"holder": "Alice Martin"})])
    print(f"answered: {res.text}")
    await bank.aclose()


if __name__ == "__main__":
    asyncio.run(main())
