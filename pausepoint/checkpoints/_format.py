"""The checkpoint format: the fields a checkpoint holds, derived from ``SessionState``
(``layout``), and the header line that frames every base and extension (``frame`` writes it,
``read_header`` reads it and checks what it frames).

The format is derived from ``SessionState``'s dataclass fields, never listed by hand. Its
**schema fingerprint** is a hash of the JSON schemas of those fields (``fingerprint``), so any
change to the state's shape (a field added, a type changed) retires every checkpoint written
before it, with no version number to remember to bump. After a one-line header comes the text:
every field that is not a collection as one line of JSON, and for each ``list`` or ``dict``
field its count, its keys (a dict's, below), its references (below) and the keys it removed (a
dict's, in an extension); its last line, the bytes of each collection's items. Then the chunk
sums, a table of where each collection's items start, and the items themselves, laid end to end
(each one's JSON from its type's pydantic adapter). Loading splits the text into lines and
checks the checksum, and reads none of the table (what a load reads of a base grows with its
history by only 8 bytes of chunk sums a 64 KiB); a list's items are cut out of the bytes and
decoded only when read (``_lazy_list``), so loading costs no object per history item, and
writing the next base of a state loaded from one copies each list's bytes and table whole,
adding what was appended since. A base lays a dict's keys out in buckets by a hash of the key, a
line each with the bucket's keys and their places (``_key_index``), as a collection of its own
after the dict's values: loading reads none of them, and a lookup parses the bucket of its key
(``KeyIndex``), so a load costs no object per call, pause or grant either; the next base copies
the lines of the buckets no key was added to (the bucket count is a power of two, the same while
the dict grows up to twice its size). An extension lists its dicts' keys in order, in one line
of its text each.

An object held in two fields (an open pause is also in ``pauses``; the running detached turn is
also in ``detached``) is written once and referred to from the later field (``@field`` and the
key), so it is one object again after loading.

An **extension** (when one is written: ``_cache``) has the same format, and its header names the
version it extends. It holds every value, the list items appended since that version (lists only
grow), and each dict's entries that were read or set since, with the keys it removed.

The **checksums**: the text and the chunk sums have one XXH3-64, checked whenever a header is
read; the bounds and the items have one per 64 KiB chunk (``_chunks``), in the chunk sums,
checked at once or a chunk at a time as they are read (``read_header``'s ``lazy``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import sys
import typing
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, cast

import xxhash
from pydantic import TypeAdapter

from ..session._state import SessionState
from ..stores import Checkpoint
from ._chunks import CHUNK_BYTES, ChunkCheck, chunk_sums

__all__ = [
    "CHECKPOINT_FORMAT",
    "Field",
    "Header",
    "fetch_head",
    "fingerprint",
    "frame",
    "layout",
    "little_endian",
    "read_header",
    "record_digest",
]

CHECKPOINT_FORMAT = b"PPCK7"
_HEADER_BYTES = 512  # a header line is shorter (its eleven fields are at most about 220 bytes)


@dataclass(frozen=True, slots=True)
class Field:
    """One field of ``SessionState`` as a checkpoint holds it."""

    name: str
    shape: Literal["value", "list", "dict"]
    item: TypeAdapter[Any]  # the field's adapter ("value") or its items' ("list", "dict")
    keys: TypeAdapter[Any] | None = None  # a dict's keys, as a list


@cache
def layout() -> tuple[tuple[Field, ...], bytes]:
    """The fields a checkpoint holds, in order, and the schema fingerprint they make."""
    hints = typing.get_type_hints(SessionState)
    fields: list[Field] = []
    described: list[Any] = []
    for f in dataclasses.fields(SessionState):
        if f.metadata.get("transient"):
            continue
        hint = hints[f.name]
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is list:
            field = Field(f.name, "list", TypeAdapter(args[0]))
        elif origin is dict:
            field = Field(f.name, "dict", TypeAdapter(args[1]), TypeAdapter(list[args[0]]))  # type: ignore[valid-type]
        else:
            field = Field(f.name, "value", TypeAdapter(hint))
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
    return layout()[1].decode()


def record_digest(data: bytes) -> bytes:
    """The digest of one log record's bytes that ties a checkpoint to its log."""
    return hashlib.blake2b(data, digest_size=16).hexdigest().encode()


def frame(
    text: list[bytes], checked: list[bytes | memoryview], bounds: int, version: int, after: int, digest: bytes
) -> bytes:
    """A checkpoint's bytes, as ``read_header`` reads them: the header line, the ``text``
    lines, the chunk sums of ``checked`` (the ``bounds`` bounds, then the items) and ``checked``
    itself. ``after``: the version an extension extends (0 for a base); ``digest``: the
    ``record_digest`` of the record at ``version``."""
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
            layout()[1],
            str(version).encode(),
            b"%d" % after,
            digest,
            b"%016x" % checksum.intdigest(),
            b"%d" % sum(map(len, body)),
            b"%d" % len(body[0]),
            b"%d" % bounds,
            b"%d" % CHUNK_BYTES,
            b"%d" % len(sums),
        ]
    )
    return b"".join([head, b"\n", *body])


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
    head is there (``fetch_head``); each chunk of its bounds and items is fetched when first
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
    chunks = ChunkCheck(checked, little_endian(body[text:sums], "Q"), chunk, fill)
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
    if len(parts) != 11 or parts[0] != CHECKPOINT_FORMAT or parts[1] != layout()[1]:
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


def fetch_head(checkpoint: Checkpoint) -> None:
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


def little_endian(data: memoryview, code: Literal["I", "Q"]) -> memoryview:
    """``data``, little-endian unsigned ints of ``array`` type ``code``, as this machine's ints."""
    view = data.cast(code)
    if sys.byteorder == "little":
        return view
    swapped = array(code, view)
    swapped.byteswap()
    return memoryview(swapped)
