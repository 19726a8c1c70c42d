"""What the checkpoint cache keeps beside a state it loaded or saved — never inside it.

The fold (``session._state.SessionState``) knows nothing of checkpoints. This process's
bookkeeping of a state's checkpoint — the version it is at (``checkpointed``), what writing the
next extension needs (``Chain``), and the base a state still reads items from when the store
gave it in part (``Partial``) — is kept here, by the state's identity, for as long as the state
lives.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from ..session._state import SessionState
from ._chunks import ChunkCheck

__all__ = ["Books", "Chain", "Link", "Partial", "books", "checkpointed", "partial_base"]


@dataclass(slots=True)
class Link:
    """One extension of a checkpoint, as far as merging it into a later one needs."""

    after: int  # the version it extends
    lengths: dict[str, int]  # each list field's length at that version
    version: int  # the version it takes the checkpoint to
    size: int  # its bytes
    keys: dict[str, list[Any]]  # each dict's entries it holds, by key
    removed: dict[str, list[Any]]  # and the keys it removes


@dataclass(slots=True)
class Chain:
    """The checkpoint a state was loaded from or last wrote, as far as writing the next
    extension of it needs (``_encode``): this process's bookkeeping."""

    version: int  # the version the checkpoint is at
    lengths: dict[str, int]  # each list field's length at that version (lists only grow)
    base_bytes: int  # the size of its base
    links: list[Link] = field(default_factory=list)  # its extensions, oldest first
    # Each dict's entries this process wrote in an extension of it: key -> a hash of their JSON
    # (an entry read since, still the same, need not be written again).
    sums: dict[str, dict[Any, int]] = field(default_factory=dict)

    def since(self, replaces: int) -> tuple[int, dict[str, int]]:
        """The version, and the list lengths, an extension replacing the last ``replaces``
        extends."""
        if replaces == 0:
            return self.version, self.lengths
        link = self.links[-replaces]
        return link.after, link.lengths

    def extended(self, link: Link, lengths: dict[str, int], replaces: int = 0) -> None:
        """``link`` took the checkpoint to its version, where the lists have ``lengths``, in
        place of the last ``replaces`` extensions."""
        if replaces:
            del self.links[-replaces:]
        self.links.append(link)
        self.version, self.lengths = link.version, lengths

    def wrote(self, sums: dict[str, dict[Any, int]], removed: dict[str, list[Any]]) -> None:
        """The extension just added held these entries (``sums``) and removed these keys."""
        for name, keys in removed.items():
            held = self.sums.get(name)
            if held:
                for key in keys:
                    held.pop(key, None)
        for name, written in sums.items():
            self.sums.setdefault(name, {}).update(written)


@dataclass(slots=True)
class Partial:
    """The base a state reads its unread items from, when the store gave it in part
    (``stores.Checkpoint.fetch``): this process's bookkeeping."""

    chunks: ChunkCheck  # fetches and checks the base's items a chunk at a time
    until: float  # the ``time.monotonic()`` after which the store may no longer hold the base


@dataclass(slots=True)
class Books:
    """A state's checkpoint, as this process knows it."""

    checkpointed: int = 0  # the version of the session's latest checkpoint this process knows of
    chain: Chain | None = None  # the checkpoint it was loaded from or last wrote
    partial: Partial | None = None  # the base it reads unread items from, when given in part


_BOOKS: weakref.WeakKeyDictionary[SessionState, Books] = weakref.WeakKeyDictionary()


def books(state: SessionState) -> Books:
    """``state``'s checkpoint bookkeeping (made empty the first time it is asked for)."""
    found = _BOOKS.get(state)
    if found is None:
        found = _BOOKS[state] = Books()
    return found


def partial_base(state: SessionState) -> Partial | None:
    """The base ``state`` reads unread items from, when its store gave it in part (None: none;
    nothing is made for a state that has no books)."""
    found = _BOOKS.get(state)
    return None if found is None else found.partial


def checkpointed(state: SessionState) -> int:
    """The version of ``state``'s session's latest checkpoint this process knows of (0: none)."""
    found = _BOOKS.get(state)
    return 0 if found is None else found.checkpointed
