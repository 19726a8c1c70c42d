"""The store contract (``pausepoint.stores.SessionStore``), checked on every backend alike.

The contract's tests live in ``pausepoint.testing.stores`` (public, so that other stores can
run them); here they run on each backend, beside what only durable backends promise.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from pausepoint.errors import SchemaVersionError, StoreError
from pausepoint.stores import LogSlice, SessionStore
from pausepoint.testing.stores import *  # noqa: F403 - the contract's tests, run on every backend here
from pausepoint.testing.stores import entries, ids, put, summary

from .backends import Backend


@pytest.fixture
def open_store(backend: Backend) -> Callable[..., Awaitable[SessionStore]]:
    """Stores on the test's backend place: what ``pausepoint.testing.stores`` runs on."""
    return backend.open


# -- durability and the schema version -----------------------------------------------------------


async def test_sessions_outlive_the_store_object(durable_backend):
    first = await durable_backend.open()
    s = summary("s1", 3, pending=1, expiry=30)
    await first.append("s1", 0, entries(0, 3), s)
    await first.close()
    second = await durable_backend.open()
    try:
        assert await second.read("s1") == LogSlice(3, entries(0, 3))
        assert await second.list_sessions(has_pending=True) == [s]
        assert await second.append("s1", 3, entries(3, 1), summary("s1", 4)) == 4
    finally:
        await second.close()


@pytest.mark.parametrize("found", ["99", "0", "not-a-version"])
async def test_unknown_schema_version_is_refused(durable_backend, found):
    first = await durable_backend.open()
    await put(first, summary("s1", 1))
    await first.close()
    current = await durable_backend.schema_version()
    await durable_backend.set_schema_version(found)
    later = await durable_backend.open()
    try:
        with pytest.raises(SchemaVersionError) as caught:
            await later.read("s1")
        assert caught.value.details["found"] == found
        assert isinstance(caught.value, StoreError)
        with pytest.raises(SchemaVersionError):
            await later.append("s2", 0, entries(0, 1), summary("s2", 1))
    finally:
        await later.close()
    await durable_backend.set_schema_version(current)
    again = await durable_backend.open()
    try:
        assert ids(await again.list_sessions()) == ["s1"]  # the refused append wrote nothing
    finally:
        await again.close()
