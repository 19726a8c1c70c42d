"""A message sent with an idempotency key is sent once: a retry with the same key by the same
principal gets the first turn's response (in any process, also when that turn was cut short),
never a second turn; the key with another message, by another principal, or a resume's key, is
refused with ``IdempotencyKeyReused`` and records nothing."""

from __future__ import annotations

import asyncio
import json

import pytest

from pausepoint import AgentFinishReason
from pausepoint.errors import IdempotencyKeyReused, InvalidMessage, StoreError
from pausepoint.stores import SqliteSessionStore
from pausepoint.testing import tool_call
from tests.approval_apps import build, treasury
from tests.test_cut_short import FailingStore, Transfers, bank


async def test_a_message_sent_again_with_its_key_is_not_sent_again(store):
    agent, model, ledger = build(store, treasury())
    chat = agent.chat(principal="dave")
    first = await chat.send("deploy web", idempotency_key="m1")
    assert first.finish_reason == AgentFinishReason.STOP and ledger == ["deploy:web"]
    history, trail, asked = await chat.history(), await chat.audit_trail(), len(model.requests)

    again = await chat.send("deploy web", idempotency_key="m1")
    assert again == first
    assert ledger == ["deploy:web"] and len(model.requests) == asked  # no turn: no model call, no tool run
    assert await chat.history() == history and await chat.audit_trail() == trail
    [entry] = [e for e in trail if e.decision == "message"]
    assert (entry.principal, entry.idempotency_key) == ("dave", "m1")

    # a stream of the retry ends as the first one did: its turn_end, with the first response
    stream = chat.send_stream("deploy web", idempotency_key="m1")
    chunks = [chunk async for chunk in stream]
    assert [c.kind for c in chunks] == ["turn_end"] and chunks[0].response == first
    assert await stream.response == first
    assert chat.sync.send("deploy web", idempotency_key="m1") == first


async def test_a_messages_key_replays_only_that_message_by_that_principal(store):
    agent, _, ledger = build(store, treasury())
    chat = agent.chat(principal="dave")
    await chat.send("deploy web", idempotency_key="m1")
    paused = await chat.send("pay 5 to savings", idempotency_key="m2")
    [pause] = paused.interrupts
    history, trail = await chat.history(), await chat.audit_trail()

    refusals = [
        chat.send("deploy api", idempotency_key="m1"),  # another message
        agent.chat(chat.session_id, principal="erin").send("deploy web", idempotency_key="m1"),  # another sender
        chat.approve(pause.ref, principal="alice", idempotency_key="m2"),  # a resume with a message's key
    ]
    for refused in refusals:
        with pytest.raises(IdempotencyKeyReused) as error:
            await refused
        assert "same request by the same principal" in error.value.message
    assert await chat.history() == history and await chat.audit_trail() == trail
    assert ledger == ["deploy:web"]

    done = await chat.approve(pause.ref, principal="alice", idempotency_key="a1")
    assert done.finish_reason == AgentFinishReason.STOP and ledger == ["deploy:web", "5->savings"]
    with pytest.raises(IdempotencyKeyReused):  # and a message with an answer's key
        await chat.send("pay 5 to savings", idempotency_key="a1")
    # the paused message's retry is still that turn's response, as it ended then
    assert (await chat.send("pay 5 to savings", idempotency_key="m2")) == paused


async def test_a_key_a_session_cannot_keep_is_refused_before_anything_is_written(store):
    agent, _, ledger = build(store, treasury())
    chat = agent.chat()
    with pytest.raises(InvalidMessage) as refused:
        await chat.send("deploy web", idempotency_key="\ud800")
    assert refused.value.details["path"] == "$.idempotency_key"
    assert ledger == [] and await store.get_summary(chat.session_id) is None


async def test_a_keyed_send_is_replayed_by_another_process(tmp_path):
    path = tmp_path / "s.db"
    here, _, ledger = build(SqliteSessionStore(path), treasury())
    there, model, _ = build(SqliteSessionStore(path), treasury(), ledger=ledger)
    first = await here.chat(principal="dave").send("deploy web", idempotency_key="m1")
    again = await there.chat(first.session_id, principal="dave").send("deploy web", idempotency_key="m1")
    assert again == first and ledger == ["deploy:web"] and model.requests == []


async def test_a_keyed_send_cut_short_while_its_tool_runs_is_answered_by_its_retry(tmp_path):
    """The process lives on (Ctrl+C, a caller's timeout): the retry, here or elsewhere, gets the
    turn that ended when it was cut short — the tool recorded as of unknown outcome, never run
    again."""
    path, transfers = tmp_path / "s.db", Transfers()
    agent = bank(SqliteSessionStore(path), transfers, [[tool_call("transfer", {"amount": 5})]])
    chat = agent.chat()
    sending = asyncio.ensure_future(chat.send("move 5", idempotency_key="m1"))
    await transfers.started.wait()
    sending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sending
    retried = await chat.send("move 5", idempotency_key="m1")  # not ResumeInProgress, not a second turn
    assert retried.finish_reason == AgentFinishReason.ABORTED
    other = bank(SqliteSessionStore(path), transfers, ["unused"])
    assert await other.chat(chat.session_id).send("move 5", idempotency_key="m1") == retried
    assert transfers.ledger == ["start:5"]
    assert [m.role for m in await chat.history()] == ["user", "model", "tool"]


@pytest.mark.parametrize("failure", ["before", "after"])
async def test_a_keyed_send_whose_result_the_store_refused_goes_on_at_once_when_retried(tmp_path, failure):
    store, transfers = FailingStore(tmp_path / "s.db"), Transfers()
    agent = bank(store, transfers, [[tool_call("transfer", {"amount": 9})], "Moved 9.", "Asked again."])
    transfers.gate.set()
    # The send writes the call (the tool runs after it), then the tool's result with the model's
    # answer and the turn's end: that append fails, before its commit or after.
    store.fail(2, failure)
    chat = agent.chat()
    with pytest.raises(StoreError):
        await chat.send("move 9", idempotency_key="m1")
    retried = await chat.send("move 9", idempotency_key="m1")  # not ResumeInProgress for abandon_after
    # Committed, the turn is the retry's response; if not, the retry records the tool's real
    # result (this process kept it) and asks the model again.
    expected = "Moved 9." if failure == "after" else "Asked again."
    assert retried.finish_reason == AgentFinishReason.STOP and retried.text == expected
    assert (await chat.history())[-2].tool_responses[0].output == "moved 9"
    assert transfers.ledger == ["start:9", "done:9"]  # once


async def test_a_detached_message_or_answer_sent_again_with_its_key_names_the_first_turn(store):
    agent, _, ledger = build(store, treasury())
    chat = agent.chat(principal="dave")
    detached = await chat.detach("pay 5 to savings", idempotency_key="m1")
    paused = await detached.wait()
    again = await chat.detach("pay 5 to savings", idempotency_key="m1")
    assert again.turn_id == detached.turn_id and await again.wait() == paused
    assert await again.status() == "completed"

    [pause] = paused.interrupts
    answered = await chat.detach(restart=[agent.approval(pause)], idempotency_key="a1", principal="alice")
    done = await answered.wait()
    retried = await chat.detach(restart=[agent.approval(pause)], idempotency_key="a1", principal="alice")
    assert retried.turn_id == answered.turn_id and await retried.wait() == done
    assert ledger == ["5->savings"]

    await chat.send("deploy web", idempotency_key="m2")
    with pytest.raises(IdempotencyKeyReused, match="did not detach"):
        await chat.detach("deploy web", idempotency_key="m2")
    assert ledger == ["5->savings", "deploy:web"]


async def test_a_message_raced_with_its_key_from_two_processes_runs_one_turn(tmp_path):
    """SPEC 2.3 under a race: the same keyed message sent at once by two processes runs its turn
    once; the other gets that response, or is told to try again (and then gets it)."""
    from pausepoint.errors import ConcurrentUpdate, ResumeInProgress

    path = tmp_path / "s.db"
    here, _, ledger = build(SqliteSessionStore(path), treasury())
    there, _, _ = build(SqliteSessionStore(path), treasury(), ledger=ledger)
    session = "raced-1"
    sends = [agent.chat(session, principal="dave").send("deploy web", idempotency_key="m1") for agent in (here, there)]
    outcomes = await asyncio.gather(*sends, return_exceptions=True)
    responses = [o for o in outcomes if not isinstance(o, BaseException)]
    assert responses and all(r == responses[0] for r in responses)
    assert all(isinstance(o, ConcurrentUpdate | ResumeInProgress) for o in outcomes if isinstance(o, BaseException))
    assert await there.chat(session, principal="dave").send("deploy web", idempotency_key="m1") == responses[0]
    assert ledger == ["deploy:web"]


async def test_a_message_sent_without_a_key_is_recorded_as_before(store):
    """The key's fields are written only when there is a key: a log stays byte for byte what
    earlier versions wrote, and a turn's bytes grow by nothing for a feature it does not use."""
    agent, _, _ = build(store, treasury())
    chat = agent.chat(principal="dave")
    await chat.send("deploy web")
    await chat.send("deploy api", idempotency_key="m1")
    found = await store.read(chat.session_id)
    assert found is not None
    users = [json.loads(e.data) for e in found.entries if e.kind == "message" and b'"role":"user"' in e.data]
    assert [("idempotency_key" in u, "request_hash" in u) for u in users] == [(False, False), (True, True)]
    assert users[1]["idempotency_key"] == "m1"
