"""A list whose items stay JSON until something reads them (``LazyList``).

A session state loaded from a checkpoint (``_decode``) keeps its history lists in these, and
only the items a turn reads (the latest messages, the calls and pauses it touches) are decoded.
Everything else behaves as the built-in list (a subclass, so the fold and its readers need no
change); an item, once decoded, replaces its JSON for good, so every reader sees the same
object. An item still in JSON is its ``bytes``, which is why an item type may not be ``bytes``
itself.

A list loaded from a checkpoint (``LazyList.unread``, and ``extend_unread`` for the items each
of its extensions appended) holds only the checkpoint's bytes and where each item starts
(``Slices``); an item is cut out of them when first read, and the base's items are not even in
the list's storage until then, so loading a history of any length makes no object, and fills
no slot, per item. Until its items move (an insert, a removal, a sort), such a list is
written to the next base by copying those bytes whole (``packed``): the items of a list are
values, never changed in place.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Iterator
from typing import Any, Generic, SupportsIndex, TypeVar, cast, overload

from pydantic import TypeAdapter

from ._slices import Slices

__all__ = ["LazyList"]

T = TypeVar("T")
_UNCUT: Any = object()  # an item of a ``LazyList.unread`` still in its source's bytes


class LazyList(list[T], Generic[T]):
    """A list whose ``bytes`` items are decoded with ``adapter`` when read.

    Loaded from a checkpoint's base (``unread``), the list's first ``len(source)`` positions are
    not in its own storage at all: an item there is cut out of the source and decoded when first
    read, and kept aside; the storage holds only the items after them. So a list of any length
    loads in constant time and gives the garbage collector nothing to traverse per item. The
    items an extension appended (``extend_unread``) are in the storage, as placeholders.
    """

    __slots__ = ("_adapter", "_later", "_prefix", "_read", "_source")

    def __init__(self, items: Iterable[Any], adapter: TypeAdapter[T]) -> None:
        super().__init__(items)
        self._adapter = adapter
        self._source: Slices | None = None  # the base's items: the first ``_prefix`` positions
        self._prefix = 0  # positions before the storage's first item (``len(_source)``, or 0)
        self._read: dict[int, Any] = {}  # those of them read so far, decoded
        self._later: list[tuple[int, Slices]] = []  # items appended unread: (position, source)

    @classmethod
    def unread(cls, source: Slices, adapter: TypeAdapter[T]) -> LazyList[T]:
        """The list of ``source``'s items, none of them cut out or decoded yet."""
        items = cls((), adapter)
        items._source = source
        items._prefix = len(source)
        return items

    def __len__(self) -> int:
        return self._prefix + list.__len__(self)

    def extend_unread(self, source: Slices) -> None:
        """Append ``source``'s items, none of them cut out or decoded yet."""
        self._later.append((len(self), source))
        list.extend(self, itertools.repeat(_UNCUT, len(source)))

    def unread_from(self, start: int, source: Slices) -> None:
        """Put the items from ``start`` on back to JSON: ``source`` holds them, as written
        (the items of a list are values, so a later read decodes an equal one)."""
        if len(self) - start != len(source):
            raise ValueError(f"{len(source)} items written, {len(self) - start} in the list")
        if start < self._prefix:
            self.cut_all()
        list.__setitem__(self, slice(start - self._prefix, None), [_UNCUT] * len(source))
        self._later = [later for later in self._later if later[0] < start]  # those it covers are not read again
        self._later.append((start, source))

    def hold(self, index: SupportsIndex, item: T) -> None:
        """Put ``item`` at ``index`` in place of what the source holds there, moving nothing (a
        checkpoint's reference to an object another field holds: one among the base's items
        makes the list written item by item from then on)."""
        position = self._position(index)
        if not 0 <= position < len(self):
            raise IndexError("list assignment index out of range")
        if position < self._prefix:
            self.cut_all()
        list.__setitem__(self, position - self._prefix, item)

    def _at(self, index: SupportsIndex) -> T:
        position = self._position(index)
        prefix = self._prefix
        if 0 <= position < prefix:
            value = self._read.get(position, _UNCUT)
            if value is _UNCUT:
                value = self._read[position] = self._adapter.validate_json(cast(Slices, self._source)[position])
            return cast(T, value)
        if position < 0:
            raise IndexError("list index out of range")
        value = list.__getitem__(self, position - prefix)
        if value is _UNCUT:
            value = self._uncut(position)
        if type(value) is bytes:
            value = self._adapter.validate_json(value)
            list.__setitem__(self, position - prefix, value)
        return cast(T, value)

    def _position(self, index: SupportsIndex) -> int:
        position = operator.index(index)
        return position + len(self) if position < 0 else position

    def _uncut(self, position: int) -> bytes:
        """The JSON of an item an extension appended, still a placeholder in the storage."""
        for start, source in reversed(self._later):
            if position >= start:
                return source[position - start]
        raise LookupError(f"no source holds item {position}")

    def _cut(self, start: int) -> list[Any]:
        """The items from ``start`` on as stored, those not cut out yet cut out."""
        prefix = self._prefix
        items: list[Any] = []
        if start < prefix:
            source, read = cast(Slices, self._source), self._read
            items = [read[position] if position in read else source[position] for position in range(start, prefix)]
            start = prefix
        stored: list[Any] = list.__getitem__(self, slice(start - prefix, None))
        for offset, item in enumerate(stored):
            if item is _UNCUT:
                stored[offset] = self._uncut(start + offset)
        return items + stored if items else stored

    def cut_all(self) -> None:
        """Cut every item out of the sources (before a change that moves items: an item not
        cut out is known by its position). The list is then written item by item."""
        if self._source is not None or self._later:
            items = self._cut(0)
            self._forget_sources()
            list.__setitem__(self, slice(None), items)

    def _forget_sources(self) -> None:
        self._source, self._prefix, self._read, self._later = None, 0, {}, []

    @overload
    def __getitem__(self, index: SupportsIndex) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self._at(i) for i in range(*index.indices(len(self)))]
        return self._at(index)

    def __iter__(self) -> Iterator[T]:
        for i in range(len(self)):
            yield self._at(i)

    def __reversed__(self) -> Iterator[T]:
        for i in range(len(self) - 1, -1, -1):
            yield self._at(i)

    def __contains__(self, value: object) -> bool:
        return any(item == value for item in self)

    def __eq__(self, other: object) -> bool:
        return list(self) == other

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None

    def __repr__(self) -> str:
        return repr(list(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return list, (list(self),)  # a copy or a pickle is a plain list of the decoded items

    def pop(self, index: SupportsIndex = -1) -> T:
        value = self._at(index)
        position = self._position(index)
        self.cut_all()
        list.pop(self, position)
        return value

    def copy(self) -> list[T]:
        return list(self)

    def __add__(self, other: list[T]) -> list[T]:  # type: ignore[override]
        return list(self) + other

    def __mul__(self, count: SupportsIndex) -> list[T]:
        return list(self) * count

    __rmul__ = __mul__

    def index(self, value: Any, start: SupportsIndex = 0, stop: SupportsIndex = 2**63 - 1) -> int:
        return list(self).index(value, start, stop)

    def count(self, value: Any) -> int:
        return list(self).count(value)

    def remove(self, value: Any) -> None:
        position = self.index(value)
        self.cut_all()
        list.__delitem__(self, position)

    # The changes that move items cut them all out of the source first.

    def insert(self, index: SupportsIndex, value: T) -> None:
        self.cut_all()
        list.insert(self, index, value)

    def __delitem__(self, index: SupportsIndex | slice) -> None:
        self.cut_all()
        list.__delitem__(self, index)

    def __setitem__(self, index: Any, value: Any) -> None:
        self.cut_all()
        list.__setitem__(self, index, value)

    def __imul__(self, count: SupportsIndex) -> LazyList[T]:
        self.cut_all()
        list.__imul__(self, count)
        return self

    def reverse(self) -> None:
        self.cut_all()
        list.reverse(self)

    def sort(self, *, key: Any = None, reverse: bool = False) -> None:
        items = list(self)
        items.sort(key=key, reverse=reverse)
        self._forget_sources()
        list.__setitem__(self, slice(None), items)

    def clear(self) -> None:
        self._forget_sources()
        list.clear(self)

    def packed(self) -> tuple[Slices, list[Any]] | None:
        """For a checkpoint writer: the items still at the places their checkpoint gave them
        (written as they were read: the items of a list are values, never changed in place),
        and the items appended since (decoded objects, or JSON); None once the list has been
        changed otherwise (then ``raw_items``)."""
        if self._source is None:
            return None
        return self._source, self._cut(len(self._source))

    def raw_items(self) -> Iterator[Any]:
        """The items as stored: decoded objects, or the JSON of those never decoded."""
        self.cut_all()
        return list.__iter__(self)

    def raw_since(self, start: int) -> list[Any]:
        """The items from ``start`` on as stored: decoded objects, or JSON."""
        return self._cut(start)
