"""An answer binds to what its approver saw: a call that paused again showing another input
refuses answers by its bare ref that could approve what nobody was shown (``PauseChanged``,
naming the live pause), and takes those that say what they decide — a denial, an answer naming
the live pause, a restart carrying the input it runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from examples import shell
from pausepoint import AgentFinishReason, ToolResponse, ToolRestart
from pausepoint.errors import AlreadyResolved, InvalidAnswer, PauseChanged
from pausepoint.stores import SqliteSessionStore

APPROVED = {"tool_approved": True}


async def edited_then_paused(store: Any, executed: list[dict[str, Any]]) -> tuple[Any, Any, Any]:
    """The issue's sequence: a risky command pauses; the person edits it (no approval), and the
    edited call pauses again, showing the new command under the same ref."""
    _, agent = shell.build(store, executed)
    chat = agent.chat()
    first = (await chat.send("Run: rm -rf ./build")).interrupts[0]
    res = await chat.resume(restart=[first.restart(replace_input={"command": "rm -rf /"})])
    [live] = res.interrupts
    assert (live.ref, live.input) == (first.ref, {"command": "rm -rf /"}) and live.pause_id != first.pause_id
    return chat, first, live


async def test_a_stale_approval_by_bare_ref_is_refused_and_names_the_live_pause(store):
    executed: list[dict[str, Any]] = []
    chat, first, live = await edited_then_paused(store, executed)
    before = (await chat.history(), await chat.audit_trail())

    bare_answers = [
        lambda: chat.resume(restart=[ToolRestart(first.ref, first.name, resumed_metadata=APPROVED)]),
        lambda: chat.resume(respond=[ToolResponse(first.ref, first.name, {"ran": "nothing"})]),
        lambda: chat.approve(first.ref),
        lambda: chat.approve(first.ref, grant=None, idempotency_key="approve-once"),
    ]
    for answer in bare_answers:
        with pytest.raises(PauseChanged) as refused:
            await answer()
        assert refused.value.code == "pause_changed"
        assert refused.value.details == {"ref": first.ref, "pause_id": live.pause_id}
        assert "PendingInterrupt.respond/restart carry it" in str(refused.value) and "REST" not in str(refused.value)
        assert live.pause_id in refused.value.message
    # the answer built for the first pause is refused as answered, as before
    with pytest.raises(AlreadyResolved):
        await chat.resume(restart=[first.restart(resumed_metadata=APPROVED)])

    assert executed == []
    assert (await chat.history(), await chat.audit_trail()) == before
    assert [p.pause_id for p in await chat.interrupts()] == [live.pause_id]

    # the approver who was shown 'rm -rf /' approves it by naming the live pause
    res = await chat.approve(live.ref, pause_id=live.pause_id)
    assert res.finish_reason == AgentFinishReason.STOP
    assert [e["command"] for e in executed] == ["rm -rf /"]


async def test_answers_that_say_what_they_decide_still_take_a_bare_ref(store):
    # a denial widens nothing
    executed: list[dict[str, Any]] = []
    chat, first, _ = await edited_then_paused(store, executed)
    res = await chat.resume(respond=[ToolResponse(first.ref, first.name, decision="deny", reason="no")])
    assert res.finish_reason == AgentFinishReason.STOP and executed == []

    # a restart carrying the input it saw runs that input, the live one...
    chat, first, live = await edited_then_paused(store, executed)
    carried = ToolRestart(first.ref, first.name, replace_input=live.input, resumed_metadata=APPROVED)
    await chat.resume(restart=[carried])
    # (the input that runs is not the model's: the tool sees what the model asked, as ctx.original_input)
    assert executed[-1] == {
        "command": "rm -rf /",
        "resumed_metadata": APPROVED,
        "original_input": {"command": "rm -rf ./build"},
    }

    # ...or the one it edits to (this tool takes edits): what runs is what the answer says
    chat, first, _ = await edited_then_paused(store, executed)
    await chat.approve(first.ref, replace_input={"command": "rm -rf ./build/tmp"})
    assert executed[-1]["command"] == "rm -rf ./build/tmp"


async def test_a_call_that_paused_again_showing_the_same_still_takes_its_bare_ref(store):
    executed: list[dict[str, Any]] = []
    _, agent = shell.build(store, executed)
    chat = agent.chat()
    first = (await chat.send("Run: rm -rf ./build")).interrupts[0]
    [again] = (await chat.resume(restart=[first.restart()])).interrupts  # not approved: the same pause again
    assert (again.input, again.metadata) == (first.input, first.metadata) and again.pause_id != first.pause_id
    res = await chat.approve(first.ref)
    assert res.finish_reason == AgentFinishReason.STOP
    assert [e["command"] for e in executed] == ["rm -rf ./build"]


async def test_the_rule_holds_in_a_process_that_loads_the_session_cold(tmp_path: Path):
    path = tmp_path / "sessions.db"
    executed: list[dict[str, Any]] = []
    chat, first, live = await edited_then_paused(SqliteSessionStore(path), executed)
    # another process: a new store and agent that never saw the session (a checkpoint or the log)
    _, cold_agent = shell.build(SqliteSessionStore(path), executed)
    cold = cold_agent.chat(session_id=chat.session_id)
    with pytest.raises(PauseChanged) as refused:
        await cold.approve(first.ref)
    assert refused.value.details["pause_id"] == live.pause_id
    with pytest.raises(PauseChanged):
        cold.sync.approve(first.ref)
    assert executed == []
    await cold.approve(first.ref, pause_id=live.pause_id)
    assert [e["command"] for e in executed] == ["rm -rf /"]


async def test_an_edit_back_to_the_first_input_still_refuses_bare_answers(store):
    # the pauses showed A, then B, then A again: someone may have seen B
    executed: list[dict[str, Any]] = []
    chat, first, live = await edited_then_paused(store, executed)
    [back] = (await chat.resume(restart=[live.restart(replace_input=first.input)])).interrupts
    assert back.input == first.input
    with pytest.raises(PauseChanged):
        await chat.approve(first.ref)
    assert executed == []


async def test_approve_with_replace_input_none_approves_no_edit_it_refuses(store):
    executed: list[dict[str, Any]] = []
    _, agent = shell.build(store, executed)
    chat = agent.chat()
    [pause] = (await chat.send("Run: rm -rf ./build")).interrupts
    with pytest.raises(InvalidAnswer, match="replace_input"):  # an edit to None, not "no edit"
        await chat.approve(pause.ref, replace_input=None)
    with pytest.raises(InvalidAnswer, match="replace_input"):
        chat.sync.approve(pause.ref, replace_input=None)
    assert executed == [] and [p.pause_id for p in await chat.interrupts()] == [pause.pause_id]
