"""The two examples of Genkit's agent-interrupts documentation, as ported (examples/banking.py, an
interrupt before a transfer; examples/shell.py, a tool that pauses itself), end to end, on every store."""

from examples import banking, shell
from pausepoint import AgentFinishReason


async def test_banking_pause_respond_final_text(store):
    ledger: list[str] = []
    _, agent = banking.build(store, ledger)
    chat = agent.chat()

    res = await chat.send("Transfer $500 to savings.")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    [pause] = res.interrupts
    assert pause.name == "userApproval"
    assert pause.input == {"action": "transfer_money", "details": "Transfer $500 to savings"}
    assert ledger == []

    res = await chat.resume(respond=[pause.respond({"approved": True, "feedback": "Looks good!"})])
    assert res.finish_reason == AgentFinishReason.STOP
    assert res.text == "Transferred $500 to savings."
    assert res.interrupts == []
    assert ledger == ["500->savings"]


async def test_banking_denied_transfer_never_runs(store):
    ledger: list[str] = []
    _, agent = banking.build(store, ledger)
    chat = agent.chat()
    res = await chat.send("Transfer $90 to checking.")
    res = await chat.resume(respond=[res.interrupts[0].respond({"approved": False, "feedback": "Too much"})])
    assert res.text == "I did not transfer anything: Too much."
    assert ledger == []


async def test_shell_restart_pauses_again_then_runs_with_metadata(store):
    executed: list[dict] = []
    _, agent = shell.build(store, executed)
    chat = agent.chat()

    res = await chat.send("Run: rm -rf build/")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    first = res.interrupts[0]
    assert first.metadata == {"command": "rm -rf build/", "reason": "The command can modify files."}

    res = await chat.resume(restart=[first.restart()])  # same input, no approval: pauses again
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    second = res.interrupts[0]
    assert second.ref == first.ref and second.pause_id != first.pause_id
    assert executed == []

    res = await chat.resume(restart=[second.restart(resumed_metadata={"tool_approved": True})])
    assert res.finish_reason == AgentFinishReason.STOP
    assert executed == [{"command": "rm -rf build/", "resumed_metadata": {"tool_approved": True}}]
    assert "ran 'rm -rf build/'" in res.text


async def test_shell_safe_command_runs_without_pausing(store):
    executed: list[dict] = []
    _, agent = shell.build(store, executed)
    res = await agent.chat().send("Run: ls -la")
    assert res.finish_reason == AgentFinishReason.STOP
    assert executed == [{"command": "ls -la", "resumed_metadata": None}]


async def test_restart_with_edited_input_shows_original(store):
    executed: list[dict] = []
    _, agent = shell.build(store, executed)
    chat = agent.chat()
    res = await chat.send("Run: rm -rf /")
    res = await chat.resume(
        restart=[
            res.interrupts[0].restart(
                replace_input={"command": "rm -rf ./tmp"}, resumed_metadata={"tool_approved": True}
            )
        ]
    )
    assert res.finish_reason == AgentFinishReason.STOP
    assert executed == [
        {
            "command": "rm -rf ./tmp",
            "resumed_metadata": {"tool_approved": True},
            "original_input": {"command": "rm -rf /"},
        }
    ]


async def test_examples_main_run():
    await banking.main()
    await shell.main()


async def test_payments_served_as_documented_numbers_each_payment(store):
    """``pausepoint serve examples.payments:ai`` builds the app with no ledger of the caller's:
    its own then numbers the payments, one after the other."""
    from examples import payments

    _, agent = payments.build(store)
    texts = []
    for _ in range(2):
        chat = agent.chat()
        res = await chat.send("Pay 1250.50 EUR to ACME GmbH (DE89370400440532013000) for invoice 2024-117.")
        texts.append((await chat.resume(restart=[agent.approval(res.interrupts[0])])).text)
    assert texts == ["Paid: payment PMT-0001 (sent).", "Paid: payment PMT-0002 (sent)."]
