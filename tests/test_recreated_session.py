"""A session deleted and made again under its id by another process is another session: the
process that had the old one cached reads the new one from the store — it never shows the old
one's messages and pauses as the new one's, never takes the new log's records onto the old state,
and never answers a pause of the deleted session (found by a probe: the stale process ran the
deleted session's transfer on the new owner's say, then wrote onto the new log at the same
version, and no process could read the session after)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pausepoint import Agent, Pausepoint
from pausepoint.errors import UnknownInterrupt
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, tool_call


def process(path: Path, ledger: list[str]) -> Agent:
    """An app of its own (its own cache of sessions) on the shared SQLite file: a process."""
    ai = Pausepoint()

    @ai.tool(requires_approval=True)
    async def transfer(amount: int) -> str:
        """Move money."""
        ledger.append(f"transfer {amount}")
        return f"moved {amount}"

    def script(request):
        last = request.messages[-1]
        if last.role == "tool":
            return "done"
        return [tool_call("transfer", {"amount": int(re.findall(r"\d+", last.text)[0])})]

    return ai.define_agent(name="bank", model=ScriptedModel(script), tools=[transfer], store=SqliteSessionStore(path))


@pytest.mark.parametrize("turns", [1, 2], ids=["as-long", "shorter"])
async def test_a_process_that_cached_a_deleted_session_reads_the_one_made_again_under_its_id(tmp_path, turns):
    ledger: list[str] = []
    here, there = process(tmp_path / "s.db", ledger), process(tmp_path / "s.db", ledger)
    alices = here.chat("conv-1", principal="alice")
    for amount in range(5, 5 + turns):  # the old log: as long as the new one, or longer
        old = (await alices.send(f"pay {amount}")).interrupts[0]
        if amount < 4 + turns:
            await alices.resume(restart=[here.approval(old)])
    assert await there.store.delete("conv-1")
    new = (await there.chat("conv-1", principal="bob").send("pay 900")).interrupts[0]
    ran = list(ledger)

    stale = here.chat("conv-1", principal="bob")
    assert [p.ref for p in await stale.interrupts()] == [new.ref]
    assert [m.text for m in await stale.history() if m.role == "user"] == ["pay 900"]
    with pytest.raises(UnknownInterrupt):
        await stale.resume(restart=[here.approval(old)])
    assert ledger == ran  # the deleted session's transfer never ran
    done = await stale.resume(restart=[here.approval(new)])
    assert done.text == "done" and ledger == [*ran, "transfer 900"]
    fresh = process(tmp_path / "s.db", ledger).chat("conv-1")  # a process that never saw either
    assert [m.text for m in await fresh.history()] == [m.text for m in await stale.history()]
    summary = await here.store.get_summary("conv-1")
    assert summary is not None and summary.owner == "bob"


async def test_a_longer_log_made_again_under_the_id_is_not_folded_onto_the_old_state(tmp_path):
    ledger: list[str] = []
    here, there = process(tmp_path / "s.db", ledger), process(tmp_path / "s.db", ledger)
    await here.chat("conv-1", principal="alice").send("pay 5")
    assert await there.store.delete("conv-1")
    bobs = there.chat("conv-1", principal="bob")
    for amount in (7, 8):  # the new log: longer than the one the other process cached
        pause = (await bobs.send(f"pay {amount}")).interrupts[0]
        await bobs.resume(restart=[there.approval(pause)])
    stale = here.chat("conv-1", principal="bob")
    assert [m.text for m in await stale.history() if m.role == "user"] == ["pay 7", "pay 8"]
    assert await stale.interrupts() == []
    assert ledger == ["transfer 7", "transfer 8"]
