"""Apps for the CLI tests to name as ``tests.cli.apps:<attr>`` (the examples, on in-memory stores)."""

import asyncio
import gc
import json
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from examples import banking, shell
from pausepoint import ApprovalPolicy, FunctionModel, Interrupt, ModelRequest, ModelResponse, Pausepoint, Role
from pausepoint.errors import ModelUnavailable
from pausepoint.models.openai import OpenAI
from pausepoint.testing import ScriptedModel, last_tool_results, tool_call
from tests.approval_apps import Transfer, script, treasury
from tests.approval_apps import build as build_bank

bank_ai, bank_agent = banking.build()
TOKENS = {"alice": "s3cret"}  # neither an app nor an agent: what serve refuses to serve
shell_ai, shell_agent = shell.build()


async def asgi(scope, receive, send):
    """A bare ASGI app: ``serve`` runs it as it is."""
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"plain ASGI"})


async def collector(scope, receive, send):
    """An ASGI app answering how its process is set for serving: how many objects its garbage
    collector keeps frozen, the collector's thresholds, and the module of its event loop's class."""
    if scope["type"] != "http":
        return
    loop = type(asyncio.get_running_loop()).__module__
    body = json.dumps({"frozen": gc.get_freeze_count(), "threshold": gc.get_threshold(), "loop": loop}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


def _down(request: ModelRequest) -> ModelResponse:
    raise ModelUnavailable("the model is down for maintenance")


#: OpenAI without a key (the CLI tests run without provider keys): chat and serve check it first
cloud_ai = Pausepoint(plugins=[OpenAI()])
cloud_agent = cloud_ai.define_agent(name="cloud", model="openai/gpt-4o-mini")
#: every model call fails, so no session is ever written
failing_agent = Pausepoint().define_agent(name="failing", model=FunctionModel("test/down", _down))
empty_ai = Pausepoint()


def _pay_app() -> Pausepoint:
    """Payments two of treasury approve; who holds treasury is declared by ``serve --approver``."""
    ai = Pausepoint(approval=ApprovalPolicy(roles={"treasury": Role(tools=["transfer_money"])},
                                            quorum={"transfer_money": 2}))  # fmt: skip

    @ai.tool(requires_approval=True)
    async def transfer_money(input: Transfer) -> str:
        """Move money."""
        return f"sent {input.amount} to {input.to_account}"

    ai.define_agent(name="payAgent", model=ScriptedModel(script), tools=[transfer_money])
    return ai


pay_ai = _pay_app()


# The approval tests' bank (tests/approval_apps.py): two of treasury approve each transfer; and
# one of treasury who did not ask for it, who may grant later transfers for the session.
quorum_agent, _, quorum_ledger = build_bank(policy=treasury(quorum={"transfer_money": 2}))
grant_agent, _, grant_ledger = build_bank(policy=treasury(grantable=["transfer_money"], separation_of_duties=True))


def _slow_app() -> Pausepoint:
    """A tool that takes a minute (``slow_agent``): long enough to stop the chat while it runs."""
    ai = Pausepoint()

    @ai.tool()
    async def wait_a_minute(seconds: int) -> str:
        """Wait."""
        await asyncio.sleep(seconds)
        return "waited"

    def script(request: ModelRequest) -> Any:
        asked = request.messages[-1]
        if asked.role == "user" and "wait" in asked.text:
            return [tool_call("wait_a_minute", {"seconds": 60})]
        return "Noted: it may or may not have finished."

    ai.define_agent(name="slow", model=ScriptedModel(script), tools=[wait_a_minute])
    return ai


slow_ai = _slow_app()


class NoteAbout(BaseModel):
    about: str


def _quick_app() -> Pausepoint:
    """Two pauses at once (``quick_agent``): ``hold`` expires a second after it pauses, ``note``
    waits."""
    ai = Pausepoint()

    @ai.tool()
    async def hold(amount: int) -> str:
        """Hold money, once a person agrees in time."""
        raise Interrupt({"why": "hold it?"}, ttl=timedelta(seconds=1))

    note = ai.define_interrupt(name="note", description="Ask for a note.", input_schema=NoteAbout)

    def script(request: ModelRequest) -> Any:
        if request.messages[-1].role == "user":
            return [tool_call("hold", {"amount": 5}), tool_call("note", {"about": "acme"})]
        return f"Told: {sorted(last_tool_results(request))}"

    ai.define_agent(name="quick", model=ScriptedModel(script), tools=[hold, note])
    return ai


quick_agent = _quick_app().agents["quick"]
