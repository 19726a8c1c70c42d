"""A list and a dict whose items stay JSON until something reads them.

A session state loaded from a checkpoint (``_checkpoint``) keeps its history in these, and only
the items a turn reads (the latest messages, the calls and pauses it touches) are decoded.
Everything else behaves as the built-in list and dict (they are subclasses, so the fold and its
readers need no change); an item, once decoded, replaces its JSON for good, so every reader sees
the same object.

An item still in JSON is its ``bytes``, which is why an item type may not be ``bytes`` itself.
A dict loaded from a checkpoint holds, for each value not read yet, its place in the
checkpoint's bytes: in its base, or past the base's places in one of its extensions
(``LazyDict.extend_unread``), so folding an extension makes no object per entry (and a dict's
values may not be ``int``s). Its keys are not even parsed when it
is loaded (``LazyDict.indexed``): the checkpoint lays them out in buckets by a hash of the key
(``KeyIndex``), and a lookup parses only the bucket its key would be in; only what needs every
key (iteration, ``len``) parses them all, and puts them back in their order. A dict also notes
the keys whose value was read or set, and those removed, since it was loaded (``touched``,
``removed``): a value never read is as the checkpoint has it, so an extension of the checkpoint
(``_checkpoint``) writes only those.
A list loaded from a checkpoint (``LazyList.unread``, and ``extend_unread`` for the items each
of its extensions appended) holds even less: the checkpoint's bytes and where each item starts
(``Slices``); an item is cut out of them when first read, and the base's items are not even in
the list's storage until then, so loading a history of any length makes no object, and fills
no slot, per item. Until its items move (an insert, a removal, a sort), such a list is
written to the next base by copying those bytes whole (``packed``): the items of a list are
values, never changed in place.
"""

from __future__ import annotations

import itertools
import operator
import zlib
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Generic, Protocol, SupportsIndex, TypeVar, cast, overload

from pydantic import TypeAdapter
from pydantic_core import to_json

if TYPE_CHECKING:
    from _collections_abc import dict_items, dict_keys, dict_values

__all__ = [
    "KEYS_PER_BUCKET",
    "KeyIndex",
    "LazyDict",
    "LazyList",
    "Slices",
    "bucket_count",
    "bucket_line",
    "buckets_of",
    "key_index",
]

K = TypeVar("K")
T = TypeVar("T")
_MISSING: Any = object()
_UNCUT: Any = object()  # an item of a ``LazyList.unread`` still in its source's bytes


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


KEYS_PER_BUCKET = 32  # at most, on average: a dict of n keys has a power of two buckets


def bucket_count(keys: int) -> int:
    """How many buckets a dict of ``keys`` keys lays them out in: a power of two, so the count
    stays the same while a dict grows up to twice as big (and a base copies most of the lines)."""
    count = 1
    while count * KEYS_PER_BUCKET < keys:
        count *= 2
    return count


def bucket_line(keys: list[Any], places: list[int]) -> bytes:
    """The line of one bucket: its keys and their places, as JSON."""
    return to_json([keys, places])


def key_index(keys: list[Any]) -> list[bytes]:
    """The lines of the key index of a dict whose keys are ``keys``, in order (their places)."""
    count = bucket_count(len(keys))
    at = buckets_of(keys, count)
    places = sorted(range(len(keys)), key=at.__getitem__)  # by bucket, then by place
    ordered = [at[place] for place in places]
    lines = []
    start = 0
    for bucket in range(count):
        stop = bisect_right(ordered, bucket, start)
        held = places[start:stop]
        lines.append(bucket_line([keys[place] for place in held], held))
        start = stop
    return lines


def buckets_of(keys: Iterable[str | int], buckets: int) -> list[int]:
    """The bucket of ``buckets`` each of ``keys`` is laid in (the same in every process): by the
    CRC-32 of a string's UTF-8, an int's value."""
    return [_text_bucket(key, buckets) if type(key) is str else _held_bucket(key, buckets) for key in keys]


def _text_bucket(key: str, buckets: int) -> int:
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % buckets


def _held_bucket(key: object, buckets: int) -> int:
    bucket = _bucket(key, buckets)
    if bucket is None:
        raise TypeError(f"a checkpointed dict's key must be a str or an int, not {type(key).__name__}")
    return bucket


def _bucket(key: object, buckets: int) -> int | None:
    """The bucket a key looked up would be in; None for one equal to no string or int (whatever
    its type: a lookup finds a key that compares equal, as a dict's does)."""
    if isinstance(key, str):
        return _text_bucket(key, buckets)
    if isinstance(key, int) or (isinstance(key, float) and key.is_integer()):
        return int(key) % buckets
    return None


class Lines(Protocol):
    """The lines of a key index, one per bucket (a list of them, or the ``Slices`` of a
    checkpoint that holds them, each read when it is needed)."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int, /) -> bytes: ...


class KeyIndex(Generic[K]):
    """A dict's keys as a checkpoint lays them out: in buckets by ``buckets_of``, each
    bucket a line holding its keys and their places (their positions in the dict's order, which
    are also where their values are in its source). ``parse`` reads lines (at once) into the keys
    and the places each holds, and raises ``ValueError`` for lines that are not well formed."""

    __slots__ = ("_parse", "_parsed", "_pending", "lines", "places", "shifted", "size")

    def __init__(
        self, lines: Lines, parse: Callable[[list[bytes]], list[tuple[list[K], list[int]]]], size: int
    ) -> None:
        self.lines = lines  # as written (read when parsed): a base written later copies those that stay the same
        self._pending = bytearray(b"\x01") * len(lines)  # the buckets not parsed yet
        self._parse = parse
        self._parsed = 0  # keys
        self.size = size  # how many keys the checkpoint holds
        self.places: dict[K, int] = {}  # the keys parsed so far (and not removed since), and their places
        self.shifted = False  # whether a key was removed since: then the places of those after it moved

    def unparsed(self) -> bool:
        """Whether a bucket is not parsed yet (it may hold keys)."""
        return 1 in self._pending

    def take(self, key: object) -> list[tuple[K, int]]:
        """The entries of the bucket ``key`` would be in, if that bucket is not parsed yet."""
        bucket = _bucket(key, len(self.lines))
        return [] if bucket is None else self._take([bucket])

    def take_all(self) -> list[tuple[K, int]]:
        """The entries of every bucket not parsed yet (parsed at once)."""
        taken = self._take([at for at, pending in enumerate(self._pending) if pending])
        if self._parsed != self.size:
            raise ValueError(f"a checkpoint's key index holds {self._parsed} keys for {self.size} values")
        return taken

    def read(self, buckets: list[int]) -> tuple[dict[int, tuple[list[K], list[int]]], list[tuple[K, int]]]:
        """The keys and places each of ``buckets`` holds as written (parsed at once, whether
        parsed before or not), and the entries of those not parsed before (taken now)."""
        parsed = self._parse([self.lines[at] for at in buckets])
        held = dict(zip(buckets, parsed, strict=True))
        taken = [entry for at in buckets if self._pending[at] for entry in self._taken(at, *held[at])]
        return held, taken

    def _take(self, buckets: list[int]) -> list[tuple[K, int]]:
        buckets = [at for at in buckets if self._pending[at]]
        return self.read(buckets)[1] if buckets else []

    def _taken(self, at: int, keys: list[K], places: list[int]) -> list[tuple[K, int]]:
        if keys and (min(places) < 0 or max(places) >= self.size):
            raise ValueError("a checkpoint's key index names a place outside its dict")
        self._pending[at] = 0
        if not keys:  # an empty bucket
            return []
        self._parsed += len(keys)
        entries = list(zip(keys, places, strict=True))
        self.places.update(entries)
        return entries


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
