"""Which log a state was folded from: the bytes of the last record this process wrote or read
for it, kept beside the state (not in the fold).

A session deleted and made again under its id — by another process, the store's ``delete`` and
a new first message — has a new log, at versions the old one had. Versions alone cannot tell the
two apart: a state cached from the old log would take the new log's records as its own, or
answer for the old session's pauses in the new one. So a cached state is brought up to date from
the record at its own version on (``runtime._sessions``): when that record is not the one it holds,
the log is another, and the session is read again from the store.
"""

from __future__ import annotations

import weakref

from ..stores import LogEntry
from ._state import SessionState

__all__ = ["continues", "last_record", "note_last"]

_LAST: weakref.WeakKeyDictionary[SessionState, bytes] = weakref.WeakKeyDictionary()


def note_last(state: SessionState, entry: LogEntry) -> None:
    """``entry`` is the last record of ``state``'s log (just written, or just folded in)."""
    _LAST[state] = entry.data


def last_record(state: SessionState) -> bytes | None:
    """The bytes of the last record of ``state``'s log, as this process saw it (None: unknown)."""
    return _LAST.get(state)


def continues(state: SessionState, entries: list[LogEntry]) -> bool:
    """Whether ``entries``, read from the record at ``state``'s version on, continue the log
    ``state`` was folded from: that record is the one it holds."""
    held = _LAST.get(state)
    first = entries[0] if entries else None
    return held is not None and first is not None and first.version == state.version and first.data == held
