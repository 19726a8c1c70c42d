"""Session stores: where paused sessions live. All backends pass one conformance suite
(``pausepoint.testing.stores``), which a store of your own can run too; ``SessionStore`` and
``CheckpointStore`` say what each method must do, ``check_entries`` and ``version_conflict``
check an append's arguments and make its conflict as the built-in stores do.

``PostgresSessionStore`` and ``RedisSessionStore`` are imported on first use, so this package
imports without their drivers; using one without its driver raises an ImportError naming the
extra to install (``pausepoint[postgres]``, ``pausepoint[redis]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._base import (
    PARTIAL_BASE_KEPT,
    REPLACED_BASES_KEPT,
    Checkpoint,
    CheckpointStore,
    Delivery,
    DeliveryState,
    Event,
    LogEntry,
    LogSlice,
    SessionStore,
    SessionSummary,
    StoreSecret,
    check_entries,
    version_conflict,
)
from .memory import InMemorySessionStore
from .sqlite import SqliteSessionStore

if TYPE_CHECKING:
    from .postgres import PostgresSessionStore
    from .redis import RedisSessionStore

__all__ = [
    "PARTIAL_BASE_KEPT",
    "REPLACED_BASES_KEPT",
    "Checkpoint",
    "CheckpointStore",
    "Delivery",
    "DeliveryState",
    "Event",
    "InMemorySessionStore",
    "LogEntry",
    "LogSlice",
    "PostgresSessionStore",
    "RedisSessionStore",
    "SessionStore",
    "SessionSummary",
    "SqliteSessionStore",
    "StoreSecret",
    "check_entries",
    "version_conflict",
]

_LAZY = {"PostgresSessionStore": "postgres", "RedisSessionStore": "redis"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value
