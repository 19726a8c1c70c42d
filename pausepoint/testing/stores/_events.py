"""The event stream and the delivery outbox of the store contract (``pausepoint.stores
.SessionStore``: ``events`` written with the records, ``read_events``, ``claim_deliveries`` and
the rest): what webhooks and the server's feed rely on. A store whose ``append`` takes no
``events`` (neither names them nor takes ``**kwargs``) keeps none (webhooks and the feed are then
off) and skips these tests; one that takes them is held to all of it."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from ...errors import PayloadTooLarge, VersionConflict
from ...stores import Event, LogEntry, SessionStore, StoreSecret
from ...stores._base import takes_keyword
from ._fixtures import OpenStore, at, entries, summary

__all__ = [
    "event",
    "keeps_events",
    "test_a_refused_append_announces_nothing",
    "test_a_waiter_is_woken_by_another_writer",
    "test_an_append_without_events_adds_none",
    "test_claims_are_oldest_first_and_limited",
    "test_events_are_written_with_the_append_and_read_in_order",
    "test_list_deliveries_filters_newest_first",
    "test_one_delivery_per_target_claimed_with_a_lease",
    "test_prune_keeps_what_is_still_to_be_delivered",
    "test_racing_claimers_share_nothing",
    "test_retry_then_fail_then_requeue",
    "test_unicode_and_binary_data",
    "visible",
]

LEASE = timedelta(seconds=30)


def keeps_events(store: SessionStore) -> None:
    """Skip the test for a store that keeps no events (its ``append`` takes no ``events``: it
    neither names them nor takes ``**kwargs``, and so is given none)."""
    if not takes_keyword(store.append, "events"):
        pytest.skip("the store keeps no events (its append takes no events)")


def event(n: int, *targets: str, session: str = "s1", kind: str = "pause", when: float = 0) -> Event:
    """Event ``n`` of ``session``, for the webhooks ``targets``."""
    return Event(f"{session}.{n}", kind, session, "bankingAgent", at(when), b'{"n": %d}' % n, targets)


async def append(store: SessionStore, session: str, version: int, *events: Event, when: float = 0) -> int:
    return await store.append(
        session, version, entries(version, 1), summary(session, version + 1, updated=when), list(events)
    )


def stored(found: Event) -> tuple[str, str, str, str, bytes]:
    return (found.id, found.kind, found.session_id, found.agent, found.data)


async def visible(store: SessionStore, count: int, after: int = 0) -> list[Event]:
    """The first ``count`` events after ``after``, once readers may see them. (PostgreSQL holds
    events back while an older transaction anywhere on the server runs: other tests', say.)"""
    found: list[Event] = []
    for _ in range(600):
        found = await store.read_events(after, 1000)
        if len(found) >= count:
            return found
        await store.wait_for_events(found[-1].seq if found else after, 0.05)
    raise AssertionError(f"{len(found)} events became visible, not {count}")


# -- the stream ----------------------------------------------------------------------------------


async def test_events_are_written_with_the_append_and_read_in_order(store: SessionStore) -> None:
    keeps_events(store)
    assert await store.last_event() == 0
    assert await store.read_events() == []
    await append(store, "s1", 0, event(1), event(2, kind="turn_end"))
    await append(store, "s2", 0, event(1, session="s2"))
    await append(store, "s1", 1, event(3))
    found = await visible(store, 4)
    assert [stored(e) for e in found] == [
        ("s1.1", "pause", "s1", "bankingAgent", b'{"n": 1}'),
        ("s1.2", "turn_end", "s1", "bankingAgent", b'{"n": 2}'),
        ("s2.1", "pause", "s2", "bankingAgent", b'{"n": 1}'),
        ("s1.3", "pause", "s1", "bankingAgent", b'{"n": 3}'),
    ]
    assert found[0].at == at(0) and all(e.targets == () for e in found)
    positions = [e.seq for e in found]
    assert positions == sorted(set(positions)) and positions[0] > 0
    assert await store.last_event() == positions[-1]
    assert [e.id for e in await store.read_events(positions[1])] == ["s2.1", "s1.3"]
    assert [e.id for e in await store.read_events(positions[0], limit=2)] == ["s1.2", "s2.1"]
    assert await store.read_events(positions[-1]) == []


async def test_an_append_without_events_adds_none(store: SessionStore) -> None:
    keeps_events(store)
    await store.append("s1", 0, entries(0, 2), summary("s1", 2))
    assert await store.read_events() == []
    assert await store.last_event() == 0


async def test_a_refused_append_announces_nothing(store: SessionStore) -> None:
    keeps_events(store)
    await append(store, "s1", 0, event(1, "hook"))
    await visible(store, 1)
    head = await store.last_event()
    with pytest.raises(VersionConflict):
        await append(store, "s1", 0, event(2, "hook"))
    with pytest.raises(PayloadTooLarge):
        too_big = [LogEntry(2, "message", b"x" * (store.max_record_bytes + 1))]
        await store.append("s1", 1, too_big, summary("s1", 2), [event(3, "hook")])
    with pytest.raises(PayloadTooLarge):
        big_event = Event("s1.4", "pause", "s1", "bankingAgent", at(0), b"x" * (store.max_record_bytes + 1))
        await store.append("s1", 1, entries(1, 1), summary("s1", 2), [big_event])
    assert await store.last_event() == head
    assert [e.id for e in await store.read_events()] == ["s1.1"]
    assert [d.event.id for d in await store.list_deliveries()] == ["s1.1"]
    found = await store.read("s1")
    assert found is not None and found.version == 1


async def test_unicode_and_binary_data(store: SessionStore) -> None:
    keeps_events(store)
    data = '{"text": "Überweisung → 500 € an Zoë 👩\u200d💻"}'.encode() + b"\x00\xff\n"
    sid = "séance-日本語-🙂"
    made = Event("é.1", "answer", sid, "агент", at(1), data, ("hook-é",))
    await store.append(sid, 0, entries(0, 1), summary(sid, 1, agent="агент"), [made])
    (found,) = await visible(store, 1)
    assert stored(found) == ("é.1", "answer", sid, "агент", data)
    (delivery,) = await store.claim_deliveries(["hook-é"], at(1), LEASE)
    assert delivery.target == "hook-é" and delivery.event.data == data


async def test_a_waiter_is_woken_by_another_writer(open_store: OpenStore) -> None:
    reader, writer = await open_store(), await open_store()
    keeps_events(reader)
    try:
        await append(writer, "s1", 0, event(1))
        await visible(reader, 1)
        head = await reader.last_event()
        await reader.wait_for_events(0, 30)  # already past 0: returns at once
        waiting = asyncio.ensure_future(reader.wait_for_events(head, 30))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        await append(writer, "s1", 1, event(2))
        await asyncio.wait_for(waiting, 10)  # woken, long before its 30 s
        assert [e.id for e in await visible(reader, 1, head)] == ["s1.2"]
        await reader.wait_for_events(await reader.last_event(), 0.05)  # nothing new: the timeout ends it
    finally:
        await reader.close()
        if writer is not reader:
            await writer.close()


async def test_the_secret_is_made_once_and_shared(open_store: OpenStore) -> None:
    """A store that keeps a secret (``StoreSecret``) gives every store object on its data the
    same 32 bytes, made once however many ask at once (the feed seals its ids with it)."""
    first, second = await open_store(), await open_store()
    try:
        if not isinstance(first, StoreSecret):
            pytest.skip("this store keeps no secret: the feed's ids then read back in their process only")
        assert isinstance(second, StoreSecret)
        found = await asyncio.gather(first.secret(), second.secret(), first.secret())
        assert len(found[0]) == 32 and found[0] == found[1] == found[2]
        third = await open_store()
        try:
            assert isinstance(third, StoreSecret) and await third.secret() == found[0]
        finally:
            await third.close()
    finally:
        await first.close()
        if second is not first:
            await second.close()


async def test_prune_keeps_what_is_still_to_be_delivered(store: SessionStore) -> None:
    keeps_events(store)
    await append(store, "s1", 0, event(1, when=0), when=0)
    await append(store, "s1", 1, event(2, "hook", when=10), when=10)
    await append(store, "s1", 2, event(3, "done", when=20), when=20)
    await append(store, "s1", 3, event(4, when=100), when=100)
    await visible(store, 4)
    head = await store.last_event()
    [done] = await store.claim_deliveries(["done"], at(20), LEASE)
    assert await store.settle_delivery(done, at(21)) is True
    assert await store.prune_events(at(50)) == 2  # s1.1, and s1.3 whose only delivery is made
    assert [e.id for e in await store.read_events()] == ["s1.2", "s1.4"]
    assert [d.event.id for d in await store.list_deliveries()] == ["s1.2"]
    assert await store.last_event() == head
    await append(store, "s1", 4, event(5, when=200), when=200)
    assert (await visible(store, 1, head))[0].id == "s1.5"


# -- the outbox ----------------------------------------------------------------------------------


async def test_one_delivery_per_target_claimed_with_a_lease(store: SessionStore) -> None:
    keeps_events(store)
    await append(store, "s1", 0, event(1, "ops", "slack"), event(2, "ops"), when=5)
    await append(store, "s2", 0, event(1, "other", session="s2"), when=6)
    assert await store.claim_deliveries(["ops"], at(4), LEASE) == []  # not due before the append
    claimed = await store.claim_deliveries(["ops", "slack"], at(10), LEASE)
    assert sorted((d.target, d.event.id) for d in claimed) == [("ops", "s1.1"), ("ops", "s1.2"), ("slack", "s1.1")]
    assert all(d.state == "pending" and d.attempts == 0 and d.lease for d in claimed)
    assert all(d.due_at == at(10) + LEASE for d in claimed)
    assert claimed[0].event.data == b'{"n": 1}'
    assert await store.claim_deliveries(["ops", "slack"], at(11), LEASE) == []  # leased
    again = await store.claim_deliveries(["ops"], at(10) + LEASE, LEASE, limit=1)  # the lease ran out
    assert [d.event.id for d in again] == ["s1.1"] and again[0].lease != claimed[0].lease
    stale = next(d for d in claimed if d.id == again[0].id)
    assert await store.settle_delivery(stale, at(50)) is False  # its lease went to the later claim
    assert await store.settle_delivery(again[0], at(50)) is True
    assert await store.settle_delivery(again[0], at(51)) is False  # settled already
    [other] = await store.claim_deliveries(["other"], at(10), LEASE)
    assert other.event.session_id == "s2"


async def test_retry_then_fail_then_requeue(store: SessionStore) -> None:
    keeps_events(store)
    await append(store, "s1", 0, event(1, "hook"))
    [first] = await store.claim_deliveries(["hook"], at(1), LEASE)
    assert await store.settle_delivery(first, at(2), error="HTTP 500", retry_at=at(60)) is True
    assert await store.claim_deliveries(["hook"], at(59), LEASE) == []
    [second] = await store.claim_deliveries(["hook"], at(60), LEASE)
    assert (second.id, second.attempts, second.last_error) == (first.id, 1, "HTTP 500")
    assert await store.settle_delivery(second, at(61), error="HTTP 502") is True  # no retry: failed
    [failed] = await store.list_deliveries(state="failed")
    assert (failed.id, failed.attempts, failed.last_error, failed.updated_at) == (first.id, 2, "HTTP 502", at(61))
    assert await store.claim_deliveries(["hook"], at(1000), LEASE) == []
    assert await store.requeue_delivery(failed.id, at(70)) is True
    assert await store.requeue_delivery(failed.id, at(70)) is False  # pending now, not failed
    assert await store.requeue_delivery(12345, at(70)) is False
    [third] = await store.claim_deliveries(["hook"], at(70), LEASE)
    assert (third.id, third.attempts) == (first.id, 0)
    assert await store.settle_delivery(third, at(71)) is True
    [done] = await store.list_deliveries(state="delivered")
    assert (done.id, done.attempts, done.state) == (first.id, 1, "delivered")


async def test_list_deliveries_filters_newest_first(store: SessionStore) -> None:
    keeps_events(store)
    await append(store, "s1", 0, event(1, "a", "b"), event(2, "a"))
    assert [(d.target, d.event.id) for d in await store.list_deliveries()] == [
        ("a", "s1.2"),
        ("b", "s1.1"),
        ("a", "s1.1"),
    ]
    assert [d.event.id for d in await store.list_deliveries(target="a")] == ["s1.2", "s1.1"]
    assert [d.event.id for d in await store.list_deliveries(target="a", limit=1, offset=1)] == ["s1.1"]
    assert await store.list_deliveries(state="failed") == []
    assert len(await store.list_deliveries(state="pending")) == 3


async def test_claims_are_oldest_first_and_limited(store: SessionStore) -> None:
    keeps_events(store)
    for version in range(5):
        await append(store, "s1", version, event(version + 1, "hook"), when=version)
    claimed = await store.claim_deliveries(["hook"], at(10), LEASE, limit=2)
    assert [d.event.id for d in claimed] == ["s1.1", "s1.2"]
    assert await store.claim_deliveries([], at(10), LEASE) == []


async def test_racing_claimers_share_nothing(open_store: OpenStore) -> None:
    stores = [await open_store() for _ in range(4)]
    keeps_events(stores[0])
    try:
        for version in range(20):
            await append(stores[0], "s1", version, event(version + 1, "hook"))
        claims = await asyncio.gather(*(s.claim_deliveries(["hook"], at(1), LEASE, limit=8) for s in stores))
        ids = [d.id for claim in claims for d in claim]
        assert len(ids) == len(set(ids)) == 20
    finally:
        for made in {id(s): s for s in stores}.values():
            await made.close()
