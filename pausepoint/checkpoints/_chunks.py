"""Checksums of a checkpoint's items a chunk at a time, so a load checks only what it reads.

A checkpoint's items (``_format``) are cut into chunks of ``CHUNK_BYTES`` and each chunk's
XXH3-64 is kept in the part of the checkpoint a load always checks. Bytes a store gave whole are
checked whole at once (``ChunkCheck.all``): having read them, checking them costs little more. A
base the store gives as a view (``SqliteSessionStore``'s mapped file, ``InMemorySessionStore``'s
bytes) is checked a chunk at a time, the first time an item in it is read or copied
(``ChunkCheck.span``): a cold load of a long session then reads and checks the few chunks its
turn uses, not the history. A chunk that does not match
raises ``StoreError`` after ``on_damage`` has run (the loader's: forget this checkpoint, and the
state made from it).

A base a store gives in part (``Checkpoint.fetch``: PostgreSQL's and Redis's, beyond their first
bytes) is also fetched a chunk at a time, just before its first check: ``fill`` fetches the
chunks a span needs that are not there yet, in one call. A fetch that fails raises its
``StoreError`` after ``on_lost`` has run (the loader's: the state made from it can no longer read
its items).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable

import xxhash

from ..errors import StoreError

__all__ = ["CHUNK_BYTES", "ChunkCheck", "chunk_sums"]

CHUNK_BYTES = 64 * 1024


def chunk_sums(parts: Iterable[bytes | memoryview], chunk: int = CHUNK_BYTES) -> array[int]:
    """The XXH3-64 of each ``chunk`` bytes of ``parts`` laid end to end (the last one shorter)."""
    sums = array("Q")
    hasher = xxhash.xxh3_64()
    filled = 0
    for part in parts:
        view = memoryview(part)
        while view:
            take = min(chunk - filled, len(view))
            hasher.update(view[:take])
            filled += take
            view = view[take:]
            if filled == chunk:
                sums.append(hasher.intdigest())
                hasher.reset()
                filled = 0
    if filled:
        sums.append(hasher.intdigest())
    return sums


class ChunkCheck:
    """Checks ``items`` against ``sums``, each chunk once."""

    __slots__ = ("_checked", "_chunk", "_fill", "_filled", "_items", "_sums", "on_damage", "on_lost")

    def __init__(
        self, items: memoryview, sums: memoryview, chunk: int, fill: Callable[[int, int], None] | None = None
    ) -> None:
        if chunk <= 0 or len(sums) != -(-len(items) // chunk):
            raise ValueError("the chunk sums do not cover the items")
        self._items = items
        self._sums = sums
        self._chunk = chunk
        self._checked = bytearray(len(sums))
        # ``fill(start, stop)`` fetches bytes ``start`` to ``stop - 1`` of the items into them
        # (None: they are all there); ``_filled`` notes the chunks fetched.
        self._fill = fill
        self._filled = bytearray(len(sums) if fill is not None else 0)
        self.on_damage: Callable[[], None] | None = None
        self.on_lost: Callable[[], None] | None = None

    @property
    def whole(self) -> bool:
        """Whether every chunk of the items is there (always, unless the base came in part)."""
        return self._fill is None or all(self._filled)

    def fill_all(self) -> None:
        """Fetch every chunk not fetched yet, in runs (blocking: a worker thread may call it).
        Raises ``StoreError`` if a fetch fails."""
        filled, index, count = self._filled, 0, len(self._filled)
        while index < count:
            if filled[index]:
                index += 1
                continue
            stop = filled.find(1, index)
            stop = count if stop < 0 else stop
            self._fetch(index, stop - 1)
            index = stop

    def _fetch(self, first: int, last: int) -> None:
        """Fetch the chunks ``first`` to ``last`` not fetched yet (those between, too)."""
        filled, chunk, fill = self._filled, self._chunk, self._fill
        assert fill is not None
        while first <= last and filled[first]:
            first += 1
        while last >= first and filled[last]:
            last -= 1
        if first > last:
            return
        try:
            fill(first * chunk, min((last + 1) * chunk, len(self._items)))
        except StoreError:
            if self.on_lost is not None:
                self.on_lost()
            raise
        filled[first : last + 1] = b"\x01" * (last + 1 - first)

    def all(self) -> bool:
        """Check every chunk not checked yet; whether they all match (nothing is raised)."""
        for index, done in enumerate(self._checked):
            if not done:
                if not self._sound(index):
                    return False
                self._checked[index] = 1
        return True

    def span(self, start: int, stop: int) -> None:
        """Check the chunks bytes ``start`` to ``stop - 1`` of the items are in; raises
        ``StoreError`` if one does not match."""
        if start >= stop:
            return
        chunk, checked = self._chunk, self._checked
        first, last = start // chunk, (stop - 1) // chunk
        if self._fill is not None:
            self._fetch(first, last)
        for index in range(first, last + 1):
            if checked[index]:
                continue
            if not self._sound(index):
                if self.on_damage is not None:
                    self.on_damage()
                raise StoreError(
                    f"a session checkpoint's bytes {index * chunk} to {(index + 1) * chunk} are damaged "
                    "(changed after they were written); the session will be read from its log",
                    chunk=index,
                )
            checked[index] = 1

    def _sound(self, index: int) -> bool:
        """Whether chunk ``index`` matches its sum."""
        chunk = self._chunk
        return xxhash.xxh3_64_intdigest(self._items[index * chunk : (index + 1) * chunk]) == self._sums[index]
