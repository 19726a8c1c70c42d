"""A dict whose values stay JSON until something reads them (``LazyDict``).

A session state loaded from a checkpoint (``_decode``) keeps its calls, pauses and grants in
these, and only the values a turn reads are decoded. Everything else behaves as the built-in
dict (a subclass, so the fold and its readers need no change); a value, once decoded, replaces
its JSON for good, so every reader sees the same object. A value still in JSON is its
``bytes``, which is why a value type may not be ``bytes`` itself.

A dict loaded from a checkpoint holds, for each value not read yet, its place in the
checkpoint's bytes: in its base, or past the base's places in one of its extensions
(``LazyDict.extend_unread``), so folding an extension makes no object per entry (and a dict's
values may not be ``int``s). Its keys are not even parsed when it is loaded
(``LazyDict.indexed``): the checkpoint lays them out in buckets by a hash of the key
(``_key_index.KeyIndex``), and a lookup parses only the bucket its key would be in; only what
needs every key (iteration, ``len``) parses them all, and puts them back in their order. A dict
also notes the keys whose value was read or set, and those removed, since it was loaded
(``touched``, ``removed``): a value never read is as the checkpoint has it, so an extension of
the checkpoint (``_encode``) writes only those.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from pydantic import TypeAdapter

from ._key_index import KeyIndex, bucket_count, bucket_line, buckets_of
from ._slices import Slices

if TYPE_CHECKING:
    from _collections_abc import dict_items, dict_keys, dict_values

__all__ = ["LazyDict"]

K = TypeVar("K")
T = TypeVar("T")
_MISSING: Any = object()


class LazyDict(dict[K, T], Generic[K, T]):
    """A dict whose ``bytes`` values are decoded with ``adapter`` when read.

    Reading one value decodes only it; ``values()``, ``items()`` and the like decode them all.
    Loaded with a ``KeyIndex`` (``indexed``), the dict holds only the keys parsed so far: a
    lookup, a removal or a membership test parses the bucket of its key first; what needs every
    key parses them all (``materialize``).
    """

    __slots__ = ("_adapter", "_end", "_index", "_later", "_removed", "_source", "_touched")

    def __init__(self, items: Iterable[tuple[K, Any]], adapter: TypeAdapter[T]) -> None:
        super().__init__(items)
        self._adapter = adapter
        self._source: Slices | None = None  # the base's values: places 0 to len - 1
        self._later: list[tuple[int, Slices]] = []  # the extensions' values: (their first place, source)
        self._end = 0  # the place after the last one given
        self._index: KeyIndex[K] | None = None
        self._touched: dict[K, None] = dict.fromkeys(dict.keys(self))  # an ordered set
        self._removed: set[K] = set()

    @classmethod
    def indexed(cls, index: KeyIndex[K], source: Slices, adapter: TypeAdapter[T]) -> LazyDict[K, T]:
        """The dict of the keys ``index`` holds to ``source``'s items, none parsed, cut out or
        decoded yet."""
        if index.size != len(source):
            raise ValueError(f"a key index of {index.size} keys for {len(source)} values")
        entries = cls((), adapter)
        entries._source = source
        entries._end = len(source)
        if index.size:
            entries._index = index
        return entries

    def extend_unread(self, keys: list[K], source: Slices) -> None:
        """Set ``keys`` to ``source``'s items, in order, none cut out or decoded yet (an
        extension's entries: as the checkpoint holds them, so not noted as read or set; a key
        the dict has keeps its place in its order)."""
        if len(keys) != len(source):
            raise ValueError(f"{len(keys)} keys for {len(source)} values")
        start = self._end
        self._later.append((start, source))
        self._end = start + len(source)
        dict.update(cast(Any, self), zip(keys, range(start, self._end), strict=True))

    def _cut(self, place: int) -> bytes:
        """The JSON of the value at ``place``: in an extension's source, or in the base's."""
        for start, source in reversed(self._later):
            if place >= start:
                return source[place - start]
        return cast(Slices, self._source)[place]

    def _in_base(self, value: Any) -> bool:
        """Whether a stored value is a place in the base's source (one a new base copies)."""
        return type(value) is int and (not self._later or value < self._later[0][0])

    def _laid(self, value: Any) -> Any:
        """A stored value as a new base takes it: a place in the base's source stays one, a
        place in an extension's is cut out (JSON)."""
        return self._cut(value) if type(value) is int and not self._in_base(value) else value

    def stored(self, key: K) -> Any:
        """For a checkpoint writer: ``key``'s value as stored, a decoded object or JSON (the
        JSON of one never read is cut out of its source)."""
        value: Any = dict.__getitem__(self, key)
        return self._cut(value) if type(value) is int else value

    # -- keys not parsed yet ------------------------------------------------------------------

    def _find(self, key: K) -> None:
        """Parse the bucket ``key`` would be in, unless ``key`` is here already."""
        index = self._index
        if index is not None and not dict.__contains__(self, key):
            self._add(index.take(key))

    def _settle(self, key: K) -> None:
        """Parse the bucket ``key`` would be in (before removing it: were the bucket parsed
        later, the key would come back)."""
        if self._index is not None:
            self._add(self._index.take(key))

    def _add(self, entries: list[tuple[K, int]]) -> None:
        for key, place in entries:
            if not dict.__contains__(self, key):  # else set since loading: its value is the newer
                dict.__setitem__(cast(Any, self), key, place)

    def materialize(self) -> None:
        """Parse every key not parsed yet, and put the keys in the order a dict would have them:
        those the index holds in their places' order, then those added since loading."""
        index = self._index
        if index is None:
            return
        index.take_all()
        places = index.places  # every key loaded and not removed since, and its place
        here: dict[K, Any] = dict(dict.items(self))  # the keys looked up, set or added since loading
        entries = [(key, here.pop(key, places[key])) for key in sorted(places, key=places.__getitem__)]
        dict.clear(self)
        dict.update(cast(Any, self), entries)
        dict.update(cast(Any, self), here)  # the keys added since loading, in their order
        self._index = None

    def base_layout(self) -> tuple[list[Any], list[Any], list[bytes] | None]:
        """What a new base holds of this dict: its keys and values in order (a value never read
        is its place in ``source``, or its JSON when an extension holds it), and its key index
        when it can be copied from this one: the
        keys still indexed and only added to since loading, in as many buckets (the lines of the
        buckets no key was added to are copied, and the keys of values never read are None: not
        needed). Otherwise the index is None (``key_index`` makes it from the keys)."""
        copied = self._copied_layout()
        if copied is not None:
            return copied
        self.materialize()
        values = list(dict.values(self))
        if self._later:  # the values extensions hold, as JSON: a base copies only its own places
            values = list(map(self._laid, values))
        return list(dict.keys(self)), values, None

    def _copied_layout(self) -> tuple[list[Any], list[Any], list[bytes]] | None:
        index = self._index
        if index is None or index.shifted:
            return None
        # The keys held here not known to be the index's: added since loading, or not looked up?
        unknown = [key for key in dict.keys(self) if key not in index.places]
        buckets = dict(zip(unknown, buckets_of(cast(list[Any], unknown), len(index.lines)), strict=True))
        held, taken = index.read(sorted(set(buckets.values())))
        self._add(taken)
        places = index.places
        added = [key for key in unknown if key not in places]
        if bucket_count(index.size + len(added)) != len(index.lines):
            return None
        keys: list[Any] = [None] * index.size
        values: list[Any] = list(range(index.size))
        for key, place in places.items():
            value = dict.__getitem__(self, key)
            if not self._in_base(value):  # read or set since loading, or by an extension
                keys[place], values[place] = key, self._laid(value)
        lines = [index.lines[at] for at in range(len(index.lines))]
        grown: dict[int, list[int]] = {}
        for offset, key in enumerate(added):
            grown.setdefault(buckets[key], []).append(offset)
        for bucket, offsets in grown.items():
            old_keys, old_places = held[bucket]
            lines[bucket] = bucket_line(
                [*old_keys, *(added[o] for o in offsets)], [*old_places, *(index.size + o for o in offsets)]
            )
        keys.extend(added)
        values.extend(self._laid(dict.__getitem__(self, key)) for key in added)
        return keys, values, lines

    # -- reading and writing ------------------------------------------------------------------

    def __getitem__(self, key: K) -> T:
        if self._index is not None:
            self._find(key)
        value: Any = dict.__getitem__(self, key)
        if type(value) is int:
            value = self._cut(value)
        if type(value) is bytes:
            value = self._adapter.validate_json(value)
            dict.__setitem__(self, key, value)
            self._touched[key] = None
        return cast(T, value)

    def __setitem__(self, key: K, value: T) -> None:
        # No need to parse ``key``'s bucket: a key set keeps its place when it is parsed later.
        dict.__setitem__(self, key, value)
        self._touched[key] = None

    def __delitem__(self, key: K) -> None:
        self._settle(key)
        dict.__delitem__(self, key)
        self._gone(key)

    def _gone(self, key: K) -> None:
        self._touched.pop(key, None)
        self._removed.add(key)
        self._unplace(key)

    def _unplace(self, key: K) -> None:
        index = self._index
        if index is not None and index.places.pop(key, None) is not None:  # added again, it goes last
            index.shifted = True

    def __contains__(self, key: object) -> bool:
        if self._index is not None:
            self._find(cast(K, key))
        return dict.__contains__(self, key)

    def __len__(self) -> int:
        self.materialize()
        return dict.__len__(self)

    def __bool__(self) -> bool:
        # A bucket not parsed yet holds a key still here (a removal parses its key's bucket).
        return dict.__len__(self) > 0 or (self._index is not None and self._index.unparsed())

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other: Any) -> LazyDict[K, T]:  # type: ignore[override]
        self.update(other)
        return self

    def __or__(self, other: Any) -> dict[K, T]:  # type: ignore[override]
        merged = self.copy()
        merged.update(other)
        return merged

    def __ror__(self, other: Any) -> dict[K, T]:  # type: ignore[override]
        merged: dict[K, T] = dict(other)
        merged.update(self.copy())
        return merged

    def __iter__(self) -> Iterator[K]:
        # Defined (as dict's) so that dict(d) and {**d} read the values through __getitem__
        # instead of copying the undecoded JSON.
        self.materialize()
        return dict.__iter__(self)

    def __reversed__(self) -> Iterator[K]:
        self.materialize()
        return dict.__reversed__(self)

    def keys(self) -> dict_keys[K, T]:
        self.materialize()
        return dict.keys(self)

    def _decode_all(self) -> None:
        self.materialize()
        for key in list(dict.keys(self)):
            self[key]

    def get(self, key: K, default: Any = None) -> Any:
        if key in self:
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
            del self[key]
            return value
        if default is _MISSING:
            raise KeyError(key)
        return default

    def popitem(self) -> tuple[K, T]:
        if not self:
            raise KeyError("popitem(): dictionary is empty")
        self.materialize()
        key = next(reversed(dict.keys(self)))
        return key, self.pop(key)

    def clear(self) -> None:
        self.materialize()
        for key in dict.keys(self):
            self._gone(key)
        dict.clear(self)

    def setdefault(self, key: K, default: Any = None) -> Any:
        if key in self:
            return self[key]
        self[key] = default
        return default

    def copy(self) -> dict[K, T]:
        self._decode_all()
        return dict(dict.items(self))

    def __eq__(self, other: object) -> bool:
        self._decode_all()
        return dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None

    def __repr__(self) -> str:
        self._decode_all()
        return dict.__repr__(self)

    def raw_items(self) -> Iterator[tuple[K, Any]]:
        """The entries as stored: decoded values, the JSON of those never decoded, or (for a dict
        loaded from a checkpoint) the place in ``source`` of those never read (their JSON when
        an extension holds them)."""
        self.materialize()
        return ((key, self._laid(value)) for key, value in dict.items(self))

    @property
    def source(self) -> Slices | None:
        """Where the values never read are (``unread``, ``indexed``), if anywhere."""
        return self._source

    @property
    def touched(self) -> dict[K, None]:
        """The keys whose value was read or set since the dict was loaded (or ``untouch``), in
        order (a dict used as an ordered set; the caller must not change it)."""
        return self._touched

    @property
    def removed(self) -> set[K]:
        """The keys removed since the dict was loaded (or ``untouch``)."""
        return self._removed

    def drop(self, key: K) -> None:
        """Remove ``key`` if it is there, without noting it as removed (an extension of the
        checkpoint being loaded removes it)."""
        self._settle(key)
        dict.pop(self, key, None)
        self._touched.pop(key, None)
        self._unplace(key)

    def untouch(self, removed: Iterable[K] = ()) -> None:
        """Forget that every key was touched, and that ``removed`` were removed (what an
        extension of the checkpoint now holds)."""
        self._touched.clear()
        self._removed.difference_update(removed)
