"""The event stream and the delivery outbox, beyond the contract's own tests (which are
``pausepoint.testing.stores``'s, run on every backend by ``test_conformance``): what only the
durable backends promise."""

from __future__ import annotations

from pausepoint.stores import InMemorySessionStore
from pausepoint.stores._base import event_stream
from pausepoint.testing.stores import at, entries, summary
from pausepoint.testing.stores._events import LEASE, append, event, stored, visible

from .backends import make_backend

# -- the stream ----------------------------------------------------------------------------------


async def test_store_objects_on_one_place_name_one_event_stream(durable_backend, tmp_path):
    """Two store objects on one place (a file, a DSN and schema, a server and prefix) read the
    same events, so they name one stream, which a reader of every agent's events (the feed)
    follows once; a store on another place names another."""
    first, second = await durable_backend.open(), await durable_backend.open()
    elsewhere = make_backend(durable_backend.name, tmp_path / "elsewhere")
    other = await elsewhere.open()
    try:
        await append(first, "s1", 0, event(1))
        assert [stored(e) for e in await visible(second, 1)] == [stored(e) for e in await visible(first, 1)]
        assert event_stream(first) == event_stream(second) != event_stream(other)
        assert event_stream(InMemorySessionStore()) != event_stream(InMemorySessionStore())
    finally:
        for made in (first, second, other):
            await made.close()
        await elsewhere.cleanup()


# -- the outbox ----------------------------------------------------------------------------------


async def test_the_outbox_outlives_the_store_object(durable_backend):
    first = await durable_backend.open()
    await append(first, "s1", 0, event(1, "hook"))
    await first.close()
    second = await durable_backend.open()
    try:
        [delivery] = await second.claim_deliveries(["hook"], at(1), LEASE)
        assert delivery.event.id == "s1.1"
        assert [e.id for e in await visible(second, 1)] == ["s1.1"]
    finally:
        await second.close()


async def test_a_version_1_place_is_upgraded(durable_backend):
    first = await durable_backend.open()
    await first.append("s1", 0, entries(0, 1), summary("s1", 1))
    await first.close()
    current = await durable_backend.schema_version()
    await durable_backend.make_version_1()
    later = await durable_backend.open()
    try:
        assert (await later.read("s1")).version == 1
        await append(later, "s1", 1, event(2, "hook"))
        assert [e.id for e in await visible(later, 1)] == ["s1.2"]
        assert [d.event.id for d in await later.claim_deliveries(["hook"], at(1), LEASE)] == ["s1.2"]
    finally:
        await later.close()
    assert await durable_backend.schema_version() == current
