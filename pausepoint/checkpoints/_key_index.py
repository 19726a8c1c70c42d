"""A checkpointed dict's keys, laid out in buckets by a hash of the key (``key_index``) and
read back a bucket at a time (``KeyIndex``).

A base lays each dict's keys out this way, a line per bucket with the bucket's keys and their
places, as a collection of its own after the dict's values (``_encode``). A dict loaded from it
(``_lazy_dict.LazyDict.indexed``) parses only the bucket of a key it looks up, so loading costs
no object per key. The bucket count is a power of two (``bucket_count``), the same while a dict
grows up to twice its size, so the next base copies the lines of the buckets no key was added
to (``LazyDict.base_layout``).
"""

from __future__ import annotations

import zlib
from bisect import bisect_right
from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar

from pydantic_core import to_json

__all__ = ["KEYS_PER_BUCKET", "KeyIndex", "bucket_count", "bucket_line", "buckets_of", "key_index"]

K = TypeVar("K")


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
