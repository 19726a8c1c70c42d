"""One ref per tool call on every surface (answering the ref seen anywhere works while the pause
is live); the streamed chunks, the response and the history tell the same story; a pause is
still answered once, and an answer built for an old pause of a call that paused again is refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pausepoint import AgentFinishReason, Interrupt, Message, Pausepoint, ToolResponse, ToolRestart, TurnChunk
from pausepoint.errors import AlreadyResolved, DuplicateAnswer, SessionNotFound, UnknownInterrupt
from pausepoint.stores import LogEntry, SessionSummary
from pausepoint.testing import ScriptedModel, tool_call

from .helpers import approvals_agent


def rebuild(chunks: list[TurnChunk]) -> tuple[list[tuple[Any, ...]], list[str]]:
    """The messages a turn's chunks add, rebuilt as README's streaming section says (text and
    tool_request chunks make a model message, tool_result chunks a tool message, interrupt
    chunks add nothing: they mark a streamed call paused), and the refs marked paused."""
    messages: list[tuple[Any, ...]] = []
    paused: list[str] = []
    for chunk in chunks:
        if chunk.kind in ("text", "tool_request"):
            if not messages or messages[-1][0] != "model":
                messages.append(("model", "", []))
            role, text, requests = messages[-1]
            if chunk.kind == "text":
                messages[-1] = (role, text + chunk.text, requests)
            else:
                requests.append((chunk.ref, chunk.name, chunk.input))
        elif chunk.kind == "tool_result":
            if not messages or messages[-1][0] != "tool":
                messages.append(("tool", []))
            messages[-1][1].append((chunk.ref, chunk.name, chunk.output))
        elif chunk.kind == "interrupt":
            paused.append(chunk.interrupt.ref)
    return messages, paused


def shape(message: Message) -> tuple[Any, ...]:
    """A history message in the form ``rebuild`` gives."""
    if message.role == "model":
        return ("model", message.text, [(r.ref, r.name, r.input) for r in message.tool_requests])
    if message.role == "tool":
        return ("tool", [(r.ref, r.name, r.output) for r in message.tool_responses])
    return ("user", message.text)


async def streamed(chat, stream) -> tuple[list[TurnChunk], Any, list[Message], list[Message]]:
    try:
        before = await chat.history()
    except SessionNotFound:  # a new chat: its session is created by the turn
        before = []
    chunks = [chunk async for chunk in stream]
    response = await stream.response
    return chunks, response, before, await chat.history()


def assert_same_story(chunks, response, before, after, *, sent: str | None = None) -> None:
    """The chunks rebuild exactly what the turn added to the history; the response's message is
    the history's last model message; the calls marked paused in the stream are open."""
    rebuilt, paused = rebuild(chunks)
    added = after[len(before) :]
    if sent is not None:
        assert shape(added[0]) == ("user", sent)
        added = added[1:]
    assert rebuilt == [shape(m) for m in added]
    model = [m for m in after if m.role == "model"]
    assert response.message == model[-1]
    assert set(paused) <= {i.ref for i in response.interrupts}  # what paused in this turn is still open
    requested = {r.ref for m in after if m.role == "model" for r in m.tool_requests}
    assert {i.ref for i in response.interrupts} <= requested  # every pause is shown by its call's ref


async def test_a_finished_sibling_and_a_pause_stream_as_the_history_holds_them(store):
    agent, _ = approvals_agent(
        store, [[tool_call("lookup", {"key": "a"}), tool_call("ask", {"question": "ok?"})], "Thanks."]
    )
    chat = agent.chat()
    chunks, res, before, after = await streamed(chat, chat.send_stream("go"))
    assert res.finish_reason == AgentFinishReason.INTERRUPTED
    assert_same_story(chunks, res, before, after, sent="go")
    assert [m.role for m in after] == ["user", "model"]  # lookup's result waits for the batch
    [request_chunk] = [c for c in chunks if c.kind == "tool_request" and c.name == "ask"]
    [interrupt_chunk] = [c for c in chunks if c.kind == "interrupt"]
    assert request_chunk.ref == interrupt_chunk.interrupt.ref == res.interrupts[0].ref

    # the ref the tool_request chunk showed answers the pause
    answer = ToolResponse(request_chunk.ref, "ask", {"approved": True})
    chunks, res, before, after = await streamed(chat, chat.resume_stream(respond=[answer]))
    assert res.text == "Thanks."
    assert_same_story(chunks, res, before, after)
    assert [m.role for m in after] == ["user", "model", "tool", "model"]
    assert [r.ref for r in after[2].tool_responses] == [r.ref for r in after[1].tool_requests]


async def test_partial_answers_stream_nothing_until_the_batch_is_complete(store):
    agent, _ = approvals_agent(
        store, [[tool_call("ask", {"question": "a"}), tool_call("ask", {"question": "b"})], "Both answered."]
    )
    chat = agent.chat()
    first = await chat.send("go")
    a, b = first.interrupts
    chunks, res, before, after = await streamed(chat, chat.resume_stream(respond=[a.respond({"approved": True})]))
    assert [c.kind for c in chunks] == ["turn_end"] and after == before
    assert_same_story(chunks, res, before, after)
    assert [i.ref for i in res.interrupts] == [b.ref]
    chunks, res, before, after = await streamed(chat, chat.resume_stream(respond=[b.respond({"approved": False})]))
    assert_same_story(chunks, res, before, after)
    assert [(r.ref, r.output) for r in after[2].tool_responses] == [
        (a.ref, {"approved": True}),
        (b.ref, {"approved": False}),
    ]


async def test_a_restart_that_pauses_again_keeps_the_ref_and_refuses_the_old_answer(store):
    ledger: list[str] = []
    agent, _ = approvals_agent(store, [[tool_call("guarded", {"action": "x"})], "done"], ledger=ledger)
    chat = agent.chat()
    first = (await chat.send("go")).interrupts[0]
    chunks, res, before, after = await streamed(chat, chat.resume_stream(restart=[first.restart()]))
    assert [c.kind for c in chunks] == ["interrupt", "turn_end"]
    assert_same_story(chunks, res, before, after)
    second = res.interrupts[0]
    assert second.ref == first.ref == after[1].tool_requests[0].ref
    assert second.pause_id != first.pause_id

    # the answer built for the first pause cannot answer the second one...
    with pytest.raises(AlreadyResolved) as refused:
        await chat.resume(restart=[first.restart(resumed_metadata={"ok": True})])
    assert refused.value.details["ref"] == first.ref and "paused again" in refused.value.message
    # ...and names the pause to answer now (found by a probe: only the answered one's id was given)
    assert refused.value.details["pause_id"] == first.pause_id
    assert refused.value.details["live_pause_id"] == second.pause_id and second.pause_id in refused.value.message
    assert ledger == []
    # ...an answer by the bare ref answers the live pause, once
    bare = ToolRestart(first.ref, "guarded", resumed_metadata={"ok": True})
    res = await chat.resume(restart=[bare])
    assert res.text == "done" and ledger == ["guarded:x"]
    with pytest.raises(AlreadyResolved) as again:
        await chat.resume(restart=[bare])
    assert "live_pause_id" not in again.value.details
    # the first pause's answer now names no pause to answer: its newer one is resolved too
    # (found by a probe: it named that one, already run, as the pause to answer)
    with pytest.raises(AlreadyResolved) as late:
        await chat.resume(restart=[first.restart(resumed_metadata={"ok": True})])
    assert "live_pause_id" not in late.value.details
    assert "paused again since, and that pause was resolved too (restart at " in late.value.message
    trail = [e for e in await chat.audit_trail() if e.decision != "message"]
    assert [(e.ref, e.pause_id) for e in trail] == [(first.ref, first.pause_id), (first.ref, second.pause_id)]


async def test_answers_to_one_call_twice_in_one_resume_are_refused(store):
    agent, _ = approvals_agent(store, [[tool_call("ask", {"question": "a"})]])
    chat = agent.chat()
    pause = (await chat.send("go")).interrupts[0]
    with pytest.raises(DuplicateAnswer):
        await chat.resume(respond=[pause.respond({"approved": True}), ToolResponse(pause.ref, "ask", {"approved": 1})])
    with pytest.raises(UnknownInterrupt):
        await chat.resume(respond=[ToolResponse(pause.ref, "ask", {"approved": True}, pause_id="nope")])
    assert [i.ref for i in await chat.interrupts()] == [pause.ref]


def _old_log(now: datetime, fingerprint: str) -> list[bytes]:
    """A session paused by a version of pausepoint whose pauses had refs of their own (the
    pause's ref differs from its call's), as its encoder wrote the records."""
    at = now.isoformat().replace("+00:00", "Z")
    request = {"name": "ask", "input": {"question": "ok?"}, "ref": "call0000000000000000000a", "call_id": None,
               "provider_metadata": None, "kind": "tool_request"}  # fmt: skip
    return [
        json.dumps(r).encode()
        for r in (
            {"agent": "approvals", "owner": "alice", "at": at, "kind": "session_started"},
            {"message": {"role": "user", "parts": [{"text": "go", "provider_metadata": None, "kind": "text"}]},
             "at": at, "kind": "message"},
            {"message": {"role": "model", "parts": [request]}, "at": at, "kind": "message"},
            {"ref": "pause000000000000000000b", "call_ref": "call0000000000000000000a", "name": "ask",
             "input": {"question": "ok?"}, "metadata": None, "fingerprint": fingerprint, "turn": 1, "at": at,
             "expires_at": None, "kind": "call_paused"},
            {"turn": 1, "finish_reason": "interrupted", "open_refs": ["pause000000000000000000b"], "error": None,
             "idempotency_key": None, "message_index": 1, "kind": "turn_ended"},
        )
    ]  # fmt: skip


async def _plant(agent, session_id: str) -> None:
    now = datetime.now(UTC)
    log = _old_log(now, agent.tools["ask"].fingerprint)
    entries = [LogEntry(i, json.loads(data)["kind"], data) for i, data in enumerate(log, 1)]
    summary = SessionSummary(session_id, "approvals", "alice", len(entries), now, now, pending=1, turn=1)
    await agent.store.append(session_id, 0, entries, summary)


async def test_a_log_written_with_pause_refs_loads_and_shows_one_ref_per_call(store):
    agent, _ = approvals_agent(store, ["Thanks."])
    await _plant(agent, "old-session")
    chat = agent.chat("old-session")
    [pause] = await chat.interrupts()
    assert pause.ref == "call0000000000000000000a" == (await chat.history())[1].tool_requests[0].ref
    assert pause.pause_id == "pause000000000000000000b"
    last = await chat.last_response()
    assert last is not None and [i.ref for i in last.interrupts] == [pause.ref]
    res = await chat.resume(respond=[pause.respond({"approved": True})])
    assert res.text == "Thanks."
    sent, entry = await chat.audit_trail()  # the message from the old log (no sender recorded), the answer
    assert (sent.decision, sent.via) == ("message", "unknown")
    assert (entry.ref, entry.pause_id) == (pause.ref, pause.pause_id)


async def test_a_log_written_with_pause_refs_still_takes_answers_by_the_old_pause_ref(store):
    agent, _ = approvals_agent(store, ["Thanks."])
    await _plant(agent, "old-session")
    chat = agent.chat("old-session")
    old = ToolResponse("pause000000000000000000b", "ask", {"approved": True})  # learned from an old inbox
    assert (await chat.resume(respond=[old])).text == "Thanks."
    with pytest.raises(AlreadyResolved):
        await chat.resume(respond=[old])
    with pytest.raises(AlreadyResolved):
        await chat.resume(respond=[ToolResponse("call0000000000000000000a", "ask", {"approved": True})])


async def test_a_refused_answer_to_an_old_pause_names_no_new_pause_once_that_one_expired(store):
    """Found by a probe: the refusal named the call's new pause as the one to answer though it
    had expired (not settled yet), and answering it was then refused as expired."""
    now = [datetime(2026, 1, 1, 9, 0, tzinfo=UTC)]
    ai = Pausepoint(clock=lambda: now[0])

    @ai.tool()
    async def confirm(step: str) -> str:
        """Asks, every time it runs, for a minute."""
        raise Interrupt({"step": step}, ttl=60)

    model = ScriptedModel([[tool_call("confirm", {"step": "x"})], "done"])
    chat = ai.define_agent(name="asks", model=model, tools=[confirm], store=store).chat()
    first = (await chat.send("go")).interrupts[0]
    second = (await chat.resume(restart=[first.restart()])).interrupts[0]
    assert second.pause_id != first.pause_id
    now[0] += timedelta(minutes=2)  # the new pause expired; nothing settled it yet
    with pytest.raises(AlreadyResolved) as refused:
        await chat.resume(restart=[first.restart(resumed_metadata={"ok": True})])
    assert "live_pause_id" not in refused.value.details
    assert "paused again since, and that pause expired at 2026-01-01T09:01:00" in refused.value.message
