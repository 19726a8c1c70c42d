"""Items laid end to end in a checkpoint's bytes, each found by its bounds (``Slices``).

Every collection a checkpoint holds is read through one: a lazy list's items
(``_lazy_list``), a lazy dict's values (``_lazy_dict``), the lines of a dict's key index
(``_key_index``). Cutting one item out costs the same whatever the count, and a writer copies a
run of them whole (``Slices.run``), bounds and bytes, without parsing any. When the checkpoint
is checked a chunk at a time (``_chunks``), each span is checked just before it is read.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Slices"]


class Slices:
    """Items laid end to end in ``data`` from ``base``: item ``i`` is
    ``data[base + bounds[i]:base + bounds[i + 1]]`` (``bounds[0]`` is 0). Cutting one out
    costs the same whatever the count. ``check(start, stop)``, if given, is called with each
    span of ``data`` about to be read (``_chunks.ChunkCheck.span``: it raises if that span is
    damaged): the item's, and first its two bounds', when ``bounds`` is itself a view of
    ``data`` from byte ``bounds_at`` (a checkpoint's, whose bounds its chunk sums check too)."""

    __slots__ = ("_base", "_bounds", "_bounds_at", "_check", "_data")

    def __init__(
        self,
        data: memoryview,
        base: int,
        bounds: memoryview,
        check: Callable[[int, int], None] | None = None,
        bounds_at: int | None = None,
    ) -> None:
        self._data = data
        self._base = base
        self._bounds = bounds
        self._check = check
        self._bounds_at = bounds_at

    def __len__(self) -> int:
        return len(self._bounds) - 1

    def __getitem__(self, index: int) -> bytes:
        if index < 0:
            index += len(self)
        check = self._check
        if check is not None and self._bounds_at is not None:
            at = self._bounds_at + 4 * index
            check(at, at + 8)
        start, stop = self._base + self._bounds[index], self._base + self._bounds[index + 1]
        if check is not None:
            check(start, stop)
        return self._data[start:stop].tobytes()

    def run(self, first: int, stop: int) -> tuple[memoryview, memoryview]:
        """Items ``first`` to ``stop - 1`` as written, to copy whole: their bytes, and their
        bounds (``stop - first + 1`` of them, from ``bounds[first]``)."""
        base, bounds, check = self._base, self._bounds, self._check
        if check is not None and self._bounds_at is not None:
            check(self._bounds_at + 4 * first, self._bounds_at + 4 * (stop + 1))
        start, end = base + bounds[first], base + bounds[stop]
        if check is not None:
            check(start, end)
        return self._data[start:end], bounds[first : stop + 1]
