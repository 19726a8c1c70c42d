"""An idempotency key replays only the same request by the same principal: reused by another
principal — another approver, the requester, someone with no role — it is refused with
``IdempotencyKeyReused`` and records nothing, so a console that derives keys from the ref still
completes a quorum, and nobody gets someone else's success in place of their own refusal."""

from __future__ import annotations

import pytest

from pausepoint import AgentFinishReason
from pausepoint.errors import IdempotencyKeyReused
from pausepoint.testing import tool_call
from tests.approval_apps import build, treasury


async def test_a_key_replays_only_its_principals_request(store):
    agent, _, ledger = build(store, treasury(quorum={"transfer_money": 2}, separation_of_duties=True))
    asking = agent.chat(principal="dave")
    [pause] = (await asking.send("pay 500 to savings")).interrupts
    chat = agent.chat(session_id=asking.session_id)
    key = f"approve:{pause.ref}"

    first = await chat.approve(pause.ref, principal="alice", idempotency_key=key)
    assert first.finish_reason == AgentFinishReason.INTERRUPTED
    trail = await chat.audit_trail()
    for other in ("bob", "dave", "nobody"):  # another approver, the requester, a principal with no role
        with pytest.raises(IdempotencyKeyReused) as refused:
            await chat.approve(pause.ref, principal=other, idempotency_key=key)
        assert refused.value.details == {"key": key} and "same principal" in refused.value.message
        with pytest.raises(IdempotencyKeyReused):
            chat.sync.approve(pause.ref, principal=other, idempotency_key=key)
    assert await chat.audit_trail() == trail and ledger == []

    # alice's retry is hers: the first outcome again
    assert await chat.approve(pause.ref, principal="alice", idempotency_key=key) == first
    [still] = await chat.interrupts()
    assert still.approval is not None and still.approval.approved_by == ["alice"]

    # bob's own key counts his approval: the quorum completes, the call runs once
    done = await chat.approve(pause.ref, principal="bob", idempotency_key=f"{key}:bob")
    assert done.finish_reason == AgentFinishReason.STOP and ledger == ["500->savings"]


async def test_a_keyed_retry_of_a_turn_that_failed_after_its_call_ran_gets_that_turn_back(store):
    """SPEC 2.3, exactly once: the answer was taken, the tool ran, then the model failed — the
    turn ended ``failed``; a retry with the same key gets that response, and runs nothing again."""
    from pausepoint.errors import ModelError

    steps = [[tool_call("transfer_money", {"amount": "5", "to_account": "savings"})], ModelError("down"), "never"]
    agent, model, ledger = build(store, treasury(), steps=steps)
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 5 to savings")).interrupts
    first = await chat.approve(pause.ref, idempotency_key="k1", principal="alice")
    assert (first.finish_reason, first.error) == (AgentFinishReason.FAILED, "ModelError: down")
    again = await chat.approve(pause.ref, idempotency_key="k1", principal="alice")
    assert (again.finish_reason, again.error, again.version) == (first.finish_reason, first.error, first.version)
    assert ledger == ["5->savings"] and model.remaining == 1  # the tool ran once; the model was not asked again


#: keys no surface takes, and the rule each breaks: an HTTP header carries visible ASCII and
#: spaces between them as they are (found by a probe: "é" failed in the client with httpx's
#: UnicodeEncodeError, REST recorded a UTF-8 "é" as "Ã©", and HTTP dropped the space of " ab")
REFUSED_KEYS = [
    ("", "key_length"),
    ("k" * 201, "key_length"),
    ("a\nb", "control_in_name"),
    ("a\tb", "control_in_name"),
    ("é", "key_chars"),
    ("…", "key_chars"),
    ("a\u202eb", "key_chars"),
    ("a\xa0b", "key_chars"),
    ("\U0001f600" * 200, "key_chars"),
    (" ab", "key_chars"),
    ("ab ", "key_chars"),
    (" ", "key_chars"),
]
#: the widest key every surface takes: each visible ASCII character, and spaces between them
WIDEST_KEY = "".join(map(chr, range(0x21, 0x7F))) + " a  b"


async def test_a_key_every_surface_takes_is_the_only_key_python_takes(store):
    """1 to 200 characters, each visible ASCII or a space between them: what REST's header and
    MCP's argument take (found by probes: Python kept "", 100,000 characters and "a\\nb", then
    "é" and " ab", keys no HTTP client could send again to replay). Refused before anything is
    written, with the same path on a send and an answer's call."""
    from pausepoint.errors import InvalidAnswer, InvalidMessage

    agent, _, ledger = build(store, treasury())
    chat = agent.chat(principal="dave")
    [pause] = (await chat.send("pay 5 to savings", idempotency_key="k" * 200)).interrupts  # the longest
    before = await chat.audit_trail()
    for key, rule in REFUSED_KEYS:
        with pytest.raises(InvalidMessage) as sent:
            await chat.send("hello", idempotency_key=key)
        assert (sent.value.details["rule"], sent.value.details["path"]) == (rule, "$.idempotency_key"), key
        with pytest.raises(InvalidAnswer) as answered:
            await chat.approve(pause.ref, principal="alice", idempotency_key=key)
        assert answered.value.details["rule"] == rule, key
    assert await chat.audit_trail() == before and ledger == []

    done = await chat.approve(pause.ref, principal="alice", idempotency_key=WIDEST_KEY)
    assert await chat.approve(pause.ref, principal="alice", idempotency_key=WIDEST_KEY) == done
    assert (await chat.audit_trail())[-1].idempotency_key == WIDEST_KEY and ledger == ["5->savings"]


async def test_a_keyed_stream_sent_again_marks_the_pauses_its_turn_left_open_before_its_end(store):
    """A stream whose first reply was lost before any chunk is sent again with its key: the
    replay's chunks mark each pause the turn left open, then end it, as the first stream did (it
    ended with ``turn_end`` alone, so a client reading pauses from the stream saw none: found by
    a probe of retries over a connection cut before the reply)."""
    agent, _, ledger = build(store, treasury())
    chat = agent.chat(principal="dave")
    first = [chunk async for chunk in chat.send_stream("pay 500 to savings", idempotency_key="k1")]
    again = [chunk async for chunk in chat.send_stream("pay 500 to savings", idempotency_key="k1")]
    [pause] = await chat.interrupts()
    marks = [c.interrupt.ref for c in first if c.kind == "interrupt"]
    assert marks == [pause.ref] and [c.kind for c in first][-2:] == ["interrupt", "turn_end"]
    assert [c.kind for c in again] == ["interrupt", "turn_end"] and again[0].interrupt == pause
    assert again[-1].response == first[-1].response and ledger == []
