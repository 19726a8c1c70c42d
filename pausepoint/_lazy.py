"""A list and a dict whose items stay JSON until something reads them.

A session state loaded from a checkpoint (``_checkpoint``) keeps its history in these: loading
costs a split of the checkpoint's bytes, and only the items a turn reads (the latest messages,
the calls and pauses it touches) are decoded. Everything else behaves as the built-in list and
dict (they are subclasses, so the fold and its readers need no change); an item, once decoded,
replaces its JSON for good, so every reader sees the same object.

An item still in JSON is its ``bytes`` (so the items never read cost nothing to load: the list
or dict holds the checkpoint's own slices), which is why an item type may not be ``bytes``
itself. A checkpoint writer copies those bytes as they are (``raw_items``), so writing the
checkpoint of a state loaded from one costs what changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Generic, SupportsIndex, TypeVar, cast, overload

from pydantic import TypeAdapter

if TYPE_CHECKING:
    from _collections_abc import dict_items, dict_values

__all__ = ["LazyDict", "LazyList"]

K = TypeVar("K")
T = TypeVar("T")
_MISSING: Any = object()


class LazyList(list[T], Generic[T]):
    """A list whose ``bytes`` items are decoded with ``adapter`` when read."""

    __slots__ = ("_adapter",)

    def __init__(self, items: Iterable[Any], adapter: TypeAdapter[T]) -> None:
        super().__init__(items)
        self._adapter = adapter

    def _at(self, index: SupportsIndex) -> T:
        value: Any = list.__getitem__(self, index)
        if type(value) is bytes:
            value = self._adapter.validate_json(value)
            list.__setitem__(self, index, value)
        return cast(T, value)

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

    __hash__ = None

    def __repr__(self) -> str:
        return repr(list(self))

    def pop(self, index: SupportsIndex = -1) -> T:
        value = self._at(index)
        list.pop(self, index)
        return value

    def copy(self) -> list[T]:
        return list(self)

    def index(self, value: Any, start: SupportsIndex = 0, stop: SupportsIndex = 2**63 - 1) -> int:
        return list(self).index(value, start, stop)

    def count(self, value: Any) -> int:
        return list(self).count(value)

    def remove(self, value: Any) -> None:
        list.__delitem__(self, self.index(value))

    def raw_items(self) -> Iterator[Any]:
        """The items as stored: decoded objects, or the JSON of those never read."""
        return list.__iter__(self)


class LazyDict(dict[K, T], Generic[K, T]):
    """A dict whose ``bytes`` values are decoded with ``adapter`` when read.

    Reading one value decodes only it; ``values()``, ``items()`` and the like decode them all.
    """

    __slots__ = ("_adapter",)

    def __init__(self, items: Iterable[tuple[K, Any]], adapter: TypeAdapter[T]) -> None:
        super().__init__(items)
        self._adapter = adapter

    def __getitem__(self, key: K) -> T:
        value: Any = dict.__getitem__(self, key)
        if type(value) is bytes:
            value = self._adapter.validate_json(value)
            dict.__setitem__(self, key, value)
        return cast(T, value)

    def __iter__(self) -> Iterator[K]:
        # Defined (as dict's) so that dict(d) and {**d} read the values through __getitem__
        # instead of copying the undecoded JSON.
        return dict.__iter__(self)

    def _decode_all(self) -> None:
        for key in list(dict.keys(self)):
            self[key]

    def get(self, key: K, default: Any = None) -> Any:
        if dict.__contains__(self, key):
            return self[key]
        return default

    def values(self) -> dict_values[K, T]:
        self._decode_all()
        return dict.values(self)

    def items(self) -> dict_items[K, T]:
        self._decode_all()
        return dict.items(self)

    def pop(self, key: K, default: Any = _MISSING) -> Any:
        if key in self:
            value = self[key]
            dict.pop(self, key)
            return value
        if default is _MISSING:
            raise KeyError(key)
        return default

    def popitem(self) -> tuple[K, T]:
        self._decode_all()
        return dict.popitem(self)

    def setdefault(self, key: K, default: Any = None) -> Any:
        if key in self:
            return self[key]
        dict.__setitem__(self, key, default)
        return default

    def copy(self) -> dict[K, T]:
        self._decode_all()
        return dict(dict.items(self))

    def __eq__(self, other: object) -> bool:
        self._decode_all()
        return dict.__eq__(self, other)

    __hash__ = None

    def __repr__(self) -> str:
        self._decode_all()
        return dict.__repr__(self)

    def raw_items(self) -> Iterator[tuple[K, Any]]:
        """The entries as stored: decoded values, or the JSON of those never read."""
        return iter(dict.items(self))
