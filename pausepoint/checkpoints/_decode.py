"""Decoding a checkpoint (its format: ``_format``): a base into a state whose collections stay
in the checkpoint's bytes until read (``decode_state``: ``LazyList``, ``LazyDict``), and an
extension folded into the state of the checkpoint it extends (``extend``); ``decode_chain`` does
both, for a base and its extensions. ``extend`` also takes an extension just written back into
the very state it was written from (``_cache.save``), its dict entries back to JSON.

Loading costs the checksum, a split of the text into lines and a parse of the values: the dicts'
keys are parsed a bucket at a time as they are looked up, and the items are cut out of the bytes
and decoded only when read.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, cast

from pydantic import TypeAdapter

from ..session._state import SessionState
from ..stores import Checkpoint
from ._books import Chain, Link, books
from ._encode import Written
from ._format import Field, Header, layout, little_endian, read_header
from ._key_index import KeyIndex
from ._lazy_dict import LazyDict
from ._lazy_list import LazyList
from ._slices import Slices

__all__ = ["decode_chain", "decode_state", "extend"]


class _Part:
    """One field as a checkpoint or extension holds it (a plain class: a load makes one per
    field of the base and of each extension)."""

    __slots__ = ("bucket_count", "buckets", "field", "home", "keys", "line", "refs", "removed", "source")

    def __init__(self, field: Field, line: bytes = b"", home: list[Any] | None = None) -> None:
        self.field = field
        self.line = line  # a value's JSON
        self.home = home  # a value held by a collection: [field, key]
        self.source: Slices | None = None  # a collection's items (``@`` for those held by earlier fields)
        self.buckets: Slices | None = None  # a base's dict's keys, a line per bucket (``_key_index.key_index``)
        self.bucket_count = 0
        self.keys: list[Any] | None = None  # an extension's dict's keys, in order
        self.refs: list[list[Any]] = _NONE  # [position or key, field, key]
        self.removed: list[Any] = _NONE  # an extension's removed keys


_NONE: list[Any] = []  # shared, never changed: a part's refs or removed keys when it has none


def _parse(header: Header) -> list[_Part] | None:
    """The fields of a checkpoint or extension, its text parsed and its items located; None
    when they do not add up."""
    fields = layout()[0]
    try:
        read = _read_text(header, fields)
        if read is None:
            return None
        parts, collections, sizes, lengths = read
        _locate(header, collections, sizes, lengths)
    except (ValueError, IndexError, TypeError):
        return None
    return parts


def _read_text(
    header: Header, fields: tuple[Field, ...]
) -> tuple[list[_Part], list[_Part], list[int], list[int]] | None:
    """The ``fields`` a checkpoint's text holds (raises, or None, when it is not well formed); the
    parts whose items follow, in order (a base's dict twice: its values, then its key index), and
    the count and the bytes of each one's items."""
    lines = header.text.tobytes().split(b"\n")
    parts: list[_Part] = []
    collections: list[_Part] = []
    sizes: list[int] = []
    extension = header.after > 0
    at = 0
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
    return parts, collections, sizes, lengths


def _locate(header: Header, collections: list[_Part], sizes: list[int], lengths: list[int]) -> None:
    """Give each of ``collections`` its items (``_Part.source``; a base's dict, the second time,
    its key index: ``_Part.buckets``): ``sizes`` items of ``lengths`` bytes each, after the
    bounds."""
    check = header.chunks.span if header.chunks else None
    checked = header.checked
    if sys.byteorder == "little":  # the bounds are read where they are, each checked as read
        bounds, viewed = checked[: header.bounds].cast("I"), True
    else:
        if check is not None:
            check(0, header.bounds)
        bounds, viewed = little_endian(checked[: header.bounds], "I"), False
    at_bound, base = 0, header.bounds
    for part, size, length in zip(collections, sizes, lengths, strict=True):
        stop = at_bound + size + 1
        slices = Slices(checked, base, bounds[at_bound:stop], check, 4 * at_bound if viewed else None)
        if part.source is None:
            part.source = slices
        else:  # a base's dict's keys, after its values
            part.buckets = slices
        at_bound, base = stop, base + length


def _bucket_parser(field: Field) -> Callable[[list[bytes]], list[tuple[list[Any], list[int]]]]:
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
        _read_values(state, parts, None if values else _IDENTITY)
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
        if not extend(state, data, header, values=header is headers[-1]):
            return None
    return state


def _lengths(state: SessionState) -> dict[str, int]:
    return {field.name: len(getattr(state, field.name)) for field in layout()[0] if field.shape == "list"}


def _read_values(state: SessionState, parts: list[_Part], only: frozenset[str] | None = None) -> None:
    """Set the values of ``state`` that ``parts`` hold as JSON (not those held by a collection):
    all, or ``only`` those named."""
    for part in parts:
        field = part.field
        if field.shape == "value" and part.home is None and (only is None or field.name in only):
            setattr(state, field.name, field.item.validator.validate_json(part.line))


def extend(
    state: SessionState,
    data: bytes,
    header: Header,
    *,
    written: Written | None = None,
    replaces: int = 0,
    values: bool = True,
) -> bool:
    """Apply the extension ``data`` to ``state``, the state of the checkpoint it extends; False
    when it does not fit. ``values=False`` leaves the values (every extension holds them all:
    a load reads only the last one's). With ``written`` (what ``_encode.encode`` said of it),
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
            _read_values(state, parts)
        elif not live:
            state.version = header.version
        for part in parts:
            name, source = part.field.name, part.source
            if source is None:
                if part.home is not None and values:
                    home, key = part.home
                    setattr(state, name, getattr(state, home)[key])
            elif part.field.keys is None:
                if not _extend_list(state, part, source, lengths[name], live, name in homes):
                    return False
            elif not _extend_dict(state, part, source, written):
                return False
    except (ValueError, IndexError, KeyError, TypeError):
        return False
    if state.version != header.version:
        return False
    keys = {part.field.name: part.keys for part in parts if part.keys is not None}
    removed = {part.field.name: part.removed for part in parts if part.keys is not None}
    chain.extended(Link(after, lengths, header.version, len(data), keys, removed), _lengths(state), replaces)
    return True


def _extend_list(state: SessionState, part: _Part, source: Slices, since: int, live: bool, referred: bool) -> bool:
    """Apply an extension's items of a list, those after its first ``since``; False when they do
    not fit. Folded in, they stay JSON until read; ``live`` (the list was just written from),
    the list has them already, and they go back to JSON unless others refer to objects in it
    (``referred``). Then the items held by earlier fields take their places."""
    value = getattr(state, part.field.name)
    if not live:
        if not isinstance(value, LazyList):
            return False
        value.extend_unread(source)
    elif len(value) != since + len(source):
        return False
    elif isinstance(value, LazyList) and not referred:
        value.unread_from(since, source)  # so the next base copies them
    for position, home, key in part.refs:
        if not since <= position < len(value):
            return False
        if isinstance(value, LazyList):
            value.hold(position, getattr(state, home)[key])
        else:
            value[position] = getattr(state, home)[key]
    return True


def _extend_dict(state: SessionState, part: _Part, source: Slices, written: Written | None) -> bool:
    """Apply an extension's entries of a dict and the keys it removed; False when they do not
    fit. Folded in, the entries stay JSON until read; with ``written`` (the dict was just written
    from), those it holds, and those it left out as written before, go back to JSON. Then the
    entries held by earlier fields take their places."""
    value = getattr(state, part.field.name)
    if not isinstance(value, LazyDict):
        return False
    if written is not None:
        value.untouch(written.removed[part.field.name])
    for key in part.removed:
        value.drop(key)
    if written is not None:  # its entries and those it left out, as the checkpoint holds them, as JSON
        # (a state kept while it writes extension after extension would otherwise keep the bytes
        # of every one)
        for place, key in enumerate(cast(list[Any], part.keys)):
            dict.__setitem__(value, key, source[place])  # an entry set keeps its place
        for key, held_json in written.unchanged.get(part.field.name, ()):
            dict.__setitem__(value, key, held_json)
    else:  # its entries stay in its bytes until read
        value.extend_unread(cast(list[Any], part.keys), source)
    for key, home, held in part.refs:
        value[key] = getattr(state, home)[held]
    return True
