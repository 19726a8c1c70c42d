"""Approvals across OS processes on every durable store: each step of a rule, a grant, a quorum and
separation of duties in a process of its own (the one before has exited: only the store
remains), and approvers racing for a quorum in five processes at once."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from .processes import ROOT, Worker


async def run(spec: dict[str, Any], ledger: Path, **command: Any) -> dict[str, Any]:
    """One step in a fresh process; what it printed."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.stores.approval_worker",
        json.dumps(spec),
        str(ledger),
        json.dumps(command),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    return result


def lines(ledger: Path) -> list[str]:
    return [line.split(" ", 1)[1] for line in ledger.read_text().splitlines()] if ledger.exists() else []


async def test_rules_decide_without_a_person_across_restarts(durable_backend, tmp_path: Path):
    spec, ledger = {**durable_backend.spec(), "policy": "rules"}, tmp_path / "ledger"
    small = await run(spec, ledger, op="send", principal="carol", text="pay 50 to a")
    assert (small["finish"], small["text"]) == ("stop", "sent 50 to a")
    session = small["session"]
    denied = await run(spec, ledger, op="send", session=session, principal="carol", text="pay 5 to ext-1")
    assert denied["text"] == '{"denied": true, "reason": "external accounts are closed"}'
    asked = await run(spec, ledger, op="send", session=session, principal="carol", text="deploy web")
    [pause] = asked["interrupts"]
    assert (asked["finish"], pause["name"]) == ("interrupted", "deploy") and lines(ledger) == ["50->a"]
    approved = await run(spec, ledger, op="approve", session=session, principal="alice", ref=pause["ref"])
    assert approved["text"] == "deployed web" and lines(ledger) == ["50->a", "deploy:web"]
    trail = (await run(spec, ledger, op="audit", session=session))["audit"]
    assert [row for row in trail if row[0] != "message"] == [
        ["approve", "transfer_money", None, "policy", "small transfers", None, 0, 0],
        ["deny", "transfer_money", None, "policy", "external accounts", None, 0, 0],
        ["approve", "deploy", "alice", "python", None, None, 1, 1],
    ]


async def test_grants_duties_roles_and_a_quorum_across_restarts(durable_backend, tmp_path: Path):
    spec, ledger = {**durable_backend.spec(), "policy": "treasury"}, tmp_path / "ledger"
    paused = await run(spec, ledger, op="send", principal="carol", text="pay 500 to savings")
    session, [pause] = paused["session"], paused["interrupts"]
    at = {"session": session, "ref": pause["ref"]}

    # separation of duties: carol asked for it, so she may not approve it; alice may, granting more
    refused = await run(spec, ledger, op="approve", principal="carol", **at)
    assert (refused["error"], refused["reason"]) == ("approval_forbidden", "separation_of_duties")
    granted = await run(spec, ledger, op="approve", principal="alice", grant={}, **at)
    assert granted["text"] == "sent 500 to savings"

    # the grant approves carol's next transfer in a new process; revoked, it approves nothing
    assert (await run(spec, ledger, op="send", session=session, principal="carol", text="pay 20 to x"))["text"] == (
        "sent 20 to x"
    )
    [grant] = (await run(spec, ledger, op="grants", session=session))["grants"]
    assert (grant["status"], grant["used"]) == ("active", 1)
    revoked = await run(spec, ledger, op="revoke", session=session, principal="bob", grant_id=grant["id"])
    assert revoked["status"] == "revoked"
    again = await run(spec, ledger, op="send", session=session, principal="carol", text="pay 30 to y")
    [pause] = again["interrupts"]
    at = {"session": session, "ref": pause["ref"]}
    refused = await run(spec, ledger, op="approve", principal="dave", **at)  # an auditor, not treasury
    assert (refused["error"], refused["reason"]) == ("approval_forbidden", "role")
    await run(spec, ledger, op="deny", principal="bob", reason="not today", **at)

    # two of sre deploy: one approval is counted, the same person again is refused, the second runs it
    asked = await run(spec, ledger, op="send", session=session, principal="carol", text="deploy web")
    [pause] = asked["interrupts"]
    at = {"session": session, "ref": pause["ref"]}
    first = await run(spec, ledger, op="approve", principal="alice", **at)
    assert first["finish"] == "interrupted" and first["interrupts"][0]["approved_by"] == ["alice"]
    twice = await run(spec, ledger, op="approve", principal="alice", **at)
    assert twice["error"] == "already_approved"
    second = await run(spec, ledger, op="approve", principal="frank", **at)
    assert (second["finish"], second["text"]) == ("stop", "deployed web")
    assert lines(ledger) == ["500->savings", "20->x", "deploy:web"]

    trail = (await run(spec, ledger, op="audit", session=session))["audit"]
    assert [row[:4] + row[5:] for row in trail if row[0] != "message"] == [
        ["approve", "transfer_money", "alice", "python", None, 1, 1],
        ["grant", "transfer_money", "alice", "python", grant["id"], 0, 0],
        ["approve", "transfer_money", "alice", "policy", grant["id"], 0, 0],  # by alice's grant
        ["revoke", "transfer_money", "bob", "python", grant["id"], 0, 0],
        ["deny", "transfer_money", "bob", "python", None, 0, 1],
        ["approve", "deploy", "alice", "python", None, 1, 2],
        ["approve", "deploy", "frank", "python", None, 2, 2],
    ]


async def test_five_processes_racing_for_a_two_of_three_quorum_run_the_call_once(durable_backend, tmp_path: Path):
    """Five processes approve one transfer at once — alice, bob and carol of treasury, and alice
    and bob a second time: exactly one transfer, exactly two approvals counted, every other
    approver refused (the pause was resolved, or their approval was counted already)."""
    spec, ledger = {**durable_backend.spec(), "policy": "quorum"}, tmp_path / "ledger"
    paused = await run(spec, ledger, op="send", principal="dave", text="pay 500 to savings")
    session, [pause] = paused["session"], paused["interrupts"]
    principals = ["alice", "bob", "carol", "alice", "bob"]
    racers = [
        await Worker.start(
            spec, ledger, tmp_path / f"racer{n}.err", module="tests.stores.approval_worker", extra="serve"
        )
        for n in range(5)
    ]
    try:
        await asyncio.gather(*(r.expect("ready") for r in racers))
        for racer, principal in zip(racers, principals, strict=True):
            await racer.command({"op": "approve", "session": session, "ref": pause["ref"], "principal": principal})
        await asyncio.gather(*(r.expect("armed") for r in racers))
        async with durable_backend.hold_writes(session):
            for racer in racers:
                await racer.command("go")
            await asyncio.sleep(0.3)  # every racer reaches its claim while writes are held
        outcomes = await asyncio.gather(*(r.expect("outcome") for r in racers))
        for racer in racers:
            await racer.command({"op": "exit"})
    finally:
        for racer in racers:
            await racer.kill()

    print("OUTCOMES", outcomes)
    assert lines(ledger) == ["500->savings"]  # exactly one execution
    trail = (await run(spec, ledger, op="audit", session=session))["audit"]
    counted = [row for row in trail if row[0] == "approve"]
    assert [(row[0], row[6], row[7]) for row in counted] == [("approve", 1, 2), ("approve", 2, 2)]
    approvers = [row[2] for row in counted]
    assert len(set(approvers)) == 2  # two distinct people
    winners = [o for o in outcomes if o["outcome"] == "ok"]
    assert sorted(o["principal"] for o in winners) == sorted(approvers)  # each counted approval was told so
    assert all(o["outcome"] in ("already_resolved", "already_approved") for o in outcomes if o not in winners)
    assert len(winners) == 2 and {o["finish"] for o in winners} <= {"stop", "interrupted"}
