"""Session stores: where paused sessions live. All backends pass one conformance suite."""

from ._base import LogEntry, LogSlice, SessionStore, SessionSummary
from .memory import InMemorySessionStore
from .sqlite import SqliteSessionStore

__all__ = [
    "InMemorySessionStore",
    "LogEntry",
    "LogSlice",
    "SessionStore",
    "SessionSummary",
    "SqliteSessionStore",
]
