"""How a pause reads to a person: ``PauseDisplay`` declared on a tool, ``Agent.view`` rendering it."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from pydantic import BaseModel, Field

from examples import banking, payments
from pausepoint import (
    AgentFinishReason,
    Interrupt,
    PauseDisplay,
    PauseField,
    Pausepoint,
    PendingInterrupt,
    ToolRunContext,
)
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
        # a field is filled in with its text as shown: a spec failed at every render (found by a probe)
        (lambda: PauseDisplay(title="Pay {amount:.2f}"), r"fills \{amount\} in with the field's text as shown"),
        (lambda: PauseDisplay(summary="To {to_account!r}"), r"which '!r' does not apply to"),
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


# -- nothing hidden: what a person reads is what the input says -----------------------------------


class Payment(BaseModel):
    amount: Decimal
    currency: str = "USD"
    payee: str
    iban: str = Field("", title="IBAN")
    details: dict[str, str] = Field(default_factory=dict)


SPOOFED = {
    "amount": "5",
    "payee": "savings\u202e5$ tnuocca\u202c",  # reads "savingsaccount $5" where the override is obeyed
    "iban": "DE89\u200b3704\u200d0044\u20600532\ufeff013000",  # reads as the plain IBAN
    "details": {"for": "ACME GmbH\U000e0041\U000e007f"},  # tag characters: invisible altogether
}


async def test_invisible_and_reordering_characters_read_as_markers_and_the_tool_gets_its_input_as_sent():
    ai = Pausepoint()
    ran: list[Payment] = []

    @ai.tool(display=PauseDisplay(title="Pay {amount} to {payee}", summary=lambda p: f"IBAN {p.iban}"))
    async def pay(input: Payment, ctx: ToolRunContext) -> str:
        """Pay once a person approved it."""
        if not (ctx.resumed_metadata or {}).get("tool_approved"):
            raise Interrupt()
        ran.append(input)
        return "paid"

    agent = ai.define_agent(name="a", model=ScriptedModel([[tool_call("pay", SPOOFED)], "done"]), tools=[pay])
    chat = agent.chat()
    res = await chat.send("pay")
    [pause] = res.interrupts
    assert pause.input == {**SPOOFED, "currency": "USD"}  # the input, as the API shows it, is untouched
    view = agent.view(pause)
    assert view.title == "Pay $5.00 to savings⟨U+202E⟩5$ tnuocca⟨U+202C⟩"
    assert view.summary == "IBAN DE89⟨U+200B⟩3704⟨U+200D⟩0044⟨U+2060⟩0532⟨U+FEFF⟩013000"  # a function's words too
    assert {f.name: f.text for f in view.fields} == {
        "amount": "$5.00",
        "currency": "USD",
        "payee": "savings⟨U+202E⟩5$ tnuocca⟨U+202C⟩",
        "iban": "DE89⟨U+200B⟩3704⟨U+200D⟩0044⟨U+2060⟩0532⟨U+FEFF⟩013000",
        "details": '{"for": "ACME GmbH⟨U+E0041⟩⟨U+E007F⟩"}',
    }
    await chat.resume(restart=[agent.approval(pause)])
    assert [p.model_dump() for p in ran] == [{**SPOOFED, "amount": Decimal("5"), "currency": "USD"}]


@pytest.mark.parametrize(
    "char",
    [
        *"\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c",  # bidi
        *"\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e",  # zero-width, word joiner, BOM, soft hyphen
        "\U000e0001",
        "\U000e0020",
        "\U000e007f",  # tags
        *"\x00\x07\x08\x1b\x0b\x0c\x1c\x1f\x7f\x80\x85\x9b\x9f",  # C0 and C1 controls
        *"\u2028\u2029",  # line and paragraph separators
    ],
)
def test_each_character_a_person_cannot_see_reads_as_its_code_point(char):
    ai = Pausepoint()
    display = PauseDisplay(title="Pay {amount} to {payee}")
    tool = ai.define_interrupt(name="pay", description="d", input_schema=Payment, display=display)
    view = tool.view({"amount": "1", "payee": f"ACME{char}GmbH"})
    marker = f"⟨U+{ord(char):04X}⟩"
    assert view.title == f"Pay $1.00 to ACME{marker}GmbH"
    assert {f.name: f.text for f in view.fields}["payee"] == f"ACME{marker}GmbH"
    # a key the model made up, when the input no longer validates: its label is marked too
    other = tool.view({"amount": "1", f"pay{char}ee": "x"})
    assert [f.label for f in other.fields][-1] == f"pay{marker}ee"


@pytest.mark.parametrize(
    "text",
    ["دفع إلى شركة أكمي", "תשלום לאקמה", "支付给ACME公司", "Zürich, Ærø, e\u0301", "❤️ 👍🏽 🇩🇪", "नमस्ते", "€1,250.50"],
)
def test_ordinary_text_in_any_script_reads_unchanged(text):
    ai = Pausepoint()
    tool = ai.define_interrupt(name="pay", description="d", input_schema=Payment, display=PauseDisplay(title="{payee}"))
    view = tool.view({"amount": "1", "payee": text})
    assert view.title == text and {f.name: f.text for f in view.fields}["payee"] == text


def test_line_breaks_tabs_and_padding_read_as_one_space_so_the_end_of_a_title_is_not_cut_off():
    ai = Pausepoint()
    display = PauseDisplay(title="Pay {amount} to {payee}", summary="{payee}")
    tool = ai.define_interrupt(name="pay", description="d", input_schema=Payment, display=display)
    padded = "savings" + " " * 3000 + "and also attacker DE00 9999"
    view = tool.view({"amount": "700", "payee": padded})
    assert view.title == "Pay $700.00 to savings and also attacker DE00 9999"
    assert view.summary == "savings and also attacker DE00 9999"

    spaced = "savings\t\t\n\r\n\u00a0\u2003\u3000and\nalso attacker"  # no fake second line in a terminal
    assert {f.name: f.text for f in tool.view({"amount": "1", "payee": spaced}).fields}["payee"] == (
        "savings and also attacker"
    )

    long = tool.view({"amount": "700", "payee": padded + " " + "x" * 400})
    assert len(long.title) == 300 and long.title.endswith("…")  # a cut is still marked
    assert "attacker DE00 9999 xxx" in long.title


def test_a_cut_never_splits_a_marker():
    ai = Pausepoint()
    tool = ai.define_interrupt(name="pay", description="d", input_schema=Payment, display=PauseDisplay(title="{payee}"))
    title = tool.view({"amount": "1", "payee": "x" * 295 + "\u202e" + "y" * 10}).title
    assert title == "x" * 295 + "…"


def test_money_keeps_every_digit_however_many():
    ai = Pausepoint()
    tool = ai.define_interrupt(
        name="pay", description="d", input_schema=Payment, display=PauseDisplay(title="{amount}")
    )

    def shown(amount: str) -> str:
        view = tool.view({"amount": amount, "payee": "x"})
        assert view.title == view.fields[0].text
        return view.title

    assert shown("123456789012345678901234567890.55") == "$123,456,789,012,345,678,901,234,567,890.55"
    assert shown("-0.123456789012345678901234567890123") == "-$0.123456789012345678901234567890123"
    assert shown("1" * 45) == "$" + f"{int('1' * 45):,}" + ".00"
    assert shown("1e999999999") == "$1E+999999999"  # exact, and not a gigabyte of zeros

    class Ledger(BaseModel):
        balance: Decimal

    ledger = ai.define_interrupt(name="ledger", description="d", input_schema=Ledger)
    assert ledger.view({"balance": "98765432109876543210987654321.123"}).fields[0].text == (
        "98,765,432,109,876,543,210,987,654,321.123"
    )


class Fee(BaseModel):
    from_: str = Field(alias="from", title="From account")
    amount: Decimal


@pytest.mark.parametrize("name", ["from", "from_"])
async def test_a_display_names_an_aliased_field_by_its_alias_or_its_python_name(name):
    """Found by a probe: ``{from}`` and ``fields=["from"]`` — the name the model sends and the
    view shows — were refused at definition as "not an input field"; only ``from_`` was taken."""
    ai = Pausepoint()
    display = PauseDisplay(title=f"Fee {{amount}} from {{{name}}}", summary=f"Paid by {{{name}}}", fields=[name])

    @ai.tool(requires_approval=True, display=display)
    async def pay_fee(input: Fee) -> str:
        """Pay a fee."""
        return f"paid from {input.from_}"

    model = ScriptedModel([[tool_call("pay_fee", {"from": "ops", "amount": "5"})], "Done."])
    agent = ai.define_agent(name="fees", model=model, tools=[pay_fee])
    res = await agent.chat().send("Pay the fee.")
    view = agent.view(res.interrupts[0])
    assert (view.title, view.summary) == ("Fee 5.00 from ops", "Paid by ops")
    assert view.fields == [PauseField("from", "From account", "ops")]


def test_a_display_naming_no_field_is_told_each_fields_alias_and_name():
    ai = Pausepoint()
    with pytest.raises(
        DefinitionError, match=r"names 'frm', which is not an input field \(fields: amount, from \(from_\)\)"
    ):
        ai.define_interrupt(name="payFee", description="d", input_schema=Fee, display=PauseDisplay(title="{frm}"))
