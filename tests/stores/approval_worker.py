"""A process of the approval tests: the bank of ``tests/approval_apps.py`` on a shared durable store.

    python -m tests.stores.approval_worker '<store spec>' LEDGER '<step JSON>'   one step, then exit
    python -m tests.stores.approval_worker '<store spec>' LEDGER serve         racer: commands on stdin

A step is ``{"op": "send" | "approve" | "deny" | "revoke" | "audit" | "grants", ...}``; the
process builds the agent afresh (nothing shared with the process before but the store), does
the step, prints one JSON line: what it saw, or ``{"error": code, "reason": ...}``. A racer prints
``{"ready": pid}``, then for ``{"op": "approve", "session", "ref", "principal"}`` reads the pause,
prints ``{"armed": ...}``, waits for a line ``go`` and approves, printing ``{"outcome": ...}``.
Transfers and deploys are appended to the LEDGER file (one line each, by every process).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import timedelta
from typing import Any

from pausepoint import Agent, ApprovalPolicy, Grant, PendingInterrupt, Role, Rule
from pausepoint.errors import PausepointError

from ..approval_apps import MEMBERS, build
from .backends import open_store
from .worker import FileLedger

POLICIES = {
    # decide without a person (first match): external accounts denied, small transfers approved;
    # deploys asked about
    "rules": lambda: ApprovalPolicy(
        rules=[
            Rule.deny(
                "external accounts",
                ["transfer_money"],
                when=lambda t: t.to_account.startswith("ext-"),
                reason="external accounts are closed",
            ),
            Rule.approve("small transfers", ["transfer_money"], when=lambda t: t.amount <= 100),
            Rule.ask("deploys need a person", ["deploy"]),
        ]
    ),
    # treasury approves transfers (separation of duties, grants of up to a day); deploys need two of sre
    "treasury": lambda: ApprovalPolicy(
        rules=[Rule.ask("deploys need a person", ["deploy"])],
        roles={"treasury": Role(tools=["transfer_money"]), "sre": Role(tools=["deploy"])},
        members={**MEMBERS, "alice": ["treasury", "sre"], "bob": ["treasury", "sre"], "frank": ["sre"]},
        separation_of_duties=True,
        grantable={"transfer_money": timedelta(days=1)},
        quorum={"deploy": 2},
    ),
    # two of treasury approve every transfer
    "quorum": lambda: ApprovalPolicy(
        roles={"treasury": Role(tools=["transfer_money"])}, members=MEMBERS, quorum={"transfer_money": 2}
    ),
}


def pause_json(pause: PendingInterrupt) -> dict[str, Any]:
    approval = pause.approval
    return {
        "ref": pause.ref,
        "pause_id": pause.pause_id,
        "name": pause.name,
        "approved_by": approval.approved_by if approval else None,
        "required": approval.required if approval else None,
    }


async def step(agent: Agent, command: dict[str, Any]) -> dict[str, Any]:
    op = command["op"]
    chat = agent.chat(command.get("session"), principal=command.get("principal"))
    if op == "send":
        res = await chat.send(command["text"])
    elif op in ("approve", "deny"):
        [pause] = [p for p in await chat.interrupts() if p.ref == command["ref"]]
        grant = Grant(**command["grant"]) if "grant" in command else None
        answer = agent.approval(pause, grant=grant) if op == "approve" else pause.deny(command.get("reason", ""))
        res = await chat.resume(
            **({"restart": [answer]} if hasattr(answer, "replace_input") else {"respond": [answer]})
        )
    elif op == "revoke":
        grant = await chat.revoke_grant(command["grant_id"], reason=command.get("reason", ""))
        return {"grant": grant.id, "status": grant.status}
    elif op == "grants":
        return {"grants": [{"id": g.id, "status": g.status, "used": g.used} for g in await chat.grants()]}
    elif op == "audit":
        trail = await chat.audit_trail()
        return {
            "audit": [[e.decision, e.name, e.principal, e.via, e.rule, e.grant, e.approvals, e.required] for e in trail]
        }
    else:
        raise ValueError(op)
    return {
        "session": res.session_id,
        "finish": res.finish_reason.value,
        "text": res.text,
        "interrupts": [pause_json(p) for p in res.interrupts],
    }


def say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def main(spec: dict[str, Any], ledger: str, what: str) -> None:
    store = open_store(spec)
    agent, _, _ = build(store, POLICIES[spec.get("policy", "quorum")](), ledger=FileLedger(ledger))
    try:
        if what != "serve":
            try:
                say(await step(agent, json.loads(what)))
            except PausepointError as exc:
                say({"error": exc.code, "reason": exc.details.get("reason"), "message": str(exc)})
            return
        loop = asyncio.get_running_loop()
        stdin = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
        say({"ready": os.getpid()})
        while line := await stdin.readline():
            command = json.loads(line)
            if command["op"] == "exit":
                break
            chat = agent.chat(command["session"], principal=command["principal"])
            [pause] = [p for p in await chat.interrupts() if p.ref == command["ref"]]  # read before "go"
            say({"armed": command["principal"]})
            await stdin.readline()
            try:
                res = await chat.resume(restart=[agent.approval(pause)])
            except PausepointError as exc:
                say({"outcome": exc.code, "principal": command["principal"], "pid": os.getpid()})
            else:
                say({"outcome": "ok", "finish": res.finish_reason.value, "principal": command["principal"],
                     "pid": os.getpid()})  # fmt: skip
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]))
