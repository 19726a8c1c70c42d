"""A place written before tenants (SQLite schema 6, PostgreSQL 5, Redis 5) is upgraded in place:
its sessions are of no tenant, keep their place in every listing, and go on; new sessions are
listed by tenant. (The listing contract itself is the public suite's: ``test_list_by_tenant``.)"""

from __future__ import annotations

from pausepoint.testing.stores import entries, ids, put, summary

from .backends import Backend


async def test_a_place_from_before_tenants_is_upgraded(durable_backend: Backend) -> None:
    first = await durable_backend.open()
    await put(first, summary("old", 1, owner="alice", pending=1, updated=1))
    await first.close()
    current = await durable_backend.schema_version()
    await durable_backend.make_version_before_tenants()
    later = await durable_backend.open()
    try:
        assert await later.get_summary("old") == summary("old", 1, owner="alice", pending=1, updated=1)
        assert ids(await later.list_sessions(has_pending=True)) == ["old"]
        assert ids(await later.list_sessions(tenant="acme")) == []
        await later.append("old", 1, entries(1, 1), summary("old", 2, owner="alice", pending=1, updated=5))
        await put(later, summary("new", 1, owner="alice", tenant="acme", pending=1, updated=10))
        assert ids(await later.list_sessions(has_pending=True)) == ["new", "old"]
        assert ids(await later.list_sessions(tenant="acme", has_pending=True)) == ["new"]
        assert ids(await later.list_sessions(owner="alice", tenant="acme")) == ["new"]
        assert (await later.get_summary("old")).tenant is None  # type: ignore[union-attr]
    finally:
        await later.close()
    assert await durable_backend.schema_version() == current
