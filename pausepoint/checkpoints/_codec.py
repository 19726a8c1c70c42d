"""Checkpoints: a session's folded state at some version, kept by the store beside its log.

A process with nothing cached loads a session by reading its checkpoint and folding only the
records after it, instead of folding the whole log. The log stays the only source of truth: a
checkpoint is a cache of the fold, checked on every read and thrown away (the whole log is
folded instead) unless all of this holds —

- its **schema fingerprint** is this code's: a hash of the JSON schemas of ``SessionState``'s
  fields, so any change to the state's shape (a field added, a type changed) retires every
  checkpoint written before it, with no version number to remember to bump;
- its **checksums** and length match: a torn or corrupted write is caught. The text and the
  chunk sums have one XXH3-64, checked on every load; the bounds and the items have one per
  64 KiB chunk (``_chunks``), in the chunk sums. A checkpoint a store gave as bytes is checked
  whole on load; a base a store gives as a view (a ``memoryview``: SQLite's mapped file, the
  in-memory store's bytes) a chunk at a time, when the session first reads or copies an item
  in it (its bounds, then its bytes) — a chunk that does not match then fails that call with
  ``StoreError``, and the session is read from its log after. A base a store gives in part
  (``Checkpoint.fetch``: PostgreSQL's and Redis's) is fetched the same way, each chunk just
  before its check (its head first, within the bytes the store gave but for a base of hundreds
  of MB); the state made from it is read again (``_sessions``) before the store may drop that
  base (``PARTIAL_BASE_KEPT``), and a fetch that fails fails its call, after which the session
  is read again;
- it names this **session** and its **version** is in the log, and the record at that version
  has the **digest** the checkpoint was taken after: a checkpoint of another log (a session
  deleted and made again under the same id, records lost with a power failure) never applies.

The format is derived from ``SessionState``'s dataclass fields, never listed by hand. After a
one-line header comes the text: every field that is not a collection as one line of JSON, and
for each ``list`` or ``dict`` field its count, its keys (a dict's, below), its references
(below) and the keys it removed (a dict's, in an extension); its last line, the bytes of each
collection's items. Then the chunk sums, a table of where each collection's items start, and the
items themselves, laid end to end (each one's JSON from its type's pydantic adapter). Loading
splits the text into lines and checks the checksum, and reads none of the table (what a load
reads of a base grows with its history by only 8 bytes of chunk sums a 64 KiB); a list's items
are cut out of the bytes and decoded only when read (``_lazy``), so loading costs no object per
history item, and writing the next base of a state loaded from one
copies each list's bytes and table whole, adding what was appended since. A base lays a dict's
keys out in buckets by a hash of the key, a line each with the bucket's keys and their places
(``_lazy.key_index``), as a collection of its own after the dict's values: loading reads none
of them, and a lookup parses the bucket of its key (``KeyIndex``), so a load costs no object
per call, pause or grant either; the next base copies the lines of the buckets no key was added
to (the bucket count is a power of two, the same while the dict grows up to twice its size). An
extension lists its dicts' keys in order, in one line of its text each.

An object held in two fields (an open pause is also in ``pauses``; the running detached turn is
also in ``detached``) is written once and referred to from the later field (``@field`` and the
key), so it is one object again after loading.

**Extensions.** A checkpoint is a base and the extensions written after it (the store keeps
them in order, each only on top of the one before: ``CheckpointStore.extend_checkpoint``). An
extension has the same format, and its header names the version it extends. It holds every
value, the list items appended since that version (lists only grow), and each dict's entries
that were read or set since, with the keys it removed: an entry never read is as the
checkpoint already has it, so an extension costs what the session added and touched, not its
history. Loading folds the extensions into the base in order; each is checked as a base is
(format, fingerprint, checksum), they must chain from the base, and the last one's digest ties
the whole to the log. An extension may also replace the last extensions with one that holds
what they held too (``extend_checkpoint(..., replaces=k)``): it extends the version before
them, and holds the items appended since and the entries they set or removed, as the state has
them now. The writer of a long base merges as a binary counter carries (``_replaced``): a new
extension replaces the last ones that span, each, no more records than it and those after
them, so the extensions of n checkpoint writes are about log2(n), and a cold load folds a few.
A new base is written instead once the extensions are many for the base's size, or large
(``BYTES_PER_EXTENSION``, ``MAX_EXTENSIONS``, ``EXTENSIONS_SHARE``, ``MERGED_SHARE``), so a
cold load never reads much more than a base.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import itertools
import json
import logging
import sys
import time
import typing
import weakref
from array import array
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, cast

import xxhash
from pydantic import TypeAdapter

from ..errors import StoreError
from ..session._records import decode_record
from ..session._state import SessionState
from ..stores import PARTIAL_BASE_KEPT, Checkpoint, CheckpointStore
from ..stores._base import merges_extensions
from ._books import Chain, Link, Partial, books
from ._chunks import CHUNK_BYTES, ChunkCheck, chunk_sums
from ._lazy import KeyIndex, LazyDict, LazyList, Slices, key_index

__all__ = [
    "CHECKPOINT_FORMAT",
    "decode_chain",
    "decode_state",
    "encode_state",
    "fingerprint",
    "load",
    "read_header",
    "record_digest",
    "save",
]

CHECKPOINT_FORMAT = b"PPCK7"
_HEADER_BYTES = 512  # a header line is shorter (its eleven fields are at most about 220 bytes)

log = logging.getLogger("pausepoint")


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    shape: Literal["value", "list", "dict"]
    item: TypeAdapter[Any]  # the field's adapter ("value") or its items' ("list", "dict")
    keys: TypeAdapter[Any] | None = None  # a dict's keys, as a list


@cache
def _layout() -> tuple[tuple[_Field, ...], bytes]:
    """The fields a checkpoint holds, in order, and the schema fingerprint they make."""
    hints = typing.get_type_hints(SessionState)
    fields: list[_Field] = []
    described: list[Any] = []
    for f in dataclasses.fields(SessionState):
        if f.metadata.get("transient"):
            continue
        hint = hints[f.name]
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is list:
            field = _Field(f.name, "list", TypeAdapter(args[0]))
        elif origin is dict:
            field = _Field(f.name, "dict", TypeAdapter(args[1]), TypeAdapter(list[args[0]]))  # type: ignore[valid-type]
        else:
            field = _Field(f.name, "value", TypeAdapter(hint))
        if field.shape != "value" and bytes in (args[-1], typing.get_origin(args[-1])):
            raise TypeError(f"SessionState.{f.name}: a collection of bytes cannot be checkpointed")
        if field.shape == "dict" and int in (args[-1], typing.get_origin(args[-1])):
            raise TypeError(f"SessionState.{f.name}: a dict of ints cannot be checkpointed")
        if field.shape == "dict" and args[0] not in (str, int):
            raise TypeError(f"SessionState.{f.name}: only a dict keyed by str or int can be checkpointed")
        fields.append(field)
        keys = field.keys.json_schema(mode="serialization") if field.keys else None
        described.append([f.name, field.shape, field.item.json_schema(mode="serialization"), keys])
    schema = json.dumps([CHECKPOINT_FORMAT.decode(), described], sort_keys=True, separators=(",", ":"))
    return tuple(fields), hashlib.sha256(schema.encode()).hexdigest()[:32].encode()


def fingerprint() -> str:
    """The schema fingerprint of the checkpoints this code writes and reads."""
    return _layout()[1].decode()


def record_digest(data: bytes) -> bytes:
    """The digest of one log record's bytes that ties a checkpoint to its log."""
    return hashlib.blake2b(data, digest_size=16).hexdigest().encode()


def encode_state(state: SessionState, digest: bytes) -> bytes:
    """The checkpoint of ``state`` (a base), taken after the log record whose ``record_digest``
    is ``digest``.

    The items of a state loaded from a checkpoint that were never read (and a list's, while
    they stay where it put them) are copied as they are, in runs: writing the next checkpoint
    costs what changed, and a copy of bytes.
    """
    written = _encode(state, digest, None)
    assert written is not None  # a base can always be written
    return written.data


@dataclass(frozen=True, slots=True)
class _Written:
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


def _encode(state: SessionState, digest: bytes, chain: Chain | None, replaces: int = 0) -> _Written | None:
    """A base (``chain`` None), or an extension of ``chain``: every value, the list items
    appended since ``chain.version``, each dict's entries read or set and keys removed since it
    was loaded or last extended. None when ``state`` cannot be written as an extension (a dict
    that does not note what changed in it, a list that shrank).

    An extension that replaces the last ``replaces`` extensions of ``chain`` extends the version
    before them, and holds what they held as well: the list items appended since that version,
    and the entries they set and the keys they removed (as the dicts hold them now).
    """
    fields, print_ = _layout()
    after, since = chain.since(replaces) if chain is not None else (0, {})
    replaced = chain.links[len(chain.links) - replaces :] if chain is not None else []
    link_keys: dict[str, list[Any]] = {}
    link_removed: dict[str, list[Any]] = {}
    homes: dict[int, tuple[str, Any]] = {}  # id of a dataclass held in a collection -> (field, key)
    text: list[bytes] = []
    laid = _Laid()
    lengths: dict[str, int] = {}
    removed: dict[str, list[Any]] = {}
    entry_sums: dict[str, dict[Any, int]] = {}
    unchanged: dict[str, list[tuple[Any, bytes]]] = {}
    for field in fields:
        value = getattr(state, field.name)
        if field.shape == "value":
            home = homes.get(id(value)) if value is not None else None
            text.append(b"@" + _json([home[0], home[1]]) if home else field.item.serializer.to_json(value))
            continue
        laid.begin()
        source: Slices | None = None  # where the items that are places (ints) are
        first = copied = 0  # a list's: the position of ``items[0]``, and how many were copied whole
        keys: list[Any] | None = None  # a dict's, one per item (None for an item copied as loaded)
        index: list[bytes] | None = None  # a base's dict's: its key index, when copied
        gone: list[Any] = []
        items: list[Any]
        # An extension's dict: the hashes of what this process wrote of it before, and the keys
        # of the entries written now (one that is still as written then is left out).
        written_before: dict[Any, int] | None = None
        written_keys: list[Any] = []
        sums_now: dict[Any, int] = {}
        unchanged_now: list[tuple[Any, bytes]] = []
        if field.shape == "list":
            lengths[field.name] = len(value)
            if chain is not None:  # the items appended since the version extended
                first = since.get(field.name, len(value) + 1)
                if first > len(value):
                    return None
                items = value.raw_since(first) if isinstance(value, LazyList) else value[first:]
            elif isinstance(value, LazyList) and (packed := value.packed()) is not None:
                loaded, items = packed  # the items as loaded, whole, then those appended since
                laid.copy(loaded, 0, len(loaded))
                first = copied = len(loaded)
            else:
                items = list(value.raw_items()) if isinstance(value, LazyList) else value
        elif chain is not None:  # the entries read or set, and the keys removed, since
            if not isinstance(value, LazyDict):
                return None
            removed[field.name] = list(value.removed)
            held: AbstractSet[Any]
            if replaced:  # and those the extensions replaced set or removed, as the dict has them now
                held = {key for link in replaced for key in link.keys.get(field.name, ())}
                was_removed = itertools.chain(*(link.removed.get(field.name, ()) for link in replaced), value.removed)
                gone = [key for key in dict.fromkeys(was_removed) if not dict.__contains__(value, key)]
                wanted = held.union(value.touched)
                # In the dict's order, which loading the extension keeps for the keys added since.
                keys = [key for key in dict.keys(value) if key in wanted]
            else:
                held = _NO_KEYS
                gone = [key for key in removed[field.name] if not dict.__contains__(value, key)]
                keys = list(value.touched)
            items = [value.stored(key) for key in keys]
            written_before = chain.sums.get(field.name, {})
            entry_sums[field.name], unchanged[field.name] = sums_now, unchanged_now
        elif isinstance(value, LazyDict):  # its index is copied where it stays the same
            keys, items, index = value.base_layout()
            source = value.source
        else:
            keys, items = list(dict.keys(value)), list(dict.values(value))
        refs: list[list[Any]] = []  # [position or key, field, key] of each item held by an earlier field
        encode = field.item.serializer.to_json  # what ``dump_json`` calls, without its argument handling
        # Items never read since loading are places in ``source``: copied in runs, as loaded.
        # The others are objects (encoded here) or JSON (kept as it is).
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
                if home is not None and home[0] != field.name:
                    refs.append([key, home[0], home[1]])
                    item = b"@"
                else:
                    if home is None and hasattr(type(item), "__dataclass_fields__"):  # mutable: must stay one object
                        homes[id(item)] = (field.name, key)
                    item = encode(item)
            if written_before is not None:
                key = cast(list[Any], keys)[at]
                if item != b"@":  # not a reference, which is written again whatever it refers to
                    sums_now[key] = sum_ = xxhash.xxh3_128_intdigest(item)
                    if written_before.get(key) == sum_ and key not in held:
                        unchanged_now.append((key, item))
                        continue
                written_keys.append(key)
            laid.add(item)
        laid.end_collection()
        if written_before is not None:  # an extension's dict: the entries written, their keys in order
            link_keys[field.name], link_removed[field.name] = written_keys, gone
            keys_json = cast(TypeAdapter[Any], field.keys).dump_json(written_keys)
            text.extend([b"%d" % len(written_keys), b"0", keys_json])
        else:
            text.append(b"%d" % (copied + len(items)))
        if written_before is None and keys is not None:  # a base's: its keys, by bucket, a line each
            index = index if index is not None else key_index(keys)  # laid after its items
            text.append(b"%d" % len(index))
            laid.begin()
            for line in index:
                laid.add(line)
            laid.end_collection()
        text.append(_json(refs))
        if field.keys is not None:
            text.append(field.keys.dump_json(gone))
    text.append(_json(laid.lengths))  # so a load finds each collection's items without its bounds
    checked = laid.parts()
    sums = chunk_sums(checked)
    if sys.byteorder != "little":
        sums.byteswap()
    body = [b"".join([b"\n".join(text), b"\n"]), sums.tobytes(), *checked]
    checksum = xxhash.xxh3_64()
    for part in body[:2]:  # the text and the chunk sums (which check the bounds and the items)
        checksum.update(part)
    head = b" ".join(
        [
            CHECKPOINT_FORMAT,
            print_,
            str(state.version).encode(),
            b"%d" % after,
            digest,
            b"%016x" % checksum.intdigest(),
            b"%d" % sum(map(len, body)),
            b"%d" % len(body[0]),
            b"%d" % laid.bound_count,
            b"%d" % CHUNK_BYTES,
            b"%d" % len(sums),
        ]
    )
    data = b"".join([head, b"\n", *body])
    link = Link(after, since, state.version, len(data), link_keys, link_removed) if chain is not None else None
    return _Written(data, lengths, removed, link, replaces, entry_sums, unchanged)


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


def _bucket_parser(field: _Field) -> Callable[[list[bytes]], list[tuple[list[Any], list[int]]]]:
    """How a ``KeyIndex`` of ``field`` reads bucket lines: several at once, as one JSON array."""
    adapter = cast(TypeAdapter[Any], field.keys)

    def parse(lines: list[bytes]) -> list[tuple[list[Any], list[int]]]:
        try:
            buckets = json.loads(b"[%b]" % b",".join(lines))
            if any(len(bucket) != 2 or len(bucket[0]) != len(bucket[1]) for bucket in buckets):
                raise ValueError("a bucket is not a list of keys and a list of places as long")
            keys = adapter.validate_python([key for held, _ in buckets for key in held], strict=True)
        except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
            raise ValueError(f"a bucket of the checkpoint's {field.name} keys is not well formed") from exc
        parsed, start = [], 0
        for held, places in buckets:
            parsed.append((keys[start : start + len(held)], places))
            start += len(held)
        return parsed

    return parse


@dataclass(frozen=True, slots=True)
class Header:
    """What a checkpoint (a base or an extension) says about itself, read before its body is
    trusted."""

    version: int
    after: int  # an extension's: the version it extends; 0 for a base
    digest: bytes
    text: memoryview  # the values; each collection's count, keys, references, removed keys; the collections' sizes
    checked: memoryview  # what the chunk sums check: the bounds, then the items
    bounds: int  # the bounds' bytes: where each collection's items start, from 0 (uint32, little-endian)
    chunks: ChunkCheck | None = None  # checks the bounds and items a chunk at a time as they are read


def read_header(
    data: bytes | memoryview,
    *,
    verify: bool = True,
    lazy: bool = False,
    fetch: Callable[[int, int], None] | None = None,
) -> Header | None:
    """The header of a checkpoint or extension written by this code (same format and
    fingerprint) whose body is whole; None for anything else. The text and the chunk sums are
    checked now; the bounds and items too, unless ``lazy``: then each chunk of them is checked
    when first read (``Header.chunks``). (``verify=False`` checks nothing: for bytes this
    process has just encoded.) ``fetch``: the base came in part (``Checkpoint.fetch``) and its
    head is there (``_fetch_head``); each chunk of its bounds and items is fetched when first
    read.
    """
    line = _line(data)
    if line is None:
        return None
    end, version, after, digest, checksum, text, sums, bounds, chunk = line
    body = memoryview(data)[end + 1 :]
    fill = None
    if fetch is not None:
        lazy = True
        fill = functools.partial(_shifted, fetch, end + 1 + sums)
    checked = body[sums:]
    if not verify:
        return Header(version, after, digest, body[:text], checked, bounds - sums)
    if xxhash.xxh3_64_intdigest(body[:sums]) != checksum:
        return None
    chunks = ChunkCheck(checked, _little_endian(body[text:sums], "Q"), chunk, fill)
    if not lazy:
        return Header(version, after, digest, body[:text], checked, bounds - sums) if chunks.all() else None
    return Header(version, after, digest, body[:text], checked, bounds - sums, chunks)


def _line(data: bytes | memoryview) -> tuple[int, int, int, bytes, int, int, int, int, int] | None:
    """What the header line of ``data`` says, if it is one of this code's and adds up: where it
    ends, the version, the version extended, the digest, the checksum, and where the text, the
    chunk sums and the bounds end in the body (after the line; the items follow the bounds);
    the chunk size."""
    line = bytes(data[:_HEADER_BYTES])
    end = line.find(b"\n")
    parts = line[:end].split(b" ") if end > 0 else []
    if len(parts) != 11 or parts[0] != CHECKPOINT_FORMAT or parts[1] != _layout()[1]:
        return None
    try:
        version, after, checksum, length, text, count, chunk, sums = (
            int(parts[2]),
            int(parts[3]),
            int(parts[5], 16),
            int(parts[6]),
            int(parts[7]),
            int(parts[8]),
            int(parts[9]),
            int(parts[10]),
        )
    except ValueError:
        return None
    sums_end = text + 8 * sums
    bounds = sums_end + 4 * count
    if not 0 <= after < version or len(data) - end - 1 != length or not 0 < text <= sums_end <= bounds <= length:
        return None
    if chunk <= 0 or sums != -(-(length - sums_end) // chunk):
        return None
    return end, version, after, parts[4], checksum, text, sums_end, bounds, chunk


def _fetch_head(checkpoint: Checkpoint) -> None:
    """Fetch the head of a base given in part, its header line, text and chunk sums, if the
    store's first bytes did not hold it all (blocking, as every fetch: a base's head is about
    8 bytes a 64 KiB of it, so this fetches only for a base of hundreds of MB)."""
    fetch, data = cast(Callable[[int, int], None], checkpoint.fetch), checkpoint.data
    fetch(0, min(_HEADER_BYTES, len(data)))
    line = _line(data)
    if line is not None:
        fetch(0, line[0] + 1 + line[6])


def _shifted(fetch: Callable[[int, int], None], offset: int, start: int, stop: int) -> None:
    """``fetch`` of bytes ``start`` to ``stop - 1`` of what the chunk sums check, which begins at
    ``offset``."""
    fetch(offset + start, offset + stop)


def _little_endian(data: memoryview, code: Literal["I", "Q"]) -> memoryview:
    """``data``, little-endian unsigned ints of ``array`` type ``code``, as this machine's ints."""
    view = data.cast(code)
    if sys.byteorder == "little":
        return view
    swapped = array(code, view)
    swapped.byteswap()
    return memoryview(swapped)


class _Part:
    """One field as a checkpoint or extension holds it (a plain class: a load makes one per
    field of the base and of each extension)."""

    __slots__ = ("bucket_count", "buckets", "field", "home", "keys", "line", "refs", "removed", "source")

    def __init__(self, field: _Field, line: bytes = b"", home: list[Any] | None = None) -> None:
        self.field = field
        self.line = line  # a value's JSON
        self.home = home  # a value held by a collection: [field, key]
        self.source: Slices | None = None  # a collection's items (``@`` for those held by earlier fields)
        self.buckets: Slices | None = None  # a base's dict's keys, a line per bucket (``_lazy.key_index``)
        self.bucket_count = 0
        self.keys: list[Any] | None = None  # an extension's dict's keys, in order
        self.refs: list[list[Any]] = _NONE  # [position or key, field, key]
        self.removed: list[Any] = _NONE  # an extension's removed keys


_NONE: list[Any] = []  # shared, never changed: a part's refs or removed keys when it has none


def _parse(header: Header) -> list[_Part] | None:
    """The fields of a checkpoint or extension, its text parsed and its items located; None
    when they do not add up."""
    fields, _ = _layout()
    lines = header.text.tobytes().split(b"\n")
    parts: list[_Part] = []
    collections: list[_Part] = []  # the parts whose items follow, in order (a base's dict twice)
    sizes: list[int] = []
    extension = header.after > 0
    at = 0
    try:
        for field in fields:
            line = lines[at]
            at += 1
            if field.shape == "value":
                parts.append(_Part(field, line, json.loads(line[1:]) if line[:1] == b"@" else None))
                continue
            size = int(line)
            part = _Part(field)
            keys = field.keys
            if keys is not None:
                part.bucket_count = buckets = int(lines[at])
                if buckets == 0:
                    part.keys = keys.validator.validate_json(lines[at + 1])
                    at += 2
                elif buckets < 0:
                    return None
                else:
                    at += 1
                if (part.keys is not None) != extension:
                    return None  # a base's keys are by bucket, an extension's in order
            if lines[at] != b"[]":  # most have none
                part.refs = json.loads(lines[at])
            at += 1
            if keys is not None:
                if lines[at] != b"[]":
                    part.removed = keys.validator.validate_json(lines[at])
                at += 1
            if size < 0 or (part.keys is not None and len(part.keys) != size):
                return None
            parts.append(part)
            collections.append(part)
            sizes.append(size)
            if part.bucket_count:
                collections.append(part)
                sizes.append(part.bucket_count)
        lengths = json.loads(lines[at])  # each collection's items' bytes
        at += 1
        if at != len(lines) - 1 or lines[at] or header.bounds != 4 * (sum(sizes) + len(sizes)):
            return None
        if type(lengths) is not list or len(lengths) != len(sizes) or not all(type(n) is int for n in lengths):
            return None
        if min(lengths, default=0) < 0 or sum(lengths) != len(header.checked) - header.bounds:
            return None
        check = header.chunks.span if header.chunks else None
        checked = header.checked
        if sys.byteorder == "little":  # the bounds are read where they are, each checked as read
            bounds, viewed = checked[: header.bounds].cast("I"), True
        else:
            if check is not None:
                check(0, header.bounds)
            bounds, viewed = _little_endian(checked[: header.bounds], "I"), False
        at_bound, base = 0, header.bounds
        for part, size, length in zip(collections, sizes, lengths, strict=True):
            stop = at_bound + size + 1
            slices = Slices(checked, base, bounds[at_bound:stop], check, 4 * at_bound if viewed else None)
            if part.source is None:
                part.source = slices
            else:  # a base's dict's keys, after its values
                part.buckets = slices
            at_bound, base = stop, base + length
    except (ValueError, IndexError, TypeError):
        return None
    return parts


# The values a base is checked by even when its extensions bring every value again.
_IDENTITY = frozenset({"session_id", "version"})


def decode_state(
    session_id: str, data: bytes | memoryview, header: Header | None = None, *, values: bool = True
) -> SessionState | None:
    """The state a checkpoint's base holds, or None when it is not a whole base of
    ``session_id`` written by this code (``header``: what ``read_header`` already said of it).
    The caller checks it against the log before using it. ``values=False`` reads only the
    session id and version of the values: for a base its extensions follow, the last of which
    holds every value again.

    Loading costs the checksum, a split of the text into lines and a parse of the values: the
    dicts' keys are parsed a bucket at a time as they are looked up, and the items are cut out
    of the bytes and decoded only when read.
    """
    header = header or read_header(data)
    parts = _parse(header) if header is not None and header.after == 0 else None
    if header is None or parts is None:
        return None
    state = SessionState(session_id)
    try:
        for part in parts:
            if part.field.shape == "value" and part.home is None and (values or part.field.name in _IDENTITY):
                setattr(state, part.field.name, part.field.item.validator.validate_json(part.line))
        for part in parts:
            field, source = part.field, part.source
            if source is None:
                if part.home is not None and values:  # a value held by a collection read before it
                    home, key = part.home
                    setattr(state, field.name, getattr(state, home)[key])
                continue
            value: Any
            if field.keys is None:
                value = LazyList.unread(source, field.item)
                if part.refs:
                    for position, home, key in part.refs:
                        value.hold(position, getattr(state, home)[key])
                    value.cut_all()  # its places now hold objects written elsewhere
            else:
                index = KeyIndex(cast(Slices, part.buckets), _bucket_parser(field), len(source))
                value = LazyDict.indexed(index, source, field.item)
                for key, home, held in part.refs:
                    value[key] = getattr(state, home)[held]
            setattr(state, field.name, value)
    except (ValueError, IndexError, KeyError, TypeError):
        return None
    if state.session_id != session_id or state.version != header.version:
        return None
    state.durable_version = state.version
    books(state).chain = Chain(state.version, _lengths(state), len(data))
    return state


def decode_chain(session_id: str, checkpoint: Checkpoint, headers: list[Header] | None = None) -> SessionState | None:
    """The state a checkpoint holds, its base and then its extensions, or None when they are
    not a whole chain of ``session_id``'s written by this code (``headers``: what
    ``read_header`` already said of each). The caller checks it against the log."""
    if headers is None:
        found = [read_header(data) for data in (checkpoint.data, *checkpoint.extensions)]
        if None in found:
            return None
        headers = cast(list[Header], found)
    state = decode_state(session_id, checkpoint.data, headers[0], values=not checkpoint.extensions)
    if state is None:
        return None
    for data, header in zip(checkpoint.extensions, headers[1:], strict=True):
        if not _extend(state, data, header, values=header is headers[-1]):
            return None
    return state


def _lengths(state: SessionState) -> dict[str, int]:
    return {field.name: len(getattr(state, field.name)) for field in _layout()[0] if field.shape == "list"}


def _extend(
    state: SessionState,
    data: bytes,
    header: Header,
    *,
    written: _Written | None = None,
    replaces: int = 0,
    values: bool = True,
) -> bool:
    """Apply the extension ``data`` to ``state``, the state of the checkpoint it extends; False
    when it does not fit. ``values=False`` leaves the values (every extension holds them all:
    a load reads only the last one's). With ``written`` (what ``_encode`` said of it),
    ``state`` is the very state the extension was just written from, unchanged since, in place
    of the last ``replaces`` extensions: its values and list items are already there, and the
    dict entries it holds go back to JSON (then nothing is noted as read in them, and the next
    extension leaves them out)."""
    chain = books(state).chain
    parts = _parse(header)
    if parts is None or chain is None:
        return False
    after, lengths = chain.since(replaces)
    if header.after != after:
        return False
    live = written is not None
    homes: set[str] = set()  # taking it back in: the fields whose objects others refer to keep them
    if live:
        homes.update(part.home[0] for part in parts if part.home is not None)
        homes.update(home for part in parts for _, home, _ in part.refs)
    try:
        if values and not live:
            for part in parts:
                if part.field.shape == "value" and part.home is None:
                    setattr(state, part.field.name, part.field.item.validator.validate_json(part.line))
        elif not live:
            state.version = header.version
        for part in parts:
            field, source = part.field, part.source
            if source is None:
                if part.home is not None and values:
                    home, key = part.home
                    setattr(state, field.name, getattr(state, home)[key])
                continue
            value = getattr(state, field.name)
            if field.keys is None:
                since = lengths[field.name]
                if not live:
                    if not isinstance(value, LazyList):
                        return False
                    value.extend_unread(source)
                elif len(value) != since + len(source):
                    return False
                elif isinstance(value, LazyList) and field.name not in homes:
                    value.unread_from(since, source)  # so the next base copies them
                for position, home, key in part.refs:
                    if not since <= position < len(value):
                        return False
                    if isinstance(value, LazyList):
                        value.hold(position, getattr(state, home)[key])
                    else:
                        value[position] = getattr(state, home)[key]
            else:
                if not isinstance(value, LazyDict):
                    return False
                if live:
                    value.untouch(written.removed[field.name])  # type: ignore[union-attr]
                for key in part.removed:
                    value.drop(key)
                if live:  # its entries and those it left out, as the checkpoint holds them, as JSON
                    # (a state kept while it writes extension after extension would otherwise
                    # keep the bytes of every one)
                    for place, key in enumerate(cast(list[Any], part.keys)):
                        dict.__setitem__(value, key, source[place])  # an entry set keeps its place
                    for key, held_json in cast(_Written, written).unchanged.get(field.name, ()):
                        dict.__setitem__(value, key, held_json)
                else:  # its entries stay in its bytes until read
                    value.extend_unread(cast(list[Any], part.keys), source)
                for key, home, held in part.refs:
                    value[key] = getattr(state, home)[held]
    except (ValueError, IndexError, KeyError, TypeError):
        return False
    if state.version != header.version:
        return False
    keys = {part.field.name: part.keys for part in parts if part.keys is not None}
    removed = {part.field.name: part.removed for part in parts if part.keys is not None}
    chain.extended(Link(after, lengths, header.version, len(data), keys, removed), _lengths(state), replaces)
    return True


async def load(store: CheckpointStore, session_id: str) -> SessionState | None:
    """The session's state from its checkpoint (its base, then its extensions) and the records
    after it, or None when there is no checkpoint this code can use (then the caller folds the
    whole log)."""
    checkpoint = await store.read_checkpoint(session_id)
    if checkpoint is None:
        return None
    # A base the store gives as a view (a memoryview) is checked a chunk at a time as it is
    # read; bytes it gave whole, at once.
    viewed = isinstance(checkpoint.data, memoryview)
    try:
        if checkpoint.fetch is not None:  # the head of a very long base may go past what the store read
            _fetch_head(checkpoint)
        base_header = read_header(checkpoint.data, lazy=viewed, fetch=checkpoint.fetch)
    except StoreError:  # a base given in part whose head could not be fetched: fold the log
        log.warning("could not read the checkpoint of session %s; folding its log", session_id, exc_info=True)
        return None
    headers = [base_header, *map(read_header, checkpoint.extensions)]
    if None in headers:
        return None
    chain = cast(list[Header], headers)  # that they chain from the base, decode_chain checks
    head, base = chain[-1], chain[0]
    if head.version != checkpoint.version or (session_id, base.version, base.digest) in _damaged:
        return None
    # The record the checkpoint was taken after, and every one since.
    found = await store.read(session_id, after_version=head.version - 1)
    if found is None or not found.entries or found.entries[0].version != head.version:
        return None
    if record_digest(found.entries[0].data) != head.digest:
        return None
    state = decode_chain(session_id, checkpoint, chain)
    if state is None:
        return None
    if base.chunks is not None:
        made = weakref.ref(state)
        base.chunks.on_damage = functools.partial(_damage, session_id, base, made)
        base.chunks.on_lost = functools.partial(_lost, made)
        if not base.chunks.whole:
            books(state).partial = Partial(base.chunks, time.monotonic() + PARTIAL_BASE_KEPT / 2)
    try:
        for entry in found.entries[1:]:
            state.apply(decode_record(entry.data))
    except Exception:  # a checkpoint the records after it do not fit: fold the whole log instead
        log.warning("the checkpoint of session %s does not fit its log; folding the log", session_id, exc_info=True)
        return None
    state.durable_version = state.version
    books(state).checkpointed = head.version
    return state


# The bases found damaged when a chunk of them was read (session, version, digest): not loaded
# again by this process, which folds the log instead (until a new base replaces them).
_damaged: dict[tuple[str, int, bytes], None] = {}
_DAMAGED_KEPT = 1024


def _lost(state: weakref.ref[SessionState]) -> None:
    """A range of a base given in part could not be fetched: the state made from it can no
    longer read its items, and the next call reads the store again."""
    made = state()
    if made is not None:
        made.durable_version = -1


def _damage(session_id: str, base: Header, state: weakref.ref[SessionState]) -> None:
    """A chunk of ``base`` did not match its sum: forget the base, and the state made from it."""
    log.warning("the checkpoint of session %s is damaged; reading the session from its log", session_id)
    _damaged[(session_id, base.version, base.digest)] = None
    while len(_damaged) > _DAMAGED_KEPT:
        del _damaged[next(iter(_damaged))]
    made = state()
    if made is not None:
        made.durable_version = -1  # not to be trusted: the next call reads the store again


# A checkpoint is extended, rather than written again whole, while it has fewer extensions than
# one per BYTES_PER_EXTENSION of its base (at most MAX_EXTENSIONS), and they add up to at most
# EXTENSIONS_SHARE of the base; a small session's base (under a MiB) is cheap to write again
# whole, each time. From a base of MERGED_FROM_BYTES (about 7,000 approval cycles), where a base
# costs a serving process more than merging does, the extensions are merged as they go
# (``_replaced``): a chain then rarely holds more than 4 or 5, and what ends it is their bytes,
# MERGED_SHARE of the base. So what a base costs, spread over the checkpoints before the next
# one, stops growing with the history (at 10,000 approval cycles, a base every 50 or so
# checkpoints, against one every 17 unmerged). The share is small because every cold load folds
# each byte of the extensions (about 0.7 µs a KB, besides 60 to 150 µs for each extension
# however small). Below that size merging saves no base (the 4 to 16 extensions a base allows
# add up to about 2 % of it too) and costs its rewrites: measured at 1,000 cycles, 5 to 10 %
# more CPU a served cycle.
BYTES_PER_EXTENSION = 1024 * 1024
MAX_EXTENSIONS = 16
EXTENSIONS_SHARE = 0.5
MERGED_FROM_BYTES = 32 * 1024 * 1024
MERGED_SHARE = 0.02


async def save(
    store: CheckpointStore, state: SessionState, idle: Callable[[], bool] = lambda: False
) -> SessionState | None:
    """Write the checkpoint of ``state`` if it still matches the store's log at its version:
    an extension of the checkpoint ``state`` was loaded from or last wrote, or a new base.

    ``idle`` says whether nothing is using ``state`` now. If so, once an extension is written,
    the state is made to hold what the store holds, undecoded: the cheaper one to keep and to
    checkpoint next time. Returns ``state`` after an extension; after a new base, the state
    loaded back from it (at the version written: the caller keeps it in place of ``state``,
    or starts the session's next call from it and the records after it, if a call took
    ``state`` on meanwhile); None when nothing was written (the state moved on meanwhile, or a
    newer checkpoint is there already).
    """
    version = state.version
    if version == 0 or version != state.durable_version:
        return None
    found = await store.read(state.session_id, after_version=version - 1)
    if found is None or not found.entries or found.entries[0].version != version:
        return None
    if state.version != version or state.durable_version != version:
        return None  # changed while we read: the next turn will checkpoint it
    digest = record_digest(found.entries[0].data)
    kept_books = books(state)
    chain = kept_books.chain
    if chain is not None and chain.version < version:
        written = _extension(state, digest, chain, merges_extensions(store))
        if written is not None:
            if written.replaces:
                kept = await store.extend_checkpoint(
                    state.session_id, chain.version, version, written.data, replaces=written.replaces
                )
            else:  # as a store of one's own that does not merge extensions is called
                kept = await store.extend_checkpoint(state.session_id, chain.version, version, written.data)
            kept_books.checkpointed = max(kept_books.checkpointed, version)
            if kept:
                _extended(state, written, idle() and state.version == version)
                return state
            kept_books.chain = None  # the checkpoint moved on without us: write a base next
            return None
    if kept_books.partial is not None:  # a new base copies every item: fetch them off the loop
        await asyncio.to_thread(kept_books.partial.chunks.fill_all)
        kept_books.partial = None
    written = _encode(state, digest, None)
    assert written is not None
    kept = await store.write_checkpoint(state.session_id, version, written.data)
    kept_books.checkpointed = max(kept_books.checkpointed, version)  # if not kept, a later one is there already
    if not kept:
        return None
    kept_books.chain = Chain(version, written.lengths, len(written.data))  # the entries read stay noted
    loaded = decode_state(state.session_id, written.data, read_header(written.data, verify=False))
    if loaded is None:
        return state
    books(loaded).checkpointed = version
    return loaded


def _extension(state: SessionState, digest: bytes, chain: Chain, merges: bool) -> _Written | None:
    """The extension of ``chain`` to write for ``state`` (merged with the last ones of no more
    records than it and each other, for a long base if the store ``merges``), or None when a
    new base is due."""
    links = chain.links
    merging = merges and chain.base_bytes >= MERGED_FROM_BYTES
    replaces = _replaced(links, state.version - chain.version) if merging else 0
    kept = links[: len(links) - replaces]
    if len(kept) >= min(MAX_EXTENSIONS, chain.base_bytes // BYTES_PER_EXTENSION):
        return None
    written = _encode(state, digest, chain, replaces)
    share = MERGED_SHARE if merging else EXTENSIONS_SHARE
    if written is None or sum(link.size for link in kept) + len(written.data) > chain.base_bytes * share:
        return None
    return written


def _replaced(links: list[Link], records: int) -> int:
    """How many of the last ``links`` an extension of ``records`` more records replaces: those
    that span, each, no more records than the extension and those after them together. As a
    binary counter carries: n checkpoint writes leave about log2(n) extensions, and write each
    record about log2(n) times over until the next base."""
    replaces = 0
    while replaces < len(links):
        link = links[-1 - replaces]
        if link.version - link.after > records:
            break
        records += link.version - link.after
        replaces += 1
    return replaces


def _extended(state: SessionState, written: _Written, idle: bool) -> None:
    """Bring ``state``'s chain up to the extension just written from it."""
    chain = cast(Chain, books(state).chain)
    if idle:
        header = read_header(written.data, verify=False)
        if header is None or not _extend(state, written.data, header, written=written, replaces=written.replaces):
            state.durable_version = -1  # not to be trusted: the next call reads the store again
            return
    else:
        for name, keys in written.removed.items():
            getattr(state, name).removed.difference_update(keys)
        chain.extended(cast(Link, written.link), written.lengths, written.replaces)
    chain.wrote(written.sums, written.removed)
