"""A store of one's own written before extensions could be merged — its ``extend_checkpoint``
takes no ``replaces`` — passes the public suite: the tests of replacing are skipped for it, and
the runtime gives it extensions one by one (``test_checkpoints``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from pausepoint.stores import SessionStore
from pausepoint.stores._base import merges_extensions
from pausepoint.testing.stores import *  # noqa: F403 - the contract's tests, run on that store here

from .backends import MemoryCheckpoints, StoreWithoutMerging


@pytest.fixture
def open_store() -> Callable[..., Awaitable[SessionStore]]:
    shared = StoreWithoutMerging()

    async def open_(**options: Any) -> SessionStore:
        return StoreWithoutMerging(**options) if options else shared

    return open_


def test_the_store_is_seen_not_to_merge() -> None:
    assert not merges_extensions(StoreWithoutMerging())
    assert merges_extensions(MemoryCheckpoints())
