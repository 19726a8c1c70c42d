"""Checkpoints against a store: ``load``, a session's state from its checkpoint and the records
after it, and ``save``, a state's checkpoint written (an extension, or a new base) — the two
entry points the runtime calls (``runtime._sessions``).

A process with nothing cached loads a session by reading its checkpoint and folding only the
records after it, instead of folding the whole log. The log stays the only source of truth: a
checkpoint is a cache of the fold, checked on every read and thrown away (the whole log is
folded instead) unless all of this holds —

- its **schema fingerprint** is this code's: a hash of the JSON schemas of ``SessionState``'s
  fields, so any change to the state's shape (a field added, a type changed) retires every
  checkpoint written before it, with no version number to remember to bump (``_format``);
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

**Extensions.** A checkpoint is a base and the extensions written after it (the store keeps
them in order, each only on top of the one before: ``CheckpointStore.extend_checkpoint``). An
extension (``_encode``) holds every value and what the session added and touched since the
version it extends: an entry never read is as the checkpoint already has it, so an extension
costs what the session added and touched, not its history. Loading folds the extensions into
the base in order (``_decode``); each is checked as a base is (format, fingerprint, checksum),
they must chain from the base, and the last one's digest ties the whole to the log. An extension
may also replace the last extensions with one that holds what they held too
(``extend_checkpoint(..., replaces=k)``): it extends the version before them, and holds the
items appended since and the entries they set or removed, as the state has them now. The writer
of a long base merges as a binary counter carries (``_replaced``): a new extension replaces the
last ones that span, each, no more records than it and those after them, so the extensions of n
checkpoint writes are about log2(n), and a cold load folds a few. A new base is written instead
once the extensions are many for the base's size, or large (``BYTES_PER_EXTENSION``,
``MAX_EXTENSIONS``, ``EXTENSIONS_SHARE``, ``MERGED_SHARE``), so a cold load never reads much more
than a base.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import weakref
from collections.abc import Callable
from typing import cast

from ..errors import StoreError
from ..session._lineage import note_last
from ..session._records import decode_record
from ..session._state import SessionState
from ..stores import PARTIAL_BASE_KEPT, CheckpointStore
from ..stores._base import merges_extensions
from ._books import Chain, Link, Partial, books
from ._decode import decode_chain, decode_state, extend
from ._encode import Written, encode
from ._format import Header, fetch_head, read_header, record_digest

__all__ = [
    "BYTES_PER_EXTENSION",
    "EXTENSIONS_SHARE",
    "MAX_EXTENSIONS",
    "MERGED_FROM_BYTES",
    "MERGED_SHARE",
    "MIN_EXTENSIONS",
    "load",
    "save",
]

log = logging.getLogger("pausepoint")


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
            fetch_head(checkpoint)
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
    note_last(state, found.entries[-1])
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
# one per BYTES_PER_EXTENSION of its base (at least MIN_EXTENSIONS, at most MAX_EXTENSIONS), and
# they add up to at most EXTENSIONS_SHARE of the base. A small session's base is not cheap to
# write again at every checkpoint: it was most of what checkpoints cost a warm session (on
# SQLite, a served cycle's CPU over none: +71 % at 10 prior cycles with a base each time, +29 %
# with MIN_EXTENSIONS 4; +75 % against +48 % at 300), while a cold load of a base and 4 small
# extensions costs about what one of the base alone does. From a base of MERGED_FROM_BYTES
# (about 7,000 approval cycles), where a base costs a serving process more than merging does,
# the extensions are merged as they go (``_replaced``): a chain then rarely holds more than 4 or
# 5, and what ends it is their bytes, MERGED_SHARE of the base. So what a base costs, spread over
# the checkpoints before the next one, stops growing with the history (at 10,000 approval cycles,
# a base every 50 or so checkpoints, against one every 17 unmerged). The share is small because
# every cold load folds each byte of the extensions (about 0.7 µs a KB, besides 60 to 150 µs for
# each extension however small). Below that size merging saves no base (the 4 to 16 extensions a
# base allows add up to about 2 % of it too) and costs its rewrites: measured at 1,000 cycles, 5
# to 10 % more CPU a served cycle.
BYTES_PER_EXTENSION = 1024 * 1024
MAX_EXTENSIONS = 16
MIN_EXTENSIONS = 4
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
    written = encode(state, digest, None)
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
    note_last(loaded, found.entries[0])  # the record it was taken after: the last of its log
    return loaded


def _extension(state: SessionState, digest: bytes, chain: Chain, merges: bool) -> Written | None:
    """The extension of ``chain`` to write for ``state`` (merged with the last ones of no more
    records than it and each other, for a long base if the store ``merges``), or None when a
    new base is due."""
    links = chain.links
    merging = merges and chain.base_bytes >= MERGED_FROM_BYTES
    replaces = _replaced(links, state.version - chain.version) if merging else 0
    kept = links[: len(links) - replaces]
    if len(kept) >= min(MAX_EXTENSIONS, max(MIN_EXTENSIONS, chain.base_bytes // BYTES_PER_EXTENSION)):
        return None
    written = encode(state, digest, chain, replaces)
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


def _extended(state: SessionState, written: Written, idle: bool) -> None:
    """Bring ``state``'s chain up to the extension just written from it."""
    chain = cast(Chain, books(state).chain)
    if idle:
        header = read_header(written.data, verify=False)
        if header is None or not extend(state, written.data, header, written=written, replaces=written.replaces):
            state.durable_version = -1  # not to be trusted: the next call reads the store again
            return
    else:
        for name, keys in written.removed.items():
            getattr(state, name).removed.difference_update(keys)
        chain.extended(cast(Link, written.link), written.lengths, written.replaces)
    chain.wrote(written.sums, written.removed)
