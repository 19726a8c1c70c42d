"""The lazy list and dict of a state loaded from a checkpoint read like the built-in ones."""

from __future__ import annotations

import itertools
from array import array
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from pausepoint.checkpoints import _key_index
from pausepoint.checkpoints._decode import _bucket_parser
from pausepoint.checkpoints._format import layout
from pausepoint.checkpoints._key_index import KeyIndex, key_index
from pausepoint.checkpoints._lazy_dict import LazyDict
from pausepoint.checkpoints._lazy_list import LazyList
from pausepoint.checkpoints._slices import Slices


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


def unread(*numbers: int) -> LazyList[Item]:
    """A list loaded from a checkpoint: its items still in the checkpoint's bytes, none cut out."""
    items = [raw(n) for n in numbers]
    data = b"header" + b"".join(items)
    bounds = array("I", itertools.accumulate(map(len, items), initial=0))
    return LazyList.unread(Slices(memoryview(data), len(b"header"), memoryview(bounds)), ADAPTER)


def source_of(*numbers: int) -> Slices:
    """The items an extension appended, as it holds them."""
    items = [raw(n) for n in numbers]
    bounds = array("I", itertools.accumulate(map(len, items), initial=0))
    return Slices(memoryview(b"".join(items)), 0, memoryview(bounds))


def test_a_list_loaded_from_bytes_cuts_out_and_decodes_only_what_is_read() -> None:
    items = unread(0, 1, 2, 3)
    assert list.__len__(items) == 0 and items  # its base's items fill no slot of the list itself
    assert len(items) == 4 and items[2] == Item(2) and items[-1] == Item(3)
    assert items[2] is items[2]
    assert list(items) == [Item(0), Item(1), Item(2), Item(3)] and items[1:3] == [Item(1), Item(2)]
    with pytest.raises(IndexError):
        items[4]


def test_slices_whose_bounds_are_in_their_data_check_the_bounds_before_the_item() -> None:
    """A checkpoint's bounds lie in the bytes its chunk sums check: reading an item checks the
    span of its two bounds, then its own; a copied run, its bounds and then its bytes."""
    items = [raw(n) for n in range(3)]
    bounds = array("I", itertools.accumulate(map(len, items), initial=0)).tobytes()
    data = memoryview(bounds + b"".join(items))
    spans: list[tuple[int, int]] = []
    source = Slices(data, len(bounds), data[: len(bounds)].cast("I"), lambda *span: spans.append(span), 0)
    assert source[1] == raw(1) and spans == [(4, 12), (len(bounds) + len(items[0]), len(bounds) + 2 * len(items[0]))]
    spans.clear()
    assert source[-1] == raw(2) and spans[0] == (8, 16)  # the last item: its bounds are the last two
    spans.clear()
    run, run_bounds = source.run(1, 3)
    assert run.tobytes() == raw(1) + raw(2) and list(run_bounds) == list(data[: len(bounds)].cast("I"))[1:]
    assert spans == [(4, 16), (len(bounds) + len(items[0]), len(data))]


def test_a_list_loaded_from_bytes_is_written_from_them_until_its_items_move() -> None:
    items = unread(0, 1, 2)
    items[1]  # reading an item leaves it in its place
    items.append(Item(3))
    items += [Item(4)]
    packed = items.packed()
    assert packed is not None
    source, appended = packed
    data, bounds = source.run(0, len(source))
    assert len(source) == 3 and appended == [Item(3), Item(4)]
    assert data.tobytes() == raw(0) + raw(1) + raw(2) and list(bounds)[-1] == len(data)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda xs: xs.insert(0, Item(9)), [9, 0, 1, 2]),
        (lambda xs: xs.pop(0), [1, 2]),
        (lambda xs: xs.pop(), [0, 1]),
        (lambda xs: xs.remove(Item(1)), [0, 2]),
        (lambda xs: xs.__delitem__(slice(0, 2)), [2]),
        (lambda xs: xs.__setitem__(1, Item(7)), [0, 7, 2]),
        (lambda xs: xs.reverse(), [2, 1, 0]),
        (lambda xs: xs.sort(key=lambda i: -i.n), [2, 1, 0]),
        (lambda xs: xs.__imul__(2), [0, 1, 2, 0, 1, 2]),
        (lambda xs: xs.clear(), []),
    ],
)
def test_a_change_that_moves_items_keeps_every_item_right(change: Any, expected: list[int]) -> None:
    items = unread(0, 1, 2)
    change(items)
    assert [i.n for i in items] == expected
    assert items.packed() is None  # written item by item from then on
    assert [i if type(i) is bytes else ADAPTER.dump_json(i) for i in items.raw_items()] == [raw(n) for n in expected]


LIST_OPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "get",
                "slice",
                "append",
                "extend",
                "iadd",
                "pop",
                "insert",
                "del",
                "set",
                "in",
                "len",
                "reversed",
                "hold",
                "unread_from",
                "raw_since",
                "bisect",
                "ne",
                "extend_self",
            ]
        ),
        st.integers(-12, 12),
        st.integers(100, 200),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(base=st.integers(0, 6), extended=st.integers(0, 4), ops=LIST_OPS)
def test_a_list_loaded_from_bytes_behaves_as_a_list(base: int, extended: int, ops: list[tuple[str, int, int]]) -> None:
    """A base's items (not in the list's storage), an extension's (placeholders), then any
    reads and changes: the list answers as a plain list of the same items would, and what a
    checkpoint writer reads of it is those items."""
    items = unread(*range(base))
    items.extend_unread(source_of(*range(base, base + extended)))
    model = [Item(n) for n in range(base + extended)]
    for name, at, value in ops:
        inside = -len(model) <= at < len(model)
        if name == "get":
            if inside:
                assert items[at] == model[at]
            else:
                with pytest.raises(IndexError):
                    items[at]
        elif name == "slice":
            assert items[at:] == model[at:] and items[:at:2] == model[:at:2]
        elif name == "append":
            items.append(Item(value))
            model.append(Item(value))
        elif name in ("extend", "iadd"):
            more = [Item(value), Item(value + 1)]
            if name == "extend":
                items.extend(more)
            else:
                items += more
            model.extend(more)
        elif name == "extend_self":
            items.extend(items)
            model.extend(list(model))
        elif name == "pop" and inside:
            assert items.pop(at) == model.pop(at)
        elif name == "insert":
            items.insert(at, Item(value))
            model.insert(at, Item(value))
        elif name == "del" and inside:
            del items[at]
            del model[at]
        elif name == "set" and inside:
            items[at] = model[at] = Item(value)
        elif name == "hold" and inside:
            items.hold(at, Item(value))
            model[at] = Item(value)
        elif name == "in":
            assert (Item(value) in items) == (Item(value) in model) and (Item(0) in items) == (Item(0) in model)
        elif name == "len":
            assert len(items) == len(model) and bool(items) == bool(model)
        elif name == "reversed":
            assert list(reversed(items)) == model[::-1]
        elif name == "unread_from" and 0 <= at <= len(model):
            start = max(at, len(model) - 3)  # the last items, written as an extension holds them
            items.unread_from(start, source_of(*(i.n for i in model[start:])))
        elif name == "raw_since" and 0 <= at <= len(model):
            assert [ADAPTER.validate_json(i) if type(i) is bytes else i for i in items.raw_since(at)] == model[at:]
        elif name == "bisect":
            assert bisect_left(items, value, key=lambda i: i.n) == bisect_left(model, value, key=lambda i: i.n)
        elif name == "ne":
            assert (items != model) is False and (items != [*model, Item(0)]) is True
    assert list(items) == model and len(items) == len(model)
    packed = items.packed()
    if packed is not None:  # still written from its source: that many items as loaded, then the rest
        source, after = packed
        assert [ADAPTER.validate_json(source[i]) for i in range(len(source))] + [
            ADAPTER.validate_json(i) if type(i) is bytes else i for i in after
        ] == model
    assert [ADAPTER.validate_json(i) if type(i) is bytes else i for i in items.raw_items()] == model


def test_copies_of_a_list_loaded_from_bytes_hold_decoded_items() -> None:
    items = unread(0, 1)
    added = items + [Item(2)]  # noqa: RUF005 - the operator itself is under test
    assert added == [Item(0), Item(1), Item(2)] and type(added) is list
    assert items * 2 == [Item(0), Item(1), Item(0), Item(1)] and 2 * items == items * 2
    assert items.copy() == [Item(0), Item(1)] and all(type(i) is Item for i in items.copy())


def indexed(keys: list[str]) -> LazyDict[str, Item]:
    """A dict of ``keys`` (the n-th to ``Item(n)``) as a base checkpoint lays it out: its keys
    in buckets, none parsed yet."""
    items = [raw(n) for n in range(len(keys))]
    bounds = array("I", itertools.accumulate(map(len, items), initial=0))
    source = Slices(memoryview(b"".join(items)), 0, memoryview(bounds))
    lines = key_index(keys)
    field = next(f for f in layout()[0] if f.name == "calls")  # a dict keyed by str
    return LazyDict.indexed(KeyIndex(lines, _bucket_parser(field), len(keys)), source, ADAPTER)


def test_a_dict_loaded_from_bytes_cuts_out_and_decodes_only_what_is_read() -> None:
    entries = indexed(["a", "b", "c"])
    assert len(entries) == 3 and "b" in entries and list(entries) == ["a", "b", "c"]
    assert entries["b"] == Item(1) and entries["b"] is entries["b"]
    assert [value for _, value in entries.raw_items()] == [0, Item(1), 2]  # places in the source until read
    assert entries.source is not None and entries.source[2] == raw(2)
    entries["d"] = Item(4)
    assert entries.pop("a") == Item(0) and entries.get("c") == Item(2)
    assert dict(entries) == {"b": Item(1), "c": Item(2), "d": Item(4)} == entries


def test_an_extensions_entries_stay_in_its_bytes_until_read() -> None:
    """Entries an extension sets (one the base has, one new) are places past the base's: read,
    they decode from the extension's bytes; a new base copies the base's own places and takes
    the extension's as JSON; a writer of extensions gets them as JSON."""
    entries = indexed(["a", "b", "c"])
    cuts: list[tuple[int, int]] = []
    later = [raw(10), raw(11)]
    bounds = array("I", itertools.accumulate(map(len, later), initial=0))
    source = Slices(memoryview(b"".join(later)), 0, memoryview(bounds), lambda start, stop: cuts.append((start, stop)))
    entries.extend_unread(["b", "d"], source)
    assert cuts == [] and not entries.touched  # nothing cut out, nothing noted as changed
    assert dict(entries.raw_items()) == {"a": 0, "b": raw(10), "c": 2, "d": raw(11)}
    assert entries.stored("d") == raw(11) and entries.stored("a") == raw(0)
    keys, values, _ = entries.base_layout()
    assert values == [0, raw(10), 2, raw(11)] and keys[1] == "b" and keys[3] == "d"
    assert entries["b"] == Item(10) and entries["d"] == Item(11) and entries["a"] == Item(0)
    assert list(entries) == ["a", "b", "c", "d"] and cuts  # cut out when read
    with pytest.raises(ValueError):
        entries.extend_unread(["e"], source)


def test_a_dict_loaded_with_a_key_index_parses_only_the_buckets_it_looks_in() -> None:
    keys = [f"k{n}" for n in range(200)]
    entries = indexed(keys)
    assert dict.__len__(entries) == 0 and entries  # nothing parsed, and not empty
    assert entries["k7"] == Item(7) and "k8" in entries and "nope" not in entries
    assert 0 < dict.__len__(entries) < 200  # the buckets of k7, k8 and "nope" only
    assert entries.get("k150") == Item(150) and entries.get("nope", 1) == 1
    assert list(entries) == keys and len(entries) == 200  # every key, in its place


@dataclass
class Op:
    name: str
    key: str
    value: int = 0


KEYS = st.sampled_from([f"k{n}" for n in range(70)] + ["new1", "new2", "new3"])
OPS = st.lists(
    st.builds(
        Op,
        st.sampled_from(
            ["get", "in", "set", "del", "pop", "setdefault", "len", "bool", "keys", "popitem", "drop", "or"]
        ),
        KEYS,
        st.integers(100, 200),
    ),
    max_size=40,
)


def apply(op: Op, entries: LazyDict[str, Item], model: dict[str, Item]) -> None:
    """Do ``op`` to the lazy dict and to a dict, and check that they answer alike."""
    if op.name == "get":
        assert entries.get(op.key) == model.get(op.key)
    elif op.name == "in":
        assert (op.key in entries) == (op.key in model)
    elif op.name == "set":
        entries[op.key] = model[op.key] = Item(op.value)
    elif op.name in ("del", "drop"):
        if op.key in model:
            del model[op.key]
            if op.name == "drop":
                entries.drop(op.key)
            else:
                del entries[op.key]
        else:
            with pytest.raises(KeyError):
                del entries[op.key]
    elif op.name == "pop":
        assert entries.pop(op.key, None) == model.pop(op.key, None)
    elif op.name == "setdefault":
        assert entries.setdefault(op.key, Item(op.value)) == model.setdefault(op.key, Item(op.value))
    elif op.name == "len":
        assert len(entries) == len(model)
    elif op.name == "bool":
        assert bool(entries) == bool(model)
    elif op.name == "keys":
        assert list(entries.keys()) == list(model)
    elif op.name == "popitem" and model:
        assert entries.popitem() == model.popitem()
    elif op.name == "or":
        other = {op.key: Item(op.value)}
        assert list((entries | other).items()) == list((model | other).items())
        assert list((other | entries).items()) == list((other | model).items())


def loaded(size: int) -> tuple[LazyDict[str, Item], dict[str, Item]]:
    """``size`` keys loaded with a key index (``indexed``), and the plain dict they stand for."""
    keys = [f"k{n}" for n in range(size)]
    return indexed(keys), {key: Item(n) for n, key in enumerate(keys)}


@settings(max_examples=300, deadline=None)
@given(size=st.integers(0, 70), per_bucket=st.sampled_from([1, 4, 32]), ops=OPS)
def test_a_dict_loaded_with_a_key_index_behaves_as_a_dict(size: int, per_bucket: int, ops: list[Op]) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_key_index, "KEYS_PER_BUCKET", per_bucket)
        entries, model = loaded(size)
    for op in ops:
        apply(op, entries, model)
    assert list(entries.items()) == list(model.items())  # the same entries, in the same order
    assert entries == model


@settings(max_examples=200, deadline=None)
@given(
    size=st.integers(1, 70),
    per_bucket=st.sampled_from([1, 4, 32]),
    ops=st.lists(st.builds(Op, st.sampled_from(["get", "in", "set"]), KEYS, st.integers(100, 200)), max_size=20),
)
def test_a_base_written_from_a_key_index_copies_its_lines(size: int, per_bucket: int, ops: list[Op]) -> None:
    """Keys only looked up and added since loading: a new base's entries and key index, written
    without parsing every bucket, are what indexing the whole dict gives."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_key_index, "KEYS_PER_BUCKET", per_bucket)
        entries, model = loaded(size)
        for op in ops:
            apply(op, entries, model)
        laid_keys, values, lines = entries.base_layout()
        if lines is None:  # the bucket count changed: the index is made again, from every key
            assert _key_index.bucket_count(len(model)) != _key_index.bucket_count(size) and laid_keys == list(model)
        else:
            assert lines == key_index(list(model))
    assert [value if type(value) is not int else Item(value) for value in values] == list(model.values())
    assert all(key in (None, expected) for key, expected in zip(laid_keys, model, strict=True))


def test_a_lookup_in_a_key_index_finds_what_a_dict_would() -> None:
    """Keys of other types than the dict's: equal ones are found, others are not, unhashable
    ones raise TypeError, as with a dict."""
    entries = indexed(["a", "b"])
    assert "a" in entries and entries.get(None) is None and entries.get(1.5) is None and (1,) not in entries
    numbered = LazyDict.indexed(
        KeyIndex(key_index([1, 2]), _bucket_parser(next(f for f in layout()[0] if f.name == "detached")), 2),
        entries.source,  # type: ignore[arg-type]
        ADAPTER,
    )
    assert 1.0 in numbered and True in numbered and numbered[2.0] == Item(1) and "1" not in numbered
    with pytest.raises(TypeError):
        [] in entries  # noqa: B015 - the lookup itself is under test
