"""What only the in-memory store promises: what it holds costs Python's garbage collector nothing
to walk, however many records and events it keeps (a full collection pauses every request a
server has in flight, for each object it walks)."""

from __future__ import annotations

import gc

from pausepoint.stores import Event, InMemorySessionStore
from pausepoint.testing.stores._fixtures import at, entries, summary

SESSIONS = 200
RECORDS = 12  # a banking approval cycle's


def _tracked() -> int:
    gc.collect()  # a tuple of numbers, strings, bytes and times is untracked by a collection
    return len(gc.get_objects())


async def test_records_and_events_add_nothing_for_a_full_collection_to_walk():
    store = InMemorySessionStore()
    before = _tracked()
    for n in range(SESSIONS):
        session_id = f"s{n}"
        events = [Event(f"e{n}.{i}", "pause", session_id, "bankingAgent", at(n), b'{"n": %d}' % i) for i in range(6)]
        await store.append(session_id, 0, entries(0, RECORDS), summary(session_id, RECORDS), events)
    grown = _tracked() - before
    # per session, the list of its records; nothing per summary, record or event (2,400 records
    # and 1,200 events here)
    assert grown <= SESSIONS + 50, grown

    # and everything reads back as written
    found = await store.read("s7", after_version=10)
    assert found is not None and found.version == RECORDS
    assert [(e.version, e.kind, e.data) for e in found.entries] == [(e.version, e.kind, e.data) for e in entries(10, 2)]
    events = await store.read_events(after=6 * 7, limit=2)
    assert [(e.id, e.seq, e.session_id, e.at, e.data) for e in events] == [
        ("e7.0", 43, "s7", at(7), b'{"n": 0}'),
        ("e7.1", 44, "s7", at(7), b'{"n": 1}'),
    ]
