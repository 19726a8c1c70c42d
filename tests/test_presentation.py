"""How a pause reads to a person: ``PauseDisplay`` declared on a tool, ``Agent.view`` rendering it."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from pydantic import BaseModel, Field

from examples import banking, payments
from pausepoint import AgentFinishReason, Interrupt, PauseDisplay, PauseField, Pausepoint, PendingInterrupt
from pausepoint.errors import DefinitionError
from pausepoint.testing import ScriptedModel, tool_call


class Transfer(BaseModel):
    amount: Decimal
    currency: str = "USD"
    to_account: str = Field(description="The account that receives the money.")
    note: str = ""


def pause_of(name: str, input_: object) -> PendingInterrupt:
    return PendingInterrupt(name, "ref", input_, None, datetime.now(UTC))


def test_a_declared_display_reads_as_its_templates_with_money_and_chosen_fields():
    ai = Pausepoint()
    display = PauseDisplay(
        title="Send {amount} to {to_account}", summary="Note: {note}", fields=["to_account", "amount"]
    )
    tool = ai.define_interrupt(name="approveTransfer", description="d", input_schema=Transfer, display=display)
    view = tool.view({"amount": "1250.5", "to_account": "savings", "note": "rent"})
    assert view.title == "Send $1,250.50 to savings"
    assert view.summary == "Note: rent"
    assert view.fields == [
        PauseField("to_account", "To account", "savings", "The account that receives the money."),
        PauseField("amount", "Amount", "$1,250.50"),
    ]
    assert view.risk == "normal" and view.on_expiry is None


def test_functions_of_the_validated_input_decide_title_summary_and_risk():
    ai = Pausepoint()
    display = PauseDisplay(
        title=lambda t: f"{t.amount:.0f} {t.currency} → {t.to_account}",
        summary=lambda t: "large" if t.amount > 1000 else "small",
        risk=lambda t: "high" if t.amount > 1000 else "low",
    )
    tool = ai.define_interrupt(name="approveTransfer", description="d", input_schema=Transfer, display=display)
    big, small = tool.view({"amount": 5000, "to_account": "x"}), tool.view({"amount": "3", "to_account": "x"})
    assert (big.title, big.summary, big.risk) == ("5000 USD → x", "large", "high")
    assert (small.title, small.summary, small.risk) == ("3 USD → x", "small", "low")
    assert isinstance(big.fields[0], PauseField)


def test_defaults_come_from_the_input_schema():
    ai = Pausepoint()

    class Order(BaseModel):
        total_amount: Decimal
        currency: str = "CHF"
        rate: Decimal = Decimal("0.035")
        express: bool = False
        items: list[str] = Field(default_factory=list)
        shipping: dict[str, str] = Field(default_factory=dict, title="Ship to")

    tool = ai.define_interrupt(name="confirm_order", description="d", input_schema=Order)
    view = tool.view({"total_amount": "1234567.891", "items": ["a", "b"], "shipping": {"city": "Bern"}})
    assert view.title == "Confirm order"
    texts = {f.name: (f.label, f.text) for f in view.fields}
    assert texts == {
        "total_amount": ("Total amount", "1,234,567.891 CHF"),  # money, and never rounded
        "currency": ("Currency", "CHF"),
        "rate": ("Rate", "0.035"),  # a decimal that is not an amount keeps its digits
        "express": ("Express", "No"),
        "items": ("Items", "a, b"),
        "shipping": ("Ship to", '{"city": "Bern"}'),
    }
    assert view.summary == "Total amount: 1,234,567.891 CHF · Currency: CHF · Rate: 0.035"
    assert view.risk == "normal"


def test_an_input_that_no_longer_validates_still_reads_and_is_treated_as_high_risk():
    ai = Pausepoint()
    display = PauseDisplay(title=lambda t: f"pay {t.amount}", risk=lambda t: "low")
    tool = ai.define_interrupt(name="approveTransfer", description="d", input_schema=Transfer, display=display)
    view = tool.view({"amount": "lots", "to_account": "x"})
    assert view.title == "Approve transfer"  # the function needs a valid input: the default
    assert view.risk == "high"  # a risk that cannot be computed asks for more care, not less
    assert {f.name: f.text for f in view.fields}["amount"] == "lots"


def test_a_failing_function_falls_back_and_is_logged(caplog):
    ai = Pausepoint()

    def broken(_: Transfer) -> str:
        raise RuntimeError("boom")

    display = PauseDisplay(title=broken, summary=broken, risk=lambda t: "extreme")  # type: ignore[arg-type,return-value]
    tool = ai.define_interrupt(name="approveTransfer", description="d", input_schema=Transfer, display=display)
    with caplog.at_level(logging.WARNING, logger="pausepoint"):
        view = tool.view({"amount": 1, "to_account": "x"})
    assert view.title == "Approve transfer" and view.summary.startswith("Amount: $1.00")
    assert view.risk == "high"
    assert "title function failed" in caplog.text and "returned 'extreme'" in caplog.text


@pytest.mark.parametrize(
    ("display", "problem"),
    [
        (lambda: PauseDisplay(title="Send {amount} to {payee}"), "names 'payee', which is not an input field"),
        (lambda: PauseDisplay(fields=["amount", "iban"]), "fields names 'iban'"),
        (lambda: PauseDisplay(summary="{to_account.upper}"), "may name input fields only"),
        (lambda: PauseDisplay(summary="{amount"), "not a valid template"),
        (lambda: PauseDisplay(risk="severe"), "risk must be one of low, normal, high"),  # type: ignore[arg-type]
        (lambda: PauseDisplay(fields="amount"), "sequence of input field names"),
        (lambda: PauseDisplay(title=42), "template string or a function"),  # type: ignore[arg-type]
        (lambda: {"title": "x"}, "display must be a PauseDisplay"),
    ],
)
def test_a_display_that_does_not_fit_the_input_is_refused_at_definition(display, problem):
    ai = Pausepoint()
    with pytest.raises(DefinitionError, match=problem):
        ai.define_interrupt(name="approveTransfer", description="d", input_schema=Transfer, display=display())
    with pytest.raises(DefinitionError, match=problem):

        @ai.tool(display=display())
        async def transfer(amount: Decimal, to_account: str) -> str:
            return "ok"


def test_plain_parameter_tools_and_templates_over_their_parameters():
    ai = Pausepoint()

    @ai.tool(display=PauseDisplay(title="Delete {path}", risk="high"))
    async def delete_file(path: str, recursive: bool = False) -> str:
        """Delete a file."""
        raise Interrupt()

    view = delete_file.view({"path": "/tmp/x"})
    assert view.title == "Delete /tmp/x" and view.risk == "high"
    assert [(f.label, f.text) for f in view.fields] == [("Path", "/tmp/x"), ("Recursive", "No")]


async def test_agent_view_says_what_happens_on_expiry():
    ai = Pausepoint()

    class Ask(BaseModel):
        question: str

    ask = ai.define_interrupt(name="ask", description="d", input_schema=Ask, ttl=timedelta(minutes=5))
    script = ScriptedModel([tool_call("ask", {"question": "ok?"}), tool_call("ask", {"question": "ok?"})])
    agent = ai.define_agent(name="a", model=script, tools=[ask])
    res = await agent.chat().send("hi")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    assert agent.view(res.interrupts[0]).on_expiry == (
        "It is denied automatically, and the agent is told nobody answered in time."
    )

    def approve_when_late(_: PendingInterrupt) -> dict[str, bool]:
        """It is approved automatically (the agent is told it was approved)."""
        return {"approved": True}

    other = Pausepoint().define_agent(
        name="b", model=ScriptedModel([]), tools=[ask], on_expiry=approve_when_late, description="Asks things."
    )
    assert (
        other.view(res.interrupts[0]).on_expiry == "It is approved automatically (the agent is told it was approved)."
    )
    assert other.view(pause_of("ask", {"question": "q"})).on_expiry is None  # no time-to-live: nothing to say
    assert other.description == "Asks things." and agent.description == ""


def test_a_pause_of_a_tool_the_agent_no_longer_has_still_reads():
    _, agent = banking.build()
    view = agent.view(pause_of("wire_funds", {"amount": "10", "to": "x"}))
    assert view.title == "Wire funds" and view.summary == "Amount: 10.00 · To: x"


def test_the_examples_declare_their_displays():
    _, bank = banking.build()
    view = bank.view(pause_of("userApproval", {"action": "transfer_money", "details": "Transfer $700 to savings"}))
    assert (view.title, view.summary, view.risk) == (
        "Transfer $700 to savings",
        "The agent asks before it runs transfer_money.",
        "high",
    )
    assert bank.description and bank.description != bank.system
    pay = payments.payments_agent.view(
        pause_of(
            "pay_invoice",
            {"amount": "1250.50", "payee": "ACME GmbH", "iban": "DE89370400440532013000", "reference": "INV-117"},
        )
    )
    assert pay.title == "Pay €1,250.50 to ACME GmbH" and pay.risk == "high"
    assert [f.label for f in pay.fields] == ["Amount", "Payee", "IBAN", "Reference"]
