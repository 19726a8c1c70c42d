"""The payments example: how a pause reads to the person approving it (``PauseDisplay``).

``pay_invoice`` pauses itself before every payment. Its ``PauseDisplay`` makes the pause read
as "Pay €1,250.50 to ACME GmbH" — with the payee's IBAN and the reference beside it and the risk
marked high (the console then asks for a confirmation) — instead of a tool name and raw JSON.
Each pause expires after ``ttl``; nobody answering in time denies it. The IBAN's pattern is a
Python regex with named groups, as pydantic writes it into the input schema.

Run it with ``python -m examples.payments`` (offline scripted model), or serve it with the
console: ``pausepoint serve examples.payments:ai``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from datetime import timedelta
from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, Field

from pausepoint import (
    Agent,
    AgentFinishReason,
    Interrupt,
    Model,
    ModelRequest,
    PauseDisplay,
    Pausepoint,
    Plugin,
    ToolRunContext,
)
from pausepoint.stores import InMemorySessionStore, SessionStore
from pausepoint.testing import ScriptedModel, Step, last_tool_results, tool_call

__all__ = ["IBAN", "Payment", "PaymentResult", "ai", "build", "main", "payments_script"]

IBAN = r"^(?P<country>[A-Z]{2})(?P<check>\d{2})(?P<account>[A-Z0-9]{11,30})$"


class Payment(BaseModel):
    amount: Decimal = Field(gt=0, max_digits=12, decimal_places=2, description="How much to pay.")
    currency: Literal["EUR", "USD", "GBP"] = "EUR"
    payee: str = Field(min_length=1, description="Who receives the money.")
    iban: str = Field(title="IBAN", pattern=IBAN, description="The payee's account: country, check digits, account.")
    reference: str = Field("", max_length=140, description="Shown on the payee's statement.")


class PaymentResult(BaseModel):
    payment_id: str
    status: Literal["sent", "paid by hand"] = "sent"


PAYMENT_DISPLAY = PauseDisplay(
    title="Pay {amount} to {payee}",
    summary="{amount} from the company account to {payee}, IBAN {iban}.",
    fields=["amount", "payee", "iban", "reference"],
    risk="high",
)

_REQUEST = re.compile(
    r"Pay (?P<amount>[\d.]+) (?P<currency>[A-Z]{3}) to (?P<payee>.+?) \((?P<iban>[A-Z0-9]+)\)"
    r"(?: for (?P<reference>.+?))?\.?$"
)


def payments_script(request: ModelRequest) -> Step:
    """A stand-in model: "Pay 1250.50 EUR to ACME GmbH (DE89370400440532013000) for invoice 117."
    calls pay_invoice; a result or a denial is reported back."""
    last = request.messages[-1]
    if last.role == "user":
        found = _REQUEST.search(last.text.strip())
        if not found:
            return "Tell me what to pay as: Pay <amount> <currency> to <payee> (<IBAN>) for <reference>."
        return tool_call("pay_invoice", {k: v for k, v in found.groupdict().items() if v is not None})
    result = last_tool_results(request).get("pay_invoice")
    if isinstance(result, dict) and result.get("denied"):
        return f"I did not pay: {result.get('reason') or 'not approved'}."
    if isinstance(result, dict) and "payment_id" in result:
        return f"Paid: payment {result['payment_id']} ({result['status']})."
    return f"The payment failed: {result}"


def build(
    store: SessionStore | None = None,
    ledger: list[dict[str, Any]] | None = None,
    *,
    ttl: timedelta = timedelta(minutes=15),
    model: str | Model | None = None,
    plugins: Sequence[Plugin] = (),
) -> tuple[Pausepoint, Agent]:
    """The app and its ``paymentsAgent``; ``ledger`` (if given; else a list of the app's own)
    records every payment sent, and numbers them: PMT-0001, PMT-0002, ..."""
    app = Pausepoint(plugins=plugins)
    sent: list[dict[str, Any]] = ledger if ledger is not None else []  # the app's own, when none is given

    @app.tool(allow_input_edits=True, display=PAYMENT_DISPLAY)
    async def pay_invoice(input: Payment, ctx: ToolRunContext) -> PaymentResult:
        """Pay an invoice from the company account. Every payment waits for a person's approval."""
        if not (ctx.resumed_metadata or {}).get("tool_approved"):
            raise Interrupt({"reason": "Every payment needs a person's approval."}, ttl=ttl)
        sent.append(input.model_dump(mode="json"))
        return PaymentResult(payment_id=f"PMT-{len(sent):04d}")

    agent = app.define_agent(
        name="paymentsAgent",
        model=model if model is not None else ScriptedModel(payments_script),
        system="Pay invoices with pay_invoice. Never change an amount or an IBAN yourself.",
        description="Pays supplier invoices from the company account. Every payment waits for approval.",
        tools=[pay_invoice],
        store=store if store is not None else InMemorySessionStore(),
    )
    return app, agent


ai, payments_agent = build()


async def main() -> None:
    _, agent = build()
    chat = agent.chat()
    res = await chat.send("Pay 1250.50 EUR to ACME GmbH (DE89370400440532013000) for invoice 2024-117.")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    view = agent.view(res.interrupts[0])
    print(f"paused: {view.title}  [risk: {view.risk}]")
    for shown in view.fields:
        print(f"  {shown.label}: {shown.text}")
    print(f"  if nobody answers: {view.on_expiry}")
    res = await chat.resume(restart=[agent.approval(res.interrupts[0])])
    print(f"agent> {res.text}  [{res.finish_reason}]")


if __name__ == "__main__":
    asyncio.run(main())
