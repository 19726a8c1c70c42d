"""Exactly once across OS processes: the banking example on one shared durable store.

Each worker is a separate Python process (``worker.py``) with its own agent and its own
connection to the store. Transfers are counted in a ledger file every process appends to.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from examples.banking import build
from pausepoint import AgentFinishReason

from .processes import Worker
from .worker import FileLedger, transfers

RACERS = 4
ROUNDS = 5


async def test_racing_processes_answer_a_pause_exactly_once(durable_backend, tmp_path: Path):
    ledger = tmp_path / "ledger"
    store = await durable_backend.open()
    _, agent = build(store, FileLedger(str(ledger)))
    workers = [await Worker.start(durable_backend.spec(), ledger, tmp_path / f"worker{n}.err") for n in range(RACERS)]
    try:
        await asyncio.gather(*(w.expect("ready") for w in workers))
        for round_ in range(ROUNDS):
            account = f"race{round_}"
            chat = agent.chat(principal="teller")
            paused = await chat.send(f"Transfer $5 to {account}.")
            assert paused.finish_reason == AgentFinishReason.INTERRUPTED
            command = {"op": "answer", "session": chat.session_id, "ref": paused.interrupts[0].ref}
            for worker in workers:
                await worker.command(command)
            # Every racer has read the pause before any of them answers it ...
            await asyncio.gather(*(w.expect("armed") for w in workers))
            async with durable_backend.hold_writes(chat.session_id):
                for worker in workers:
                    await worker.command("go")
                # ... and, writes held back, each gets to its claim; released, the claims collide.
                # (A racer slower than this pause still must win or lose correctly; it only
                # makes the collision less likely.)
                await asyncio.sleep(0.3)
            outcomes = await asyncio.gather(*(w.expect("outcome") for w in workers))

            assert sorted(o["outcome"] for o in outcomes) == ["AlreadyResolved"] * (RACERS - 1) + ["won"]
            (winner,) = [o for o in outcomes if o["outcome"] == "won"]
            assert winner["text"] == f"Transferred $5 to {account}."
            assert transfers(str(ledger), account) == 1
            # A fresh agent (nothing cached) in this third process sees one answer, by the winner.
            _, reader = build(store)
            session = reader.chat(chat.session_id)
            audit = await session.audit_trail()
            # the winner's yes, the one transfer it grants, and the transfer approved by that grant
            assert [(a.decision, a.principal, a.via) for a in audit if a.decision != "message"] == [
                ("respond", f"worker-{winner['pid']}", "python"),
                ("grant", f"worker-{winner['pid']}", "python"),
                ("approve", f"worker-{winner['pid']}", "policy"),  # by the winner's grant
            ]
            assert await session.interrupts() == []
            last = await session.last_response()
            assert last is not None
            assert (last.finish_reason, last.text) == (AgentFinishReason.STOP, f"Transferred $5 to {account}.")
        for worker in workers:
            await worker.exit()
    finally:
        for worker in workers:
            await worker.kill()
        await store.close()


async def test_a_pause_made_in_one_process_is_answered_in_another(durable_backend, tmp_path: Path):
    ledger = tmp_path / "ledger"
    spec = durable_backend.spec()
    maker = await Worker.start(spec, ledger, tmp_path / "maker.err")
    try:
        await maker.expect("ready")
        await maker.command({"op": "send", "account": "savings"})
        paused = await maker.expect("paused")
        await maker.exit()  # the process that paused is gone
    finally:
        await maker.kill()

    store = await durable_backend.open()
    try:
        _, agent = build(store)
        inbox = await agent.list_sessions(has_pending=True)
        assert [(s.session_id, s.owner, s.pending) for s in inbox] == [(paused["paused"], f"worker-{maker.pid}", 1)]

        answerer = await Worker.start(spec, ledger, tmp_path / "answerer.err")
        try:
            await answerer.expect("ready")
            await answerer.command({"op": "answer", "session": paused["paused"], "ref": paused["ref"]})
            await answerer.expect("armed")
            await answerer.command("go")
            outcome = await answerer.expect("outcome")
            await answerer.exit()
        finally:
            await answerer.kill()
        assert outcome == {
            "outcome": "won",
            "text": "Transferred $5 to savings.",
            "finish": "stop",
            "pid": answerer.pid,
        }
        assert ledger.read_text().splitlines().count(f"{answerer.pid} 5->savings") == 1
        assert transfers(str(ledger), "savings") == 1

        _, reader = build(store)
        session = reader.chat(paused["paused"])
        history = await session.history()
        assert [m.role for m in history] == ["user", "model", "tool", "model", "tool", "model"]
        assert history[-1].text == "Transferred $5 to savings."
        answers = [a for a in await session.audit_trail() if a.decision not in ("message", "grant")]
        assert [(a.principal, a.via) for a in answers] == [
            (f"worker-{answerer.pid}", "python"),
            (f"worker-{answerer.pid}", "policy"),  # the transfer, by the answerer's grant
        ]
        assert await reader.list_sessions(has_pending=True) == []
    finally:
        await store.close()
