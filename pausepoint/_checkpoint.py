"""Checkpoints: a session's folded state at some version, kept by the store beside its log.

A process with nothing cached loads a session by reading its checkpoint and folding only the
records after it, instead of folding the whole log. The log stays the only source of truth: a
checkpoint is a cache of the fold, checked on every read and thrown away (the whole log is
folded instead) unless all of this holds —

- its **schema fingerprint** is this code's: a hash of the JSON schemas of ``SessionState``'s
  fields, so any change to the state's shape (a field added, a type changed) retires every
  checkpoint written before it, with no version number to remember to bump;
- its **checksum** (CRC-32 of the body) and length match: a torn or corrupted write is caught;
- it names this **session** and its **version** is in the log, and the record at that version
  has the **digest** the checkpoint was taken after: a checkpoint of another log (a session
  deleted and made again under the same id, records lost with a power failure) never applies.

The format is derived from ``SessionState``'s dataclass fields, never listed by hand. After a
one-line header comes the text: every field that is not a collection as one line of JSON, and
for each ``list`` or ``dict`` field its count, its keys (a dict's) and its references (below).
Then a table of where each collection's items start, and the items themselves, laid end to end
(each one's JSON from its type's pydantic adapter). Loading parses the text and checks the
checksum; a list's items are cut out of the bytes and decoded only when read (``_lazy``), so
loading costs no object per history item, and writing the next checkpoint of a state loaded
from one copies each list's bytes and table whole, adding what was appended since. An object
held in two fields (an open pause is also in ``pauses``; the running detached turn is also in
``detached``) is written once and referred to from the later field (``@field`` and the key),
so it is one object again after loading.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import sys
import typing
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from pydantic import TypeAdapter

from ._lazy import LazyDict, LazyList, Slices
from ._records import decode_record
from ._session import SessionState
from .stores import CheckpointStore

__all__ = [
    "CHECKPOINT_FORMAT",
    "decode_state",
    "encode_state",
    "fingerprint",
    "load",
    "read_header",
    "record_digest",
    "save",
]

CHECKPOINT_FORMAT = b"PPCK2"

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
    """The checkpoint of ``state``, taken after the log record whose ``record_digest`` is ``digest``.

    The items of a state loaded from a checkpoint that were never read (and a list's, while
    they stay where it put them) are copied as they are, in runs: writing the next checkpoint
    costs what changed, and a copy of bytes.
    """
    fields, print_ = _layout()
    homes: dict[int, tuple[str, Any]] = {}  # id of a dataclass held in a collection -> (field, key)
    text: list[bytes] = []
    laid = _Laid()
    for field in fields:
        value = getattr(state, field.name)
        if field.shape == "value":
            home = homes.get(id(value)) if value is not None else None
            text.append(b"@" + _json([home[0], home[1]]) if home else field.item.dump_json(value))
            continue
        laid.begin()
        source: Slices | None = None
        packed = value.packed() if isinstance(value, LazyList) else None
        if packed is not None:  # the items as loaded, whole, then those appended since
            loaded, appended = packed
            laid.copy(loaded, 0, len(loaded))
            entries: Iterator[tuple[Any, Any]] = enumerate(appended, len(loaded))
        elif field.shape == "list":
            entries = enumerate(value.raw_items() if isinstance(value, LazyList) else value)
        elif isinstance(value, LazyDict):
            source, entries = value.source, value.raw_items()
        else:
            entries = iter(value.items())
        keys: list[Any] = []
        refs: list[list[Any]] = []  # [position, field, key] of each item held by an earlier field
        run: list[int] = []  # the places in ``source`` of the entries being copied as a run
        for key, item in entries:
            keys.append(key)
            if source is not None and type(item) is int:  # never read: copied as loaded
                if run and item != run[1]:
                    laid.copy(source, *run)
                    run = []
                run = [run[0] if run else item, item + 1]
                continue
            if run:
                laid.copy(source, *run)  # type: ignore[arg-type]
                run = []
            if type(item) is not bytes:
                home = homes.get(id(item))
                if home is not None and home[0] != field.name:
                    refs.append([key if field.keys is None else len(keys) - 1, home[0], home[1]])
                    item = b"@"
                else:
                    if home is None and dataclasses.is_dataclass(item):  # mutable: must stay one object
                        homes[id(item)] = (field.name, key)
                    item = field.item.dump_json(item)
            laid.add(item)
        if run:
            laid.copy(source, *run)  # type: ignore[arg-type]
        laid.end_collection()
        text.append(b"%d" % (len(keys) if packed is None else len(packed[0]) + len(keys)))
        if field.keys is not None:
            text.append(field.keys.dump_json(keys))
        text.append(_json(refs))
    body = [b"".join([b"\n".join(text), b"\n"]), *laid.parts()]
    crc = 0
    for part in body:  # the checksum of the body without joining it twice
        crc = zlib.crc32(part, crc)
    head = b" ".join(
        [
            CHECKPOINT_FORMAT,
            print_,
            str(state.version).encode(),
            digest,
            b"%08x" % crc,
            b"%d" % sum(map(len, body)),
            b"%d" % len(body[0]),
            b"%d" % laid.bound_count,
        ]
    )
    return b"".join([head, b"\n", *body])


class _Laid:
    """The items of a checkpoint being written, laid end to end, and each collection's bounds
    (where each item starts, from 0, and where the last one ends)."""

    def __init__(self) -> None:
        self._items: list[bytes | memoryview] = []
        self._bounds = array("I")  # OverflowError past 4 GiB in one collection
        self._end = 0

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

    def end_collection(self) -> None:
        self._bounds.append(self._end)

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


@dataclass(frozen=True, slots=True)
class Header:
    """What a checkpoint says about itself, read before its body is trusted."""

    version: int
    digest: bytes
    text: memoryview  # the values, and each collection's count, keys and references
    bounds: memoryview  # where each collection's items start, from 0 (uint32, little-endian)
    items: memoryview  # every collection's items, laid end to end


def read_header(data: bytes, *, verify: bool = True) -> Header | None:
    """The header of a checkpoint written by this code (same format and fingerprint) whose body
    is whole; None for anything else. (``verify=False`` skips the checksum: for bytes this
    process has just encoded.)"""
    end = data.find(b"\n")
    parts = data[:end].split(b" ") if end > 0 else []
    if len(parts) != 8 or parts[0] != CHECKPOINT_FORMAT or parts[1] != _layout()[1]:
        return None
    try:
        version, crc, length, text, count = (
            int(parts[2]),
            int(parts[4], 16),
            int(parts[5]),
            int(parts[6]),
            int(parts[7]),
        )
    except ValueError:
        return None
    body = memoryview(data)[end + 1 :]
    items = text + 4 * count
    if version < 1 or len(body) != length or not 0 < text <= items <= length:
        return None
    if verify and zlib.crc32(body) != crc:
        return None
    return Header(version, parts[3], body[:text], body[text:items], body[items:])


def decode_state(session_id: str, data: bytes, header: Header | None = None) -> SessionState | None:
    """The state a checkpoint holds, or None when it is not a whole checkpoint of
    ``session_id`` written by this code (``header``: what ``read_header`` already said of it).
    The caller checks it against the log before using it.

    Loading costs the checksum and a parse of the text (the values, the dicts' keys and
    items): the items of the lists are cut out of the bytes and decoded only when read.
    """
    header = header or read_header(data)
    if header is None:
        return None
    fields, _ = _layout()
    lines = header.text.tobytes().split(b"\n")
    state = SessionState(session_id)
    # The text first: the values, and each collection's count, keys and references.
    at = 0
    collections: list[tuple[_Field, int, list[Any] | None, list[Any]]] = []
    try:
        for field in fields:
            line = lines[at]
            at += 1
            if field.shape == "value":
                if line[:1] == b"@":
                    collections.append((field, -1, None, json.loads(line[1:])))
                else:
                    setattr(state, field.name, field.item.validate_json(line))
                continue
            size = int(line)
            keys = field.keys.validate_json(lines[at]) if field.keys is not None else None
            at += 1 if keys is not None else 0
            refs = json.loads(lines[at])
            at += 1
            if size < 0 or (keys is not None and len(keys) != size):
                return None
            collections.append((field, size, keys, refs))
        bounds = header.bounds.cast("I")
        if sys.byteorder != "little":
            swapped = array("I", bounds)
            swapped.byteswap()
            bounds = memoryview(swapped)
        if at != len(lines) - 1 or lines[at] or sum(c[1] + 1 for c in collections if c[1] >= 0) != len(bounds):
            return None
        # Then the items: each collection's, cut out of the bytes where its bounds say.
        at_bound = base = 0
        for field, size, keys, refs in collections:
            if size < 0:  # a value held by a collection read before it
                home, key = refs
                setattr(state, field.name, getattr(state, home)[key])
                continue
            own = bounds[at_bound : at_bound + size + 1]
            if own[0] != 0:
                return None
            source = Slices(header.items, base, own)
            at_bound, base = at_bound + size + 1, base + own[size]
            value: Any
            if keys is None:
                value = LazyList.unread(source, field.item)
                if refs:
                    for position, home, key in refs:
                        list.__setitem__(value, position, getattr(state, home)[key])
                    value.cut_all()  # its places now hold objects written elsewhere
            else:
                value = LazyDict.unread(keys, source, field.item)
                for position, home, key in refs:
                    dict.__setitem__(value, keys[position], getattr(state, home)[key])
            setattr(state, field.name, value)
        if base != len(header.items):
            return None
    except (ValueError, IndexError, KeyError, TypeError):
        return None
    if state.session_id != session_id or state.version != header.version:
        return None
    state.durable_version = state.version
    return state


async def load(store: CheckpointStore, session_id: str) -> SessionState | None:
    """The session's state from its checkpoint and the records after it, or None when there is
    no checkpoint this code can use (then the caller folds the whole log)."""
    checkpoint = await store.read_checkpoint(session_id)
    if checkpoint is None:
        return None
    header = read_header(checkpoint.data)
    if header is None or header.version != checkpoint.version:
        return None
    # The record the checkpoint was taken after, and every one since.
    found = await store.read(session_id, after_version=header.version - 1)
    if found is None or not found.entries or found.entries[0].version != header.version:
        return None
    if record_digest(found.entries[0].data) != header.digest:
        return None
    state = decode_state(session_id, checkpoint.data, header)
    if state is None:
        return None
    try:
        for entry in found.entries[1:]:
            state.apply(decode_record(entry.data))
    except Exception:  # a checkpoint the records after it do not fit: fold the whole log instead
        log.warning("the checkpoint of session %s does not fit its log; folding the log", session_id, exc_info=True)
        return None
    state.durable_version = state.version
    state.checkpointed = header.version
    return state


async def save(store: CheckpointStore, state: SessionState) -> SessionState | None:
    """Write the checkpoint of ``state`` if it still matches the store's log at its version.

    Returns the state loaded back from that checkpoint (equal to ``state``, its items not yet
    decoded: the cheaper one to keep and to checkpoint next time), or None when nothing was
    written (the state moved on meanwhile, or a newer checkpoint is there already).
    """
    version = state.version
    if version == 0 or version != state.durable_version:
        return None
    found = await store.read(state.session_id, after_version=version - 1)
    if found is None or not found.entries or found.entries[0].version != version:
        return None
    if state.version != version or state.durable_version != version:
        return None  # changed while we read: the next turn will checkpoint it
    data = encode_state(state, record_digest(found.entries[0].data))
    kept = await store.write_checkpoint(state.session_id, version, data)
    state.checkpointed = max(state.checkpointed, version)  # if not kept, a later one is there already
    if not kept:
        return None
    loaded = decode_state(state.session_id, data, read_header(data, verify=False))
    if loaded is not None:
        loaded.checkpointed = version
    return loaded
