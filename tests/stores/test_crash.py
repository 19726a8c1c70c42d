"""kill -9 at random points of a turn: nothing half-written, no answer lost, no side effect twice.

Per iteration one worker process runs full banking cycles (send → pause → approve → transfer →
final text) on new sessions until it is SIGKILLed after a random delay spanning a few cycles.
Then a fresh agent in this process — a later process, as far as the store can tell — reads
every session the worker started, checks it, and carries it to its end with the next valid
operation. Every transfer lands in a ledger file shared by all processes.

Set ``PAUSEPOINT_CRASH_SEED`` to replay a run; ``PAUSEPOINT_CRASH_KILLS`` changes the count.

A kill while ``transfer_money`` runs leaves its call recorded (the runtime writes a call down
before a tool that is not idempotent starts) with no result. The recovering agent, knowing the
worker is dead, presumes such a call lost at once (``abandon_after=0``) and records it as of
unknown outcome: the transfer happened at most once, and is never made again.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from examples.banking import build
from pausepoint import AgentFinishReason, Chat
from pausepoint.errors import NothingToResume, SessionNotFound

from .processes import Worker
from .worker import FileLedger, transfers

KILLS = int(os.environ.get("PAUSEPOINT_CRASH_KILLS", "50"))


def sessions_seen(replies: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What the worker reported of each session it started, by session id."""
    seen: dict[str, dict[str, Any]] = {}
    for reply in replies:
        if "session" in reply:
            seen[reply["session"]] = {"account": reply["account"]}
        elif "paused" in reply:
            seen[reply["paused"]]["paused"] = True
        elif "done" in reply:
            seen[reply["done"]]["done"] = True
    return seen


# A person's answers (the yes grants the transfer it asked about, which the policy then approves).
PEOPLE = ("respond", "deny", "restart", "cancel", "expire")


def transferred_texts(history: list[Any], account: str) -> int:
    return sum(1 for m in history if m.role == "model" and m.text == f"Transferred $7 to {account}.")


async def recover(chat: Chat, account: str, report: dict[str, Any], ledger: str) -> str:
    """Check one session after the kill, finish it, and say where the kill had left it."""
    try:
        history = await chat.history()
    except SessionNotFound:
        # Killed before the send's first append: nothing of it may exist anywhere.
        assert "paused" not in report
        assert transfers(ledger, account) == 0
        return "not written"
    open_pauses = await chat.interrupts()
    audit = [e for e in await chat.audit_trail() if e.decision in PEOPLE]
    assert len(audit) <= 1
    assert transfers(ledger, account) <= 1
    assert transferred_texts(history, account) <= 1
    if report.get("done"):  # the worker's resume returned: its answer and transfer are in
        assert open_pauses == []
        assert [(a.decision, a.principal) for a in audit] == [("respond", audit[0].principal)]
        assert audit[0].principal.startswith("worker-")
        assert transfers(ledger, account) == 1
        assert transferred_texts(history, account) == 1

    answered = {p.ref for m in history if m.role == "tool" for p in m.tool_responses}
    lost = [
        p for m in history if m.role == "model" for p in m.tool_requests
        if p.name == "transfer_money" and p.ref not in answered
    ]  # fmt: skip

    if open_pauses:
        assert audit == []  # an open pause was never answered
        (pause,) = open_pauses
        assert pause.name == "userApproval"
        res = await chat.resume(respond=[pause.respond({"approved": True})])
        where = "paused"
    else:
        assert len(audit) == 1  # the answer given before the kill is not lost
        try:  # continue a turn whose answer was recorded but whose model loop was cut short
            res = await chat.resume()
            where = "transfer lost mid-call" if lost else "answered, turn cut short"
        except NothingToResume:
            res = None
            where = "finished" if report.get("done") else "finished, reply not delivered"
    if res is not None and lost:
        # Killed while transfer_money ran: it happened at most once, and the model is told so.
        assert res.finish_reason == AgentFinishReason.STOP and "'outcome': 'unknown'" in res.text
    elif res is not None:
        assert (res.finish_reason, res.text) == (AgentFinishReason.STOP, f"Transferred $7 to {account}.")
    made = transfers(ledger, account)

    # The session is as usable as any other: the next turn works.
    res = await chat.send("Thanks!")
    assert (res.finish_reason, res.text) == (AgentFinishReason.STOP, "You said: Thanks!")
    assert await chat.interrupts() == []
    assert [e.decision for e in await chat.audit_trail()].count("message") == 2  # the transfer request, "Thanks!"
    assert len([e for e in await chat.audit_trail() if e.decision in PEOPLE]) == 1
    assert transfers(ledger, account) == made  # recovery never transfers again
    if lost:
        assert made <= 1  # at most once: the kill may have come before the transfer itself
    else:
        assert made == 1  # exactly once, whoever made it
        assert transferred_texts(await chat.history(), account) == 1
    return where


@pytest.mark.slow
async def test_kill_9_at_random_points_of_a_turn(durable_backend, tmp_path: Path):
    seed = int(os.environ.get("PAUSEPOINT_CRASH_SEED", random.randrange(2**32)))
    rng = random.Random(seed)
    ledger = tmp_path / "ledger"
    store = await durable_backend.open()
    where: Counter[str] = Counter()

    def start(n: int) -> asyncio.Future[Worker]:
        spec = durable_backend.process_spec(f"pp-crash-worker-{n}")
        return asyncio.ensure_future(Worker.start(spec, ledger, tmp_path / f"worker{n}.err"))

    # The next worker starts while the current one runs and its sessions are checked.
    upcoming = start(0)
    try:
        for kill in range(KILLS):
            worker = await upcoming
            if kill + 1 < KILLS:
                upcoming = start(kill + 1)
            ready = await worker.expect("ready")
            await worker.command({"op": "cycles", "tag": f"k{kill}"})
            await asyncio.sleep(rng.uniform(0, 3 * ready["cycle_seconds"]))
            replies = await worker.kill()
            # What the worker had sent before it died (a commit on its way) is done first: a
            # later process reads the store as the dead one left it, not while it still changes.
            await durable_backend.wait_disconnected(f"pp-crash-worker-{kill}")
            context = f"seed={seed} kill={kill} worker={worker.pid}"

            # A fresh agent, nothing cached; the worker is dead, so its running calls are lost.
            _, agent = build(store, FileLedger(str(ledger)), abandon_after=timedelta(0))
            for session_id, report in sessions_seen(replies).items():
                chat = agent.chat(session_id, principal="recovery")
                try:
                    where[await recover(chat, report["account"], report, str(ledger))] += 1
                except AssertionError as exc:
                    raise AssertionError(f"{context} session={session_id} {report}: {exc}") from exc
    finally:
        if not upcoming.done():
            upcoming.cancel()
        elif not upcoming.cancelled() and upcoming.exception() is None:
            await upcoming.result().kill()
        await store.close()

    # Every transfer in the ledger belongs to exactly one session (warm-ups included).
    accounts = Counter(line.split(" ", 1)[1].split("->")[1] for line in ledger.read_text().splitlines())
    assert all(count == 1 for count in accounts.values()), [a for a, c in accounts.items() if c > 1]
    print(f"\n{durable_backend.name}: {KILLS} kills (seed {seed}); sessions left {dict(where)}")


async def test_a_kill_right_after_a_side_effect(durable_backend, tmp_path: Path):
    """The worker dies the moment the approved transfer is written to the ledger."""
    ledger = tmp_path / "ledger"
    store = await durable_backend.open()
    worker = await Worker.start(durable_backend.spec(), ledger, tmp_path / "worker.err")
    try:
        await worker.expect("ready")
        await worker.command({"op": "die_in_transfer"})
        await worker.command({"op": "cycles", "tag": "fatal"})
        replies = await worker.wait()  # the worker kills itself
        assert worker.process.returncode == -9
        ((session_id, report),) = sessions_seen(replies).items()
        assert report == {"account": "fatalx1", "paused": True}
        assert transfers(str(ledger), "fatalx1") == 1

        _, agent = build(store, FileLedger(str(ledger)), abandon_after=timedelta(0))
        chat = agent.chat(session_id, principal="recovery")
        assert await recover(chat, "fatalx1", report, str(ledger)) == "transfer lost mid-call"
        assert transfers(str(ledger), "fatalx1") == 1  # made once, before the kill; never again
    finally:
        await worker.kill()
        await store.close()
