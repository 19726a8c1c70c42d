"""Encoding a checkpoint (its format: ``_format``): a base of the whole state
(``encode_state``), or an extension of the checkpoint a state was loaded from or last wrote
(``encode``).

The items of a state loaded from a checkpoint that were never read (and a list's, while they
stay where it put them) are copied as they are, in runs (``_Laid``): writing the next checkpoint
costs what changed, and a copy of bytes. An extension holds every value, the list items appended
since the version it extends, and each dict's entries read or set since (``LazyDict.touched``)
but for those still as this process wrote them before (``Chain.sums``), with the keys removed;
one that replaces the last extensions holds what they held too, as the state has it now.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import sys
from array import array
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, cast

import xxhash
from pydantic import TypeAdapter

from ..session._state import SessionState
from ._books import Chain, Link
from ._format import Field, frame, layout
from ._key_index import key_index
from ._lazy_dict import LazyDict
from ._lazy_list import LazyList
from ._slices import Slices

__all__ = ["Written", "encode", "encode_state"]


def encode_state(state: SessionState, digest: bytes) -> bytes:
    """The checkpoint of ``state`` (a base), taken after the log record whose ``record_digest``
    is ``digest``.

    The items of a state loaded from a checkpoint that were never read (and a list's, while
    they stay where it put them) are copied as they are, in runs: writing the next checkpoint
    costs what changed, and a copy of bytes.
    """
    written = encode(state, digest, None)
    assert written is not None  # a base can always be written
    return written.data


@dataclass(frozen=True, slots=True)
class Written:
    """A checkpoint just encoded, and what its writer keeps of it."""

    data: bytes
    lengths: dict[str, int]  # each list field's length as written
    removed: dict[str, list[Any]]  # an extension's: the keys each dict noted as removed
    link: Link | None  # an extension's: what merging it into a later one needs
    replaces: int  # an extension's: how many of the last extensions it replaces
    # An extension's: a hash of each dict entry's JSON, written or not, and the JSON of those left
    # out (the checkpoint holds them as they are already: ``Chain.sums``).
    sums: dict[str, dict[Any, int]]
    unchanged: dict[str, list[tuple[Any, bytes]]]


_NO_KEYS: frozenset[Any] = frozenset()


@dataclass(slots=True)
class _Collection:
    """One list or dict field as the checkpoint being written takes it."""

    # Objects (encoded when laid), JSON (laid as it is), or places in ``source`` (the items never
    # read since loading: copied in runs, as loaded).
    items: list[Any]
    keys: list[Any] | None = None  # a dict's, one per item (None for an item copied as loaded)
    source: Slices | None = None  # where the items that are places (ints) are
    first: int = 0  # a list's: the position of ``items[0]``
    copied: int = 0  # a list's: how many items before ``items`` were copied whole
    index: list[bytes] | None = None  # a base's dict's: its key index, when copied
    # An extension's dict: the keys it noted as removed, and those removed as the checkpoint will
    # have them; the keys the extensions it replaces held; the hashes of what this process wrote
    # of it before (None for any other collection).
    removed: list[Any] = dataclasses.field(default_factory=list)
    gone: list[Any] = dataclasses.field(default_factory=list)
    held: AbstractSet[Any] = _NO_KEYS
    written_before: dict[Any, int] | None = None
    # What laying an extension's dict found: the keys of the entries written, in order; the hash
    # of each entry's JSON; the entries left out (still as written before), with their JSON.
    written: list[Any] = dataclasses.field(default_factory=list)
    sums: dict[Any, int] = dataclasses.field(default_factory=dict)
    unchanged: list[tuple[Any, bytes]] = dataclasses.field(default_factory=list)


def encode(state: SessionState, digest: bytes, chain: Chain | None, replaces: int = 0) -> Written | None:
    """A base (``chain`` None), or an extension of ``chain``: every value, the list items
    appended since ``chain.version``, each dict's entries read or set and keys removed since it
    was loaded or last extended. None when ``state`` cannot be written as an extension (a dict
    that does not note what changed in it, a list that shrank).

    An extension that replaces the last ``replaces`` extensions of ``chain`` extends the version
    before them, and holds what they held as well: the list items appended since that version,
    and the entries they set and the keys they removed (as the dicts hold them now).
    """
    after, since = chain.since(replaces) if chain is not None else (0, {})
    replaced = chain.links[len(chain.links) - replaces :] if chain is not None else []
    homes: dict[int, tuple[str, Any]] = {}  # id of a dataclass held in a collection -> (field, key)
    text: list[bytes] = []
    laid = _Laid()
    lengths: dict[str, int] = {}
    touched: dict[str, _Collection] = {}  # an extension's dicts, as written
    for field in layout()[0]:
        value = getattr(state, field.name)
        if field.shape == "value":
            home = homes.get(id(value)) if value is not None else None
            text.append(b"@" + _json([home[0], home[1]]) if home else field.item.serializer.to_json(value))
            continue
        laid.begin()
        collection: _Collection | None
        if field.shape == "list":
            lengths[field.name] = len(value)
            if chain is None:
                collection = _whole_list(value, laid)
            else:  # the items appended since the version extended
                collection = _appended(value, since.get(field.name, len(value) + 1))
        elif chain is None:
            collection = _whole_dict(value)
        else:
            collection = _touched(value, field.name, chain, replaced)
        if collection is None:
            return None
        refs = _lay(collection, field, laid, homes)
        laid.end_collection()
        buckets = None
        if collection.keys is not None and collection.written_before is None:  # a base's dict
            index = collection.index if collection.index is not None else key_index(collection.keys)
            laid.add_collection(index)  # its keys, by bucket, a line each, after its items
            buckets = len(index)
        text.extend(_lines(field, collection, refs, buckets))
        if collection.written_before is not None:
            touched[field.name] = collection
    text.append(_json(laid.lengths))  # so a load finds each collection's items without its bounds
    data = frame(text, laid.parts(), laid.bound_count, state.version, after, digest)
    link = None
    if chain is not None:
        keys = {name: entries.written for name, entries in touched.items()}
        gone = {name: entries.gone for name, entries in touched.items()}
        link = Link(after, since, state.version, len(data), keys, gone)
    removed = {name: entries.removed for name, entries in touched.items()}
    sums = {name: entries.sums for name, entries in touched.items()}
    unchanged = {name: entries.unchanged for name, entries in touched.items()}
    return Written(data, lengths, removed, link, replaces, sums, unchanged)


def _whole_list(value: list[Any], laid: _Laid) -> _Collection:
    """A base's list: a list loaded from a checkpoint whose items stayed in place copies them as
    loaded, whole, then takes those appended since; any other takes every item."""
    if isinstance(value, LazyList) and (packed := value.packed()) is not None:
        loaded, items = packed  # the items as loaded, whole, then those appended since
        laid.copy(loaded, 0, len(loaded))
        return _Collection(items, first=len(loaded), copied=len(loaded))
    return _Collection(list(value.raw_items()) if isinstance(value, LazyList) else value)


def _appended(value: list[Any], first: int) -> _Collection | None:
    """An extension's list: the items from ``first`` on (None if the list is shorter: it shrank)."""
    if first > len(value):
        return None
    return _Collection(value.raw_since(first) if isinstance(value, LazyList) else value[first:], first=first)


def _whole_dict(value: dict[Any, Any]) -> _Collection:
    """A base's dict: every entry. One loaded from a checkpoint keeps its values never read as
    places in its source, and its key index where it stays the same."""
    if isinstance(value, LazyDict):
        keys, items, index = value.base_layout()
        return _Collection(items, keys, source=value.source, index=index)
    return _Collection(list(dict.values(value)), list(dict.keys(value)))


def _touched(value: dict[Any, Any], name: str, chain: Chain, replaced: list[Link]) -> _Collection | None:
    """An extension's dict: the entries read or set, and the keys removed, since it was loaded
    or last extended, and those the ``replaced`` extensions set or removed, as the dict has them
    now. None for a dict that does not note them."""
    if not isinstance(value, LazyDict):
        return None
    removed = list(value.removed)
    held: AbstractSet[Any]
    if replaced:
        held = {key for link in replaced for key in link.keys.get(name, ())}
        was_removed = itertools.chain(*(link.removed.get(name, ()) for link in replaced), value.removed)
        gone = [key for key in dict.fromkeys(was_removed) if not dict.__contains__(value, key)]
        wanted = held.union(value.touched)
        # In the dict's order, which loading the extension keeps for the keys added since.
        keys = [key for key in dict.keys(value) if key in wanted]
    else:
        held = _NO_KEYS
        gone = [key for key in removed if not dict.__contains__(value, key)]
        keys = list(value.touched)
    items = [value.stored(key) for key in keys]
    written_before = chain.sums.get(name, {})
    return _Collection(items, keys, removed=removed, gone=gone, held=held, written_before=written_before)


def _lay(collection: _Collection, field: Field, laid: _Laid, homes: dict[int, tuple[str, Any]]) -> list[list[Any]]:
    """Lay the items of ``collection`` (``field``'s) in ``laid``, and return its references
    ([position or key, field, key] of each item held by an earlier field, written as ``@``).

    Items never read since loading are places in ``source``: copied in runs, as loaded. The
    others are objects, encoded (a dataclass met first is noted in ``homes``: mutable, it must
    stay one object), or JSON, kept as it is. An extension's dict leaves out the entries still
    as this process wrote them before (``collection.written``, ``sums`` and ``unchanged`` say
    what it did).
    """
    items, keys, first, source = collection.items, collection.keys, collection.first, collection.source
    written_before, held = collection.written_before, collection.held
    written_keys, sums_now, unchanged_now = collection.written, collection.sums, collection.unchanged
    name = field.name
    refs: list[list[Any]] = []
    to_json = field.item.serializer.to_json  # what ``dump_json`` calls, without its argument handling
    others = range(len(items)) if source is None else [i for i, v in enumerate(items) if type(v) is not int]
    start = 0
    for at in itertools.chain(others, (len(items),)):
        if start < at:
            laid.copy_places(cast(Slices, source), items, start, at)
        start = at + 1
        if at == len(items):
            break
        item = items[at]
        if type(item) is not bytes:
            key = first + at if keys is None else keys[at]
            home = homes.get(id(item))
            if home is not None and home[0] != name:
                refs.append([key, home[0], home[1]])
                item = b"@"
            else:
                if home is None and hasattr(type(item), "__dataclass_fields__"):  # mutable: must stay one object
                    homes[id(item)] = (name, key)
                item = to_json(item)
        if written_before is not None:
            key = cast(list[Any], keys)[at]
            if item != b"@":  # not a reference, which is written again whatever it refers to
                sums_now[key] = sum_ = xxhash.xxh3_128_intdigest(item)
                if written_before.get(key) == sum_ and key not in held:
                    unchanged_now.append((key, item))
                    continue
            written_keys.append(key)
        laid.add(item)
    return refs


def _lines(field: Field, collection: _Collection, refs: list[list[Any]], buckets: int | None) -> list[bytes]:
    """The lines of a collection in the text: its count (and a dict's bucket count: a base's
    ``buckets``; an extension's 0, then the keys of the entries written, in order), its
    references, and (a dict's) the keys it removed."""
    if collection.written_before is not None:  # an extension's dict
        written = collection.written
        lines = [b"%d" % len(written), b"0", cast(TypeAdapter[Any], field.keys).dump_json(written)]
    else:
        lines = [b"%d" % (collection.copied + len(collection.items))]
        if buckets is not None:
            lines.append(b"%d" % buckets)
    lines.append(_json(refs))
    if field.keys is not None:
        lines.append(field.keys.dump_json(collection.gone))
    return lines


class _Laid:
    """The items of a checkpoint being written, laid end to end, and each collection's bounds
    (where each item starts, from 0, and where the last one ends)."""

    def __init__(self) -> None:
        self._items: list[bytes | memoryview] = []
        self._bounds = array("I")  # OverflowError past 4 GiB in one collection
        self._end = 0
        self.lengths: list[int] = []  # each collection's items' bytes

    def begin(self) -> None:
        self._end = 0

    def add(self, item: bytes) -> None:
        self._items.append(item)
        self._bounds.append(self._end)
        self._end += len(item)

    def copy(self, source: Slices, first: int, stop: int) -> None:
        """Items ``first`` to ``stop - 1`` of ``source``, copied whole."""
        data, bounds = source.run(first, stop)
        self._items.append(data)
        if self._end == 0 and bounds[0] == 0:
            self._bounds.frombytes(bounds[:-1].tobytes())  # a collection's items as loaded
        else:
            shift = self._end - bounds[0]
            self._bounds.extend([bound + shift for bound in bounds[:-1]])
        self._end += len(data)

    def copy_places(self, source: Slices, places: list[int], start: int, stop: int) -> None:
        """The items at ``places[start:stop]`` in ``source`` (increasing), copied in runs."""
        first, last = places[start], places[stop - 1]
        if last - first == stop - 1 - start:  # one run: nothing was removed between them
            self.copy(source, first, last + 1)
            return
        begin = previous = first
        for place in places[start + 1 : stop]:
            if place != previous + 1:
                self.copy(source, begin, previous + 1)
                begin = place
            previous = place
        self.copy(source, begin, previous + 1)

    def end_collection(self) -> None:
        self._bounds.append(self._end)
        self.lengths.append(self._end)

    def add_collection(self, items: list[bytes]) -> None:
        """A collection of its own, of ``items``."""
        self.begin()
        for item in items:
            self.add(item)
        self.end_collection()

    @property
    def bound_count(self) -> int:
        return len(self._bounds)

    def parts(self) -> list[bytes | memoryview]:
        """The bounds (uint32, little-endian), then the items."""
        if sys.byteorder != "little":
            self._bounds.byteswap()
        return [self._bounds.tobytes(), *self._items]


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()
