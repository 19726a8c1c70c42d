"""The lazy list and dict of a state loaded from a checkpoint read like the built-in ones."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pydantic import TypeAdapter

from pausepoint._lazy import LazyDict, LazyList


@dataclass
class Item:
    n: int


ADAPTER = TypeAdapter(Item)


def raw(n: int) -> bytes:
    """An item not decoded yet: its JSON."""
    return ADAPTER.dump_json(Item(n))


def test_a_lazy_list_decodes_what_is_read_once() -> None:
    items = LazyList([raw(0), raw(1), Item(2), raw(3)], ADAPTER)
    assert len(items) == 4
    assert [type(i) for i in items.raw_items()] == [bytes, bytes, Item, bytes]
    first = items[0]
    assert first == Item(0) and items[0] is first  # decoded once, then the same object
    assert [type(i) for i in items.raw_items()] == [Item, bytes, Item, bytes]
    assert items[-1] == Item(3)
    assert items[1:3] == [Item(1), Item(2)]
    assert list(items) == [Item(0), Item(1), Item(2), Item(3)]
    assert list(reversed(items)) == [Item(3), Item(2), Item(1), Item(0)]
    assert Item(2) in items and Item(9) not in items
    assert items == [Item(0), Item(1), Item(2), Item(3)]
    assert items.index(Item(3)) == 3 and items.count(Item(1)) == 1
    items.append(Item(4))
    assert items.pop() == Item(4) and items.pop(0) == Item(0)
    assert items.copy() == [Item(1), Item(2), Item(3)]
    assert [*items] == list(items) == items[:]
    with pytest.raises(IndexError):
        items[10]


def test_a_lazy_dict_decodes_what_is_read_once() -> None:
    entries = LazyDict([("a", raw(1)), ("b", raw(2)), ("c", Item(3))], ADAPTER)
    assert len(entries) == 3 and "a" in entries and list(entries) == ["a", "b", "c"]
    assert entries.get("a") == Item(1) and entries.get("a") is entries["a"]
    assert entries.get("zz") is None and entries.get("zz", 5) == 5
    with pytest.raises(KeyError):
        entries["zz"]
    assert dict(entries) == {"a": Item(1), "b": Item(2), "c": Item(3)}
    assert {**entries} == dict(entries)
    assert all(type(v) is Item for v in entries.values())
    assert list(entries.items()) == [("a", Item(1)), ("b", Item(2)), ("c", Item(3))]
    fresh = LazyDict([("a", raw(1)), ("b", raw(2))], ADAPTER)
    assert fresh.pop("a") == Item(1) and fresh.pop("zz", None) is None
    assert fresh.setdefault("b") == Item(2)
    assert fresh.copy() == {"b": Item(2)} and fresh == {"b": Item(2)}
    with pytest.raises(KeyError):
        fresh.pop("zz")
