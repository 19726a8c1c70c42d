from examples.banking import build
from pausepoint import AgentFinishReason


async def test_banking_cycle(store):
    ledger = []
    _, agent = build(store, ledger)
    chat = agent.chat()
    res = await chat.send("Transfer $500 to savings.")
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    res = await chat.resume(respond=[res.interrupts[0].respond({"approved": True})])
    assert res.text == "Transferred $500 to savings."
    assert ledger == ["500->savings"]
    again = agent.chat(chat.session_id)
    assert len(await again.history()) == 6
