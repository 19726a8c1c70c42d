"""Chunk checksums of a checkpoint's items: computed over parts of any size, checked lazily."""

from __future__ import annotations

import pytest
import xxhash

from pausepoint.checkpoints._chunks import ChunkCheck, chunk_sums
from pausepoint.errors import StoreError

DATA = bytes(range(256)) * 41  # 10,496 bytes: 10 chunks of 1,024 and a shorter one


def test_sums_do_not_depend_on_how_the_bytes_are_cut() -> None:
    expected = [xxhash.xxh3_64_intdigest(DATA[at : at + 1024]) for at in range(0, len(DATA), 1024)]
    assert list(chunk_sums([DATA], 1024)) == expected
    parts = [DATA[:1], DATA[1:1023], DATA[1023:5000], memoryview(DATA)[5000:5001], DATA[5001:]]
    assert list(chunk_sums(parts, 1024)) == expected
    assert list(chunk_sums([], 1024)) == []


def test_a_span_is_checked_once_and_damage_is_raised_after_on_damage() -> None:
    sums = memoryview(chunk_sums([DATA], 1024))
    damaged = bytearray(DATA)
    damaged[3000] ^= 1  # in chunk 2
    check = ChunkCheck(memoryview(bytes(damaged)), sums, 1024)
    told: list[str] = []
    check.on_damage = lambda: told.append("damaged")
    check.span(0, 2048)  # chunks 0 and 1: sound
    check.span(5, 5)  # an empty span reads nothing
    assert told == []
    with pytest.raises(StoreError, match="damaged"):
        check.span(2047, 2049)  # chunks 1 and 2
    assert told == ["damaged"]
    assert check.all() is False
    assert ChunkCheck(memoryview(DATA), sums, 1024).all() is True


def test_sums_that_do_not_cover_the_items_are_refused() -> None:
    sums = memoryview(chunk_sums([DATA], 1024))
    with pytest.raises(ValueError):
        ChunkCheck(memoryview(DATA + b"more"), sums[:-1], 1024)
    with pytest.raises(ValueError):
        ChunkCheck(memoryview(DATA), sums, 0)
