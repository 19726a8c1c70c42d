"""The suite's tests of listings and deletion: filters, order, pages, and a session's place in
every list following its latest summary."""

from __future__ import annotations

from typing import Any

import pytest

from ...stores import LogEntry, LogSlice, SessionStore
from ._fixtures import at, entries, ids, put, summary

__all__ = [
    "listed",
    "test_delete",
    "test_list_by_tenant",
    "test_list_filters_and_order",
    "test_list_limit_and_offset",
    "test_list_returns_whole_summaries",
    "test_listing_follows_the_latest_summary",
    "test_tenant_listing_follows_the_latest_summary",
]


@pytest.fixture
async def listed(store: SessionStore) -> SessionStore:
    """Five sessions: s2 and s5 share an update time (ties go to the greater id)."""
    await put(store, summary("s1", 1, agent="a", owner="alice", updated=1))
    await put(store, summary("s2", 1, agent="a", owner="bob", updated=2, pending=2, expiry=100))
    await put(store, summary("s3", 1, agent="b", owner="alice", updated=3, pending=1, expiry=50))
    await put(store, summary("s4", 1, agent="a", owner=None, updated=4))
    await put(store, summary("s5", 1, agent="a", owner="alice", updated=2, pending=1, expiry=200))
    return store


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, ["s4", "s3", "s5", "s2", "s1"]),
        ({"owner": "alice"}, ["s3", "s5", "s1"]),
        ({"owner": "bob"}, ["s2"]),
        ({"owner": "nobody"}, []),
        ({"agent": "a"}, ["s4", "s5", "s2", "s1"]),
        ({"agent": "b"}, ["s3"]),
        ({"has_pending": True}, ["s3", "s5", "s2"]),
        ({"has_pending": False}, ["s4", "s1"]),
        ({"expiring_before": at(101)}, ["s3", "s2"]),
        ({"expiring_before": at(100)}, ["s3"]),  # strictly before
        ({"expiring_before": at(10)}, []),
        ({"agent": "a", "has_pending": True}, ["s5", "s2"]),
        ({"agent": "a", "has_pending": False}, ["s4", "s1"]),
        ({"owner": "alice", "agent": "a"}, ["s5", "s1"]),
        ({"owner": "alice", "has_pending": True}, ["s3", "s5"]),
        ({"owner": "alice", "agent": "a", "has_pending": True}, ["s5"]),
        ({"agent": "a", "expiring_before": at(300)}, ["s5", "s2"]),
        ({"owner": "alice", "expiring_before": at(300)}, ["s3", "s5"]),
        ({"has_pending": False, "expiring_before": at(300)}, []),
    ],
)
async def test_list_filters_and_order(listed: SessionStore, filters: dict[str, Any], expected: Any) -> None:
    assert ids(await listed.list_sessions(**filters)) == expected


@pytest.mark.parametrize(
    ("filters", "limit", "offset", "expected"),
    [
        ({}, 2, 0, ["s4", "s3"]),
        ({}, 2, 2, ["s5", "s2"]),
        ({}, 2, 4, ["s1"]),
        ({}, 2, 5, []),
        ({}, 100, 10, []),
        ({}, 0, 0, []),
        ({"has_pending": True}, 1, 1, ["s5"]),
        ({"owner": "alice"}, 2, 1, ["s5", "s1"]),
        ({"expiring_before": at(300)}, 2, 1, ["s5", "s2"]),
    ],
)
async def test_list_limit_and_offset(
    listed: SessionStore, filters: dict[str, Any], limit: int, offset: int, expected: Any
) -> None:
    assert ids(await listed.list_sessions(**filters, limit=limit, offset=offset)) == expected


async def test_list_returns_whole_summaries(listed: SessionStore) -> None:
    assert await listed.list_sessions(owner="bob") == [
        summary("s2", 1, agent="a", owner="bob", updated=2, pending=2, expiry=100)
    ]
    assert await listed.list_sessions(agent="a", has_pending=False) == [
        summary("s4", 1, agent="a", owner=None, updated=4),
        summary("s1", 1, agent="a", owner="alice", updated=1),
    ]


async def test_listing_follows_the_latest_summary(listed: SessionStore) -> None:
    store = listed
    # s1 pauses and moves to the front of every list it belongs to.
    await store.append("s1", 1, entries(1, 1), summary("s1", 2, agent="a", updated=10, pending=1, expiry=20))
    assert ids(await store.list_sessions()) == ["s1", "s4", "s3", "s5", "s2"]
    assert ids(await store.list_sessions(has_pending=True)) == ["s1", "s3", "s5", "s2"]
    assert ids(await store.list_sessions(expiring_before=at(60))) == ["s1", "s3"]
    # s2's pauses are answered: it leaves the inbox and the expiry list.
    await store.append("s2", 1, entries(1, 1), summary("s2", 2, agent="a", owner="bob", updated=11))
    assert ids(await store.list_sessions(has_pending=True)) == ["s1", "s3", "s5"]
    assert ids(await store.list_sessions(has_pending=False)) == ["s2", "s4"]
    assert ids(await store.list_sessions(expiring_before=at(1000))) == ["s1", "s3", "s5"]
    # A summary naming another owner and agent moves the session between their lists.
    await store.append("s3", 1, entries(1, 1), summary("s3", 2, agent="c", owner="carol", updated=12))
    assert ids(await store.list_sessions(owner="alice")) == ["s1", "s5"]
    assert ids(await store.list_sessions(owner="carol")) == ["s3"]
    assert ids(await store.list_sessions(agent="b")) == []
    assert ids(await store.list_sessions(agent="c")) == ["s3"]
    # ... or to no owner at all.
    await store.append("s5", 1, entries(1, 1), summary("s5", 2, agent="a", owner=None, updated=13, pending=1))
    assert ids(await store.list_sessions(owner="alice")) == ["s1"]
    assert (await store.get_summary("s5")) == summary("s5", 2, agent="a", owner=None, updated=13, pending=1)


# -- tenants -------------------------------------------------------------------------------------


@pytest.fixture
async def tenants(store: SessionStore) -> SessionStore:
    """Sessions of two tenants, each with an "alice", and two of no tenant."""
    await put(store, summary("t1", 1, agent="a", owner="alice", tenant="acme", updated=1, pending=1, expiry=50))
    await put(store, summary("t2", 1, agent="a", owner="alice", tenant="globex", updated=2, pending=1))
    await put(store, summary("t3", 1, agent="b", owner="bob", tenant="acme", updated=3))
    await put(store, summary("t4", 1, agent="a", owner="alice", updated=4, pending=1, expiry=60))
    await put(store, summary("t5", 1, agent="a", owner=None, updated=5))
    return store


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, ["t5", "t4", "t3", "t2", "t1"]),  # no filter: every tenant's, and those of none
        ({"tenant": None}, ["t5", "t4", "t3", "t2", "t1"]),
        ({"tenant": "acme"}, ["t3", "t1"]),
        ({"tenant": "globex"}, ["t2"]),
        ({"tenant": "nobody"}, []),
        ({"tenant": "acme", "owner": "alice"}, ["t1"]),  # one alice of two
        ({"tenant": "globex", "owner": "alice"}, ["t2"]),
        ({"tenant": "globex", "owner": "bob"}, []),
        ({"owner": "alice"}, ["t4", "t2", "t1"]),
        ({"tenant": "acme", "has_pending": True}, ["t1"]),
        ({"tenant": "acme", "has_pending": False}, ["t3"]),
        ({"tenant": "acme", "agent": "b"}, ["t3"]),
        ({"tenant": "globex", "agent": "b"}, []),
        ({"tenant": "acme", "expiring_before": at(100)}, ["t1"]),
        ({"tenant": "globex", "expiring_before": at(100)}, []),
    ],
)
async def test_list_by_tenant(tenants: SessionStore, filters: dict[str, Any], expected: Any) -> None:
    """``tenant`` narrows a listing to one tenant's sessions, with every other filter; a
    session's tenant comes back in its summary (None: it has none)."""
    assert ids(await tenants.list_sessions(**filters)) == expected
    assert ids(await tenants.list_sessions(**filters, limit=1, offset=1)) == expected[1:2]


async def test_tenant_listing_follows_the_latest_summary(tenants: SessionStore) -> None:
    store = tenants
    assert await store.get_summary("t1") == summary(
        "t1", 1, agent="a", owner="alice", tenant="acme", updated=1, pending=1, expiry=50
    )
    assert (await store.list_sessions(tenant="globex")) == [
        summary("t2", 1, agent="a", owner="alice", tenant="globex", updated=2, pending=1)
    ]
    assert (await store.get_summary("t4")) == summary(
        "t4", 1, agent="a", owner="alice", updated=4, pending=1, expiry=60
    )
    # t1 moves on: first to the front of its tenant's list, then to another tenant, then to none.
    await store.append("t1", 1, entries(1, 1), summary("t1", 2, agent="a", owner="alice", tenant="acme", updated=10))
    assert ids(await store.list_sessions(tenant="acme")) == ["t1", "t3"]
    await store.append("t1", 2, entries(2, 1), summary("t1", 3, agent="a", owner="alice", tenant="globex", updated=11))
    assert ids(await store.list_sessions(tenant="acme")) == ["t3"]
    assert ids(await store.list_sessions(tenant="globex")) == ["t1", "t2"]
    await store.append("t1", 3, entries(3, 1), summary("t1", 4, agent="a", owner="alice", updated=12))
    assert ids(await store.list_sessions(tenant="globex")) == ["t2"]
    assert (await store.get_summary("t1")) == summary("t1", 4, agent="a", owner="alice", updated=12)
    # A deleted session leaves its tenant's list.
    assert await store.delete("t2") is True
    assert ids(await store.list_sessions(tenant="globex")) == []
    assert ids(await store.list_sessions(tenant="acme")) == ["t3"]


# -- delete --------------------------------------------------------------------------------------


async def test_delete(listed: SessionStore) -> None:
    store = listed
    await store.append(
        "s2", 1, entries(1, 5), summary("s2", 6, agent="a", owner="bob", updated=2, pending=2, expiry=100)
    )
    assert await store.delete("s2") is True
    assert await store.read("s2") is None
    assert await store.get_summary("s2") is None
    assert "s2" not in ids(await store.list_sessions())
    assert ids(await store.list_sessions(owner="bob")) == []
    assert ids(await store.list_sessions(agent="a", has_pending=True)) == ["s5"]
    assert ids(await store.list_sessions(expiring_before=at(1000))) == ["s3", "s5"]
    assert await store.delete("s2") is False
    # Others are untouched, and the id can start again from version 0 with a fresh log.
    assert await store.read("s1") == LogSlice(1, entries(0, 1))
    fresh = [LogEntry(1, "session_started", b'{"again": true}')]
    assert await store.append("s2", 0, fresh, summary("s2", 1, owner="bob", updated=20)) == 1
    assert await store.read("s2") == LogSlice(1, fresh)
    assert ids(await store.list_sessions(owner="bob")) == ["s2"]
