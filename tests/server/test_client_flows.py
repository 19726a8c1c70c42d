"""The examples' full flows through ``pausepoint.client`` over real HTTP, streaming included."""

from __future__ import annotations

import json

import pytest

from examples import banking
from pausepoint import AgentFinishReason, InterruptChunk, TextChunk, ToolResponse, TurnEndChunk
from pausepoint.client import Client
from pausepoint.errors import (
    AlreadyResolved,
    InvalidAnswer,
    InvalidMessage,
    InvalidSessionId,
    PendingInterrupts,
    SessionNotFound,
    Unauthenticated,
    UnknownInterrupt,
)
from pausepoint.stores import InMemorySessionStore


async def test_banking_flow_streamed_through_the_client(served):
    async with Client(served.bank, token="alice-token") as client:
        chat = client.agent("bankingAgent").chat()
        turn = chat.send_stream("Transfer $500 to savings.")
        chunks = [chunk async for chunk in turn]
        res = await turn.response
        assert res.finish_reason == AgentFinishReason.INTERRUPTED
        assert chat.session_id == res.session_id
        pause = res.interrupts[0]
        assert pause.name == "userApproval" and pause.input["details"] == "Transfer $500 to savings"
        assert [c.interrupt.ref for c in chunks if isinstance(c, InterruptChunk)] == [pause.ref]
        assert isinstance(chunks[-1], TurnEndChunk)
        assert (await chat.interrupts()) == res.interrupts

        with pytest.raises(PendingInterrupts) as paused:
            await chat.send("Anything else?")
        # in this chat's words, as a local chat says it (found by a probe: REST's routes)
        assert str(paused.value) == f"1 call(s) are paused in session {chat.session_id!r}: " + (
            "answer them with resume() or drop them with cancel_pending()"
        )
        assert paused.value.details["refs"] == [pause.ref]

        turn = chat.resume_stream(respond=[pause.respond({"approved": True, "feedback": "Looks good!"})])
        text = "".join([c.text async for c in turn if isinstance(c, TextChunk)])
        res = await turn.response
        assert res.finish_reason == AgentFinishReason.STOP
        assert res.text == text == "Transferred $500 to savings."
        assert served.ledger == ["500->savings"]

        sent, entry, grant, decided = await chat.audit_trail()
        assert (sent.decision, sent.principal, sent.via) == ("message", "alice", "http")
        assert (entry.ref, entry.decision, entry.principal, entry.via) == (pause.ref, "respond", "alice", "http")
        assert entry.output == {"approved": True, "feedback": "Looks good!"}
        # the yes granted the transfer it asked about, and that grant approved the transfer
        assert (grant.decision, grant.principal, grant.name) == ("grant", "alice", "transfer_money")
        assert (decided.decision, decided.via, decided.grant) == ("approve", "policy", grant.grant)

        with pytest.raises(AlreadyResolved):  # the same answer again: refused, nothing runs twice
            await chat.resume(respond=[pause.respond({"approved": True})])
        assert served.ledger == ["500->savings"]


async def test_retry_with_the_same_key_gets_the_first_outcome(served):
    async with Client(served.bank, token="alice-token") as client:
        chat = client.agent("bankingAgent").chat()
        res = await chat.send("Transfer $7 to bob.")
        answer = res.interrupts[0].respond({"approved": True})
        first = await chat.resume(respond=[answer], idempotency_key="k-1")
        again = await chat.resume(respond=[answer], idempotency_key="k-1")
        assert again == first and first.text == "Transferred $7 to bob."
        assert served.ledger == ["7->bob"]


async def test_shell_flow_restart_pause_again_and_edit(served):
    async with Client(served.shell, token="alice-token") as client:
        chat = client.agent("shellAgent").chat()
        res = await chat.send("Run: rm -rf ./build")
        first = res.interrupts[0]
        assert first.metadata == {"command": "rm -rf ./build", "reason": "The command can modify files."}

        res = await chat.resume(restart=[first.restart()])  # runs again: pauses again, same ref
        second = res.interrupts[0]
        assert res.finish_reason == AgentFinishReason.INTERRUPTED and second.ref == first.ref
        assert second.pause_id != first.pause_id  # a new pause: the old answer cannot answer it

        with pytest.raises(AlreadyResolved):
            await chat.resume(restart=[first.restart(resumed_metadata={"tool_approved": True})])

        res = await chat.resume(
            restart=[
                second.restart(replace_input={"command": "rm -rf ./tmp"}, resumed_metadata={"tool_approved": True})
            ]
        )
        assert res.finish_reason == AgentFinishReason.STOP
        assert served.executed == [
            {
                "command": "rm -rf ./tmp",
                "resumed_metadata": {"tool_approved": True},
                "original_input": {"command": "rm -rf ./build"},
            }
        ]
        assert [e.decision for e in await chat.audit_trail()] == ["message", "restart", "approve"]


async def test_deny_and_cancel_through_the_client(served):
    async with Client(served.bank, token="alice-token") as client:
        chat = client.agent("bankingAgent").chat()
        res = await chat.send("Transfer $9 to eve.")
        res = await chat.resume(respond=[res.interrupts[0].deny("not today")])
        assert "not today" in res.text and served.ledger == []
        res = await chat.send("Transfer $3 to eve.")
        res = await chat.cancel_pending("changed my mind")
        assert res.finish_reason == AgentFinishReason.ABORTED and await chat.interrupts() == []


async def test_client_errors_are_the_core_types(served):
    async with Client(served.bank, token="alice-token") as client:
        chat = client.agent("bankingAgent").chat()
        await chat.send("Transfer $1 to x.")
        with pytest.raises(UnknownInterrupt):
            await chat.resume(respond=[ToolResponse("no-such-ref", "userApproval", {"approved": True})])
        with pytest.raises(SessionNotFound):
            await client.agent("bankingAgent").chat("no-such-session").interrupts()
        # An id no session can have reads as no session, and is refused by a send, as a local
        # Chat does: never put in the URL as it is (found by a probe: "ID?evil" read session ID's
        # pauses, and "ID/x" gave KeyError and "no such route").
        for odd in (f"{chat.session_id}?evil", f"{chat.session_id}/x", "..", "a%2Fb", "x" * 129):
            odd_chat = client.agent("bankingAgent").chat(odd)
            for read in (odd_chat.history, odd_chat.interrupts, odd_chat.audit_trail, odd_chat.last_response):
                with pytest.raises(SessionNotFound):
                    await read()
            with pytest.raises(InvalidSessionId):
                await odd_chat.send("hi")
        # A new chat reads as empty until its first send makes the session, as a local one does
        # — also after a first send the server refused (nothing was made).
        fresh = client.agent("bankingAgent").chat()
        for _ in range(2):
            reads = (fresh.history(), fresh.interrupts(), fresh.audit_trail(), fresh.grants(), fresh.last_response())
            assert [await read for read in reads] == [[], [], [], [], None]
            with pytest.raises(InvalidMessage):
                await fresh.send("hi \ud800")
    async with Client(served.bank, token="wrong") as client:
        with pytest.raises(Unauthenticated):
            await client.agent("bankingAgent").chat().send("hi")


async def test_what_a_session_cannot_keep_is_refused_with_the_local_chats_typed_errors(served):
    """Surrogate code points are refused as a local ``Chat`` refuses them: never an encoder's
    error on the way out, nor a key mangled on the way in — nor two of them sent as the escapes
    of another character, read back changed (found by a probe: "\\ud83d\\ude00" came back as 😀)."""
    async with Client(served.bank, token="alice-token") as client:
        chat = client.agent("bankingAgent").chat()
        with pytest.raises(InvalidMessage):
            await chat.send("hi \ud800")
        with pytest.raises(InvalidMessage) as paired:
            await chat.send("hi \ud83d\ude00")
        assert paired.value.details["rule"] == "unpaired_surrogate"
        _, agent = banking.build(InMemorySessionStore(), [])
        for text in ("hi \ud800", "hi \ud83d\ude00"):  # the same details: path and rule (the path was "$.parts")
            with pytest.raises(InvalidMessage) as here:
                await agent.chat().send(text)
            with pytest.raises(InvalidMessage) as there:
                await chat.send(text)
            assert there.value.details == here.value.details and here.value.details["path"] == "$.parts[0].text"
        [pause] = (await chat.send("Transfer $1 to x.")).interrupts
        with pytest.raises(InvalidAnswer):
            await chat.resume(respond=[pause.respond({"approved": True, "feedback": "\udc00"})])
        with pytest.raises(InvalidAnswer):
            await chat.approve(pause.ref, metadata={"\ud800": 1})
        with pytest.raises(InvalidAnswer) as paired_answer:
            await chat.resume(respond=[pause.respond({"approved": True, "feedback": "\ud83d\ude00"})])
        assert paired_answer.value.details["ref"] == pause.ref
        assert [e.decision for e in await chat.audit_trail()] == ["message"]  # nothing recorded
        answer = {"approved": True, "feedback": "caf\u00e9 \U0001f600"}  # other text travels intact
        assert (await chat.resume(respond=[pause.respond(answer)])).finish_reason == "stop"
        assert [e.output for e in await chat.audit_trail() if e.decision == "respond"] == [answer]


async def test_a_pause_given_to_approve_for_its_ref_is_refused_in_the_same_words_everywhere(served):
    """Found by a probe: ``chat.approve(pause)`` (the pause, not ``pause.ref``) was refused by the
    local chat naming ``$.respond[0].ref`` — a list the caller never wrote — and by the client in
    other words. Both now say what ``ref`` is, in one sentence; nothing is recorded."""
    _, agent = banking.build(InMemorySessionStore(), [])
    here_chat = agent.chat()
    [here_pause] = (await here_chat.send("Transfer $1 to x.")).interrupts
    with pytest.raises(InvalidAnswer) as here:
        await here_chat.approve(here_pause)  # type: ignore[arg-type]
    async with Client(served.bank, token="alice-token") as client:
        chat = client.agent("bankingAgent").chat()
        [pause] = (await chat.send("Transfer $1 to x.")).interrupts
        with pytest.raises(InvalidAnswer) as there:
            await chat.approve(pause)  # type: ignore[arg-type]
        assert [e.decision for e in await chat.audit_trail()] == ["message"]
    said = "ref must be a string (the paused call's: pause.ref), not PendingInterrupt"
    assert str(here.value) == str(there.value) == said
    assert [e.decision for e in await here_chat.audit_trail()] == ["message"]


async def test_nan_and_infinity_are_refused_with_the_local_chats_typed_errors_and_details(served):
    """JSON cannot carry them, so the client refuses them before sending, as a local ``Chat``
    refuses them: the same error class, path, rule and ref (not the server's 400 for bad JSON)."""
    from examples import banking

    _, local_agent = banking.build()
    local = local_agent.chat()
    [local_pause] = (await local.send("Transfer $1 to x.")).interrupts
    async with Client(served.bank, token="alice-token") as client:
        remote = client.agent("bankingAgent").chat()
        [remote_pause] = (await remote.send("Transfer $1 to x.")).interrupts
        cases = [
            lambda chat, pause: chat.resume(respond=[pause.respond({"approved": True, "n": float("nan")})]),
            lambda chat, pause: chat.resume(restart=[pause.restart(resumed_metadata={"x": [1, float("inf")]})]),
            lambda chat, pause: chat.approve(pause.ref, metadata={"x": float("-inf")}),
        ]
        for case in cases:
            with pytest.raises(InvalidAnswer) as at_home:
                await case(local, local_pause)
            with pytest.raises(InvalidAnswer) as remotely:
                await case(remote, remote_pause)
            expected = {**at_home.value.details}
            if "ref" in expected:
                expected["ref"] = remote_pause.ref
            assert remotely.value.details == expected and expected["rule"] == "finite_number"
        assert [e.decision for e in await remote.audit_trail()] == ["message"]  # nothing recorded


async def test_inbox_lists_pending_sessions_of_the_caller_only(served):
    async with Client(served.bank, token="alice-token") as alice, Client(served.bank, token="bob-token") as bob:
        paused = await alice.agent("bankingAgent").chat().send("Transfer $2 to y.")
        await alice.agent("bankingAgent").chat().send("hello")
        inbox = await alice.agent("bankingAgent").list_sessions(has_pending=True)
        assert [s.session_id for s in inbox] == [paused.session_id]
        assert await bob.agent("bankingAgent").list_sessions() == []


ODD_LINE_ENDS = "one\u2028two\u2029three\x85four"  # where str.splitlines() splits, and SSE does not


async def test_text_with_unicode_line_separators_streams_whole_to_every_client(served, http):
    # The server escapes them in its events, so a client that splits lines as str.splitlines()
    # does (httpx's aiter_lines) reads each event whole...
    async with http.stream(
        "POST",
        served.shell + "/v1/agents/shellAgent/sessions?stream=true",
        json={"message": f"Run: rm {ODD_LINE_ENDS}"},
        headers={"Authorization": "Bearer alice-token"},
    ) as reply:
        data = [line[5:] async for line in reply.aiter_lines() if line.startswith("data:")]
    assert data and all(json.loads(line) for line in data)
    assert json.loads(data[-1])["interrupts"][0]["input"] == {"command": f"rm {ODD_LINE_ENDS}"}
    # The Genkit wire's stream is written the same way.
    wire = {"data": {"message": {"role": "user", "content": [{"text": f"Run: rm {ODD_LINE_ENDS}"}]}}}
    async with http.stream(
        "POST",
        served.shell + "/agents/shellAgent",
        json=wire,
        headers={"Authorization": "Bearer alice-token", "Accept": "text/event-stream"},
    ) as reply:
        data = [line[5:] async for line in reply.aiter_lines() if line.startswith("data:")]
    assert data and all(json.loads(line) for line in data)
    [request] = [p for p in json.loads(data[-1])["result"]["message"]["content"] if "toolRequest" in p]
    assert request["toolRequest"]["input"] == {"command": f"rm {ODD_LINE_ENDS}"}
    # ...and the client gets the text back as it was sent, in the chunks and the reply.
    async with Client(served.shell, token="alice-token") as client:
        chat = client.agent("shellAgent").chat()
        turn = chat.send_stream(f"Run: rm {ODD_LINE_ENDS}")
        chunks = [chunk async for chunk in turn]
        res = await turn.response
        assert res.interrupts[0].input == {"command": f"rm {ODD_LINE_ENDS}"}
        assert chunks[-1].response == res
        assert (await chat.history())[0].text == f"Run: rm {ODD_LINE_ENDS}"


async def test_the_client_splits_an_event_stream_only_where_sse_ends_a_line():
    from pausepoint._remote_stream import sse_events, sse_lines

    async def pieces(*texts: str):
        for text in texts:
            yield text

    # LF, CR LF (its CR at the end of one piece, its LF at the start of the next) and CR; a raw
    # U+2028 in the data, as another server may send it, stays inside its line.
    stream = pieces('event: chunk\r\ndata: {"a": "x\u2028y"}\r', '\n\r\nevent: response\rdata: {"b": 1}\n', "\n")
    events = [event async for event in sse_events(sse_lines(stream))]
    assert events == [("chunk", {"a": "x\u2028y"}), ("response", {"b": 1})]
