"""Durable and portable: a paused session survives the process and any process with the same
agent resumes it; a pause whose tool definition changed since (fingerprinted) is refused."""

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel

from examples import banking
from pausepoint import AgentFinishReason, ApprovalPolicy, Pausepoint, Role, ToolResponse
from pausepoint.errors import ApprovalForbidden, ToolDefinitionChanged
from pausepoint.server import BearerTokens, create_app
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import ScriptedModel, last_tool_results, tool_call
from tests.server.harness import serve_in_thread

ROOT = Path(__file__).resolve().parent.parent


def pause_in_another_process(db: Path, ledger: Path) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.proc_worker", "pause", db, ledger],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


async def test_a_pause_made_by_an_exited_process_is_resumed_here(tmp_path):
    db = tmp_path / "s.db"
    paused = pause_in_another_process(db, tmp_path / "ledger.txt")
    ledger: list[str] = []
    _, agent = banking.build(SqliteSessionStore(db), ledger)
    chat = agent.chat(paused["session_id"])
    [pending] = await chat.interrupts()
    assert pending.ref == paused["ref"]
    assert pending.input == {"action": "transfer_money", "details": "Transfer $500 to savings"}
    res = await chat.resume(respond=[pending.respond({"approved": True})])
    assert res.text == "Transferred $500 to savings."
    assert ledger == ["500->savings"]
    assert [m.role for m in await chat.history()] == ["user", "model", "tool", "model", "tool", "model"]


class NewApprovalInput(BaseModel):
    action: str
    details: str
    risk: int


def changed_banking_agent(db: Path, **options):
    ai = Pausepoint()
    approval = ai.define_interrupt(
        name="userApproval",
        description="Ask the user.",
        input_schema=NewApprovalInput,
        output_schema=banking.ApprovalOutput,
    )
    return ai.define_agent(
        name="bankingAgent",
        model=ScriptedModel(["ok"]),
        tools=[approval],
        store=SqliteSessionStore(db),
        **options,
    )


async def test_answering_a_pause_whose_tool_changed_is_refused(tmp_path):
    db = tmp_path / "s.db"
    paused = pause_in_another_process(db, tmp_path / "ledger.txt")
    chat = changed_banking_agent(db).chat(paused["session_id"])
    [pending] = await chat.interrupts()
    with pytest.raises(ToolDefinitionChanged) as info:
        await chat.resume(respond=[pending.respond({"approved": True})])
    assert "userApproval" in str(info.value) and "allow_changed_tools" in str(info.value)
    assert "drop the pause with cancel_pending" in str(info.value)  # nothing else answers it (a probe)
    assert [i.ref for i in await chat.interrupts()] == [pending.ref]

    opted_in = changed_banking_agent(db, allow_changed_tools=True).chat(paused["session_id"])
    res = await opted_in.resume(respond=[pending.respond({"approved": True})])
    assert res.finish_reason == AgentFinishReason.STOP


async def test_a_denial_of_a_pause_whose_tool_changed_is_taken(tmp_path):
    """A denial runs nothing and checks no output against the new schemas: it is no answer the
    change can break (found by a probe: a redeploy that added a field stranded every waiting
    approval, denials too, but through allow_changed_tools, which lifts the check for all)."""
    db = tmp_path / "s.db"
    paused = pause_in_another_process(db, tmp_path / "ledger.txt")
    chat = changed_banking_agent(db).chat(paused["session_id"])
    [pending] = await chat.interrupts()
    res = await chat.resume(respond=[pending.deny("not any more")])
    assert res.finish_reason == AgentFinishReason.STOP and await chat.interrupts() == []
    assert [(e.decision, e.reason) for e in await chat.audit_trail()][-1] == ("deny", "not any more")


async def test_a_tool_removed_since_the_pause_is_refused_but_for_a_denial(tmp_path):
    """A deploy removed (or renamed) the paused tool: no answer can run it, allow_changed_tools
    or not — but a denial runs nothing, and is taken, over Python and REST (found by a probe: it
    was refused too, and only cancel_pending, of every open pause, was left)."""
    db = tmp_path / "s.db"
    paused = pause_in_another_process(db, tmp_path / "ledger.txt")
    _, before = banking.build(SqliteSessionStore(db), [])  # the deploy before, for a session of alice's
    other = before.chat(principal="alice")
    [other_pause] = (await other.send("Transfer $5 to savings.")).interrupts
    ai = Pausepoint()
    agent = ai.define_agent(
        name="bankingAgent",
        model=ScriptedModel(["denied, then"] * 2),
        store=SqliteSessionStore(db),
        allow_changed_tools=True,
    )
    chat = agent.chat(paused["session_id"])
    [pending] = await chat.interrupts()
    for answer in (pending.respond({"approved": True}), pending.restart()):
        with pytest.raises(ToolDefinitionChanged, match="no longer defined") as refused:
            await chat.resume(**({"respond": [answer]} if isinstance(answer, ToolResponse) else {"restart": [answer]}))
        assert "deny the pause" in str(refused.value)
    assert [i.ref for i in await chat.interrupts()] == [pending.ref]

    res = await chat.resume(respond=[pending.deny("the tool is gone")])
    assert (res.finish_reason, res.text, await chat.interrupts()) == (AgentFinishReason.STOP, "denied, then", [])
    assert [(e.decision, e.reason) for e in await chat.audit_trail()][-1] == ("deny", "the tool is gone")

    with serve_in_thread(lambda: create_app(ai, auth=BearerTokens({"t": "alice"}))) as url:
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": "Bearer t"}) as http:
            base = f"/v1/agents/bankingAgent/sessions/{other.session_id}/interrupts/{other_pause.ref}"
            approved = await http.post(f"{base}/approve", json={})
            assert (approved.status_code, approved.json()["error"]["code"]) == (409, "tool_definition_changed")
            denied = await http.post(f"{base}/deny", json={"reason": "gone"})
            assert denied.status_code == 200, denied.text
            assert denied.json()["finish_reason"] == "stop" and denied.json()["interrupts"] == []


async def test_unchanged_schema_with_new_description_is_still_accepted(tmp_path):
    """The fingerprint covers name and schemas, not prose: rewording a docstring is not a break."""
    db = tmp_path / "s.db"
    paused = pause_in_another_process(db, tmp_path / "ledger.txt")
    ai = Pausepoint()
    approval = ai.define_interrupt(
        name="userApproval",
        description="Reworded description.",
        input_schema=banking.UserApprovalInput,
        output_schema=banking.ApprovalOutput,
    )
    agent = ai.define_agent(
        name="bankingAgent", model=ScriptedModel(["fine"]), tools=[approval], store=SqliteSessionStore(db)
    )
    chat = agent.chat(paused["session_id"])
    [pending] = await chat.interrupts()
    assert (await chat.resume(respond=[pending.respond({"approved": True})])).text == "fine"


async def test_a_backup_made_with_sqlites_backup_while_a_server_writes_holds_every_pause(tmp_path):
    """README "Backups": SQLite's backup API (what `sqlite3 app.db ".backup ..."` runs) copies a
    store that a process is writing to, checkpoint files left out, into one that a new process
    opens and answers from."""
    import sqlite3

    db, copy = tmp_path / "app.db", tmp_path / "backup.db"
    store = SqliteSessionStore(db, checkpoint_file_bytes=1)  # every checkpoint base in a file beside it
    _, agent = banking.build(store, [])
    long = agent.chat(principal="ann")
    for _ in range(10):  # past checkpoint_every: its checkpoint is written, in a file
        paused_once = await long.send("Transfer $5 to savings.")
        await long.resume(respond=[paused_once.interrupts[0].respond({"approved": True})])
    paused = [agent.chat(principal="ann") for _ in range(3)]
    for chat in paused:
        await chat.send("Transfer $7 to savings.")
    await agent.sessions.settle()
    with sqlite3.connect(db) as source, sqlite3.connect(copy) as target:
        source.backup(target)  # the WAL's commits included; the server's connection stays open
    await store.close()
    assert list((tmp_path / "app.db-checkpoints").iterdir())  # not copied: a cache the log rebuilds

    ledger: list[str] = []
    _, restored = banking.build(SqliteSessionStore(copy), ledger)
    pending = await restored.list_sessions(has_pending=True)
    assert sorted(s.session_id for s in pending) == sorted(c.session_id for c in paused)
    chat = restored.chat(paused[0].session_id)
    [pause] = await chat.interrupts()
    assert (await chat.resume(respond=[pause.respond({"approved": True})])).text == "Transferred $7 to savings."
    assert ledger == ["7->savings"]
    history = await restored.chat(long.session_id).history()  # its checkpoint's file is not in the copy
    assert [m.text for m in history if m.role == "model" and m.text] == ["Transferred $5 to savings."] * 10


async def test_a_log_missing_a_record_is_a_store_error_on_every_read(tmp_path):
    """As a copy torn while it was written can leave it (found by a probe: a KeyError from the
    fold, a 500 over HTTP): a ``StoreError`` naming the session and the record, never the
    fold's own error; the sessions around it read as they are."""
    import sqlite3

    from pausepoint.errors import StoreError

    path = tmp_path / "s.db"
    agent = Pausepoint().define_agent(name="a", model=ScriptedModel(["one", "two"]), store=SqliteSessionStore(path))
    torn, whole = agent.chat(), agent.chat()
    await torn.send("hello", idempotency_key="k1")
    await whole.send("hi")
    with sqlite3.connect(path) as db:  # the keyed message's record goes; its turn's end stays
        [n] = db.execute("SELECT n FROM pausepoint_sessions WHERE id = ?", (torn.session_id,)).fetchone()
        db.execute(
            "DELETE FROM pausepoint_records"
            " WHERE key >> 31 = ? AND kind = 'message' AND CAST(data AS TEXT) LIKE '%k1%'",
            (n,),
        )
    fresh = Pausepoint().define_agent(name="a", model=ScriptedModel([]), store=SqliteSessionStore(path))
    for read in (lambda c: c.history(), lambda c: c.last_response(), lambda c: c.send("again", idempotency_key="k1")):
        with pytest.raises(StoreError, match=r"cannot be read at record \d+ \(a damaged store"):
            await read(fresh.chat(torn.session_id))
    assert [m.text for m in await fresh.chat(whole.session_id).history()] == ["hi", "two"]


class Amount(BaseModel):
    amount: int


async def test_a_denial_of_a_removed_tools_approval_keeps_to_the_roles_it_paused_under(tmp_path):
    policy = ApprovalPolicy(roles={"ops": Role(tools=["*"])}, members={"bob": ["ops"]})
    store = SqliteSessionStore(tmp_path / "s.db")
    ai = Pausepoint()

    @ai.tool(requires_approval=True)
    async def pay(input: Amount) -> str:
        """Pay."""
        return "paid"

    script = ScriptedModel(lambda r: "done" if last_tool_results(r) else [tool_call("pay", {"amount": 3})])
    asked = ai.define_agent(name="a", model=script, tools=[pay], store=store, approval=policy).chat(principal="alice")
    [pause] = (await asked.send("pay 3")).interrupts

    after = Pausepoint().define_agent(name="a", model=ScriptedModel(["not paid"]), store=store, approval=policy)
    with pytest.raises(ApprovalForbidden, match="none of the roles"):
        await after.chat(asked.session_id, principal="alice").resume(respond=[pause.deny("gone")])
    res = await after.chat(asked.session_id, principal="bob").resume(respond=[pause.deny("gone")])
    assert (res.finish_reason, res.text) == (AgentFinishReason.STOP, "not paid")
    assert [(e.decision, e.principal) for e in await after.chat(asked.session_id).audit_trail()][-1] == ("deny", "bob")
