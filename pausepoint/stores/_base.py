"""The session store contract: an append-only log per session with a conditional append.

A store never interprets records: it keeps opaque JSON ``data`` with its ``kind`` and version,
plus a small ``SessionSummary`` the runtime computes at each append, so listings (an approval
inbox, an owner's sessions, a tenant's, the sessions whose pauses expire soon) need no JSON
parsing.
Every backend passes the conformance suite, ``pausepoint.testing.stores`` (a store of one's own
runs it too).

Beside the logs a store keeps an **event stream** and a **delivery outbox**: an append may carry
``Event``s (announcements of the pauses, answers and turn ends its records hold, made by the
runtime) which the store writes in the same transaction as the records, each with a position
``seq`` in the stream, plus one ``Delivery`` per webhook the event is for. So an event exists
exactly when its records do: a crash after the append loses no announcement, and an append that
failed announces nothing. Readers follow the stream by position (``read_events``, woken by
``wait_for_events``); webhook senders take due deliveries with a lease (``claim_deliveries``),
so several processes can drain one outbox without sending the same delivery at the same time.

**Durability.** Every append is atomic and, once it returns, visible to every reader and safe from
a crash of the process that made it. ``append(durable=True)`` (the default) promises more: the
records survive a crash of the machine or of the database server too, as far as the backend is
configured to keep that promise (SQLite ``synchronous="FULL"``, PostgreSQL ``synchronous_commit``
on, Redis ``appendfsync always``). ``durable=False`` lets the store make the append durable later:
the runtime passes it only for appends that nothing outside the session depends on yet (a
resume's claim before the model is called), and every later durable append of the same session
makes the earlier ones durable too, because each append is conditional on the ones before it
(the session's version) and the backends write their logs in order (SQLite's WAL, PostgreSQL's
WAL). See ``_journal.Journal`` for which appends are which.

**Checkpoints.** Beside each log a store keeps at most one ``Checkpoint``: opaque bytes the
runtime wrote after folding the log up to some version, so that a process with nothing cached
can fold only the records after it (``CheckpointStore``). A checkpoint is a base and the
extensions added to it since, in order: each extension takes the checkpoint from the version it
was at to a later one, so the runtime writes what a session added, not its whole state, until it
writes a new base. The log stays the source of truth: a checkpoint may be lost, is written
without waiting for stable storage, and the runtime checks it against the log before using it.
The store's part is small and exact: it keeps a checkpoint only for a version its log holds,
never replaces one with an older one (concurrent writers leave the latest), adds an extension
only to the version it was written after (in place of the last ones, when the runtime merges
them), and forgets the checkpoint with the session.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from ..errors import PayloadTooLarge, VersionConflict

__all__ = [
    "DEFAULT_MAX_RECORD_BYTES",
    "Delivery",
    "DeliveryState",
    "Event",
    "LogEntry",
    "LogSlice",
    "SessionStore",
    "SessionSummary",
    "StoreSecret",
    "Checkpoint",
    "CheckpointStore",
    "PARTIAL_BASE_KEPT",
    "REPLACED_BASES_KEPT",
    "check_entries",
    "check_replaces",
    "event_stream",
    "merges_extensions",
    "takes_keyword",
    "version_conflict",
]

DEFAULT_MAX_RECORD_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One record of a session's log: its 1-based position, its kind, its JSON."""

    version: int
    kind: str
    data: bytes


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """What listings need to know about a session, written atomically with each append.

    ``tenant`` is the tenant the session belongs to (its creator's; None: none, as in a
    single-tenant setup): listings filter by it, and the server confines callers to theirs."""

    session_id: str
    agent: str
    owner: str | None
    version: int
    created_at: datetime
    updated_at: datetime
    pending: int = 0
    next_expiry: datetime | None = None
    turn: int = 0
    tenant: str | None = None


@dataclass(frozen=True, slots=True)
class LogSlice:
    """The entries after some version, and the session's version when they were read."""

    version: int
    entries: list[LogEntry]


@dataclass(slots=True)  # not frozen: made on every append, and a frozen init costs several times more
class Event:
    """An announcement of what an append recorded: a pause, an answer, an expiry, a turn's end.

    ``id`` is unique and stable (receivers de-duplicate on it); ``data`` is the JSON body the
    runtime made; ``targets`` names the webhooks it is to be delivered to (only on the way in);
    ``seq`` is its position in the store's event stream, assigned by the store (0 before): later
    events have greater positions, and a reader that has seen position ``n`` misses nothing by
    reading after ``n`` (positions need not be consecutive).
    """

    id: str
    kind: str
    session_id: str
    agent: str
    at: datetime
    data: bytes
    targets: tuple[str, ...] = ()
    seq: int = 0


DeliveryState: TypeAlias = Literal["pending", "delivered", "failed"]


@dataclass(frozen=True, slots=True)
class Delivery:
    """One event on its way to one webhook (``target``): the outbox's row.

    ``attempts`` counts the tries made so far. A pending delivery is due at ``due_at``; a claim
    moves ``due_at`` to the end of its lease and hands out a fresh ``lease`` token, which
    ``settle_delivery`` must show.
    """

    id: int
    target: str
    event: Event
    state: DeliveryState
    attempts: int
    due_at: datetime
    updated_at: datetime
    last_error: str | None = None
    lease: str | None = None


@runtime_checkable
class SessionStore(Protocol):
    """An append-only log per session. Implementations must make ``append`` atomic.

    What a store promises, and how it is checked: the docstring of ``pausepoint.stores`` (and of
    this module, where the protocol is written: durability, events, deliveries, checkpoints) and
    the conformance suite (``pausepoint.testing.stores``). Any failure of the backend itself (a connection lost, a
    timeout, a full disk) is raised as ``pausepoint.errors.StoreError``, with the driver's error
    as its cause: never the driver's own exception.
    """

    #: the largest entry or event ``append`` takes, in bytes of its data (``PayloadTooLarge``
    #: past it); a store takes it as a keyword option, as the built-in ones and the suite's
    #: ``open_store(**options)`` do, with ``DEFAULT_MAX_RECORD_BYTES`` when it is not given
    max_record_bytes: int

    async def append(
        self,
        session_id: str,
        expected_version: int,
        entries: Sequence[LogEntry],
        summary: SessionSummary,
        events: Sequence[Event] = (),
        *,
        durable: bool = True,
    ) -> int:
        """Append ``entries`` if the session is at ``expected_version`` (0: it must not exist yet).

        Entries carry versions ``expected_version + 1`` onwards. ``events`` are written in the same
        transaction, each with a pending delivery per name in its ``targets``, due at once: at
        ``summary.updated_at``, the append's own time. With ``durable`` the append is on stable
        storage when this returns; without, it may get there later (see the module docstring).
        Returns the new version. Raises ``VersionConflict`` (nothing written) when the session is at
        another version, with ``details`` ``{"session_id", "expected", "actual"}``
        (``version_conflict`` makes one); ``PayloadTooLarge`` (nothing written) when an entry
        exceeds ``max_record_bytes``, with ``details`` ``{"size", "limit"}``; ``ValueError`` for
        entries that are no append (none, or versions not ``expected_version + 1`` onwards, in
        order) — ``check_entries`` checks all three.
        """
        ...

    async def read(self, session_id: str, after_version: int = 0) -> LogSlice | None:
        """The entries after ``after_version``; None if no such session."""
        ...

    async def get_summary(self, session_id: str) -> SessionSummary | None:
        """The session's summary, or None."""
        ...

    async def list_sessions(
        self,
        *,
        owner: str | None = None,
        agent: str | None = None,
        has_pending: bool | None = None,
        expiring_before: datetime | None = None,
        limit: int = 100,
        offset: int = 0,
        tenant: str | None = None,
    ) -> list[SessionSummary]:
        """Summaries matching every given filter, most recently updated first — sessions
        updated at the same time: the greater id first, ids compared as UTF-8 bytes —
        (``tenant``: the sessions of that tenant; None, like every filter left out: any)."""
        ...

    async def delete(self, session_id: str) -> bool:
        """Remove a session and its log; True if it existed."""
        ...

    async def close(self) -> None:
        """Release connections. The store may not be used afterwards."""
        ...

    # -- the event stream and the outbox --------------------------------------------------------

    async def read_events(self, after: int = 0, limit: int = 100) -> list[Event]:
        """Up to ``limit`` events positioned after ``after``, in order (``targets`` left empty)."""
        ...

    async def last_event(self) -> int:
        """The position of the latest event a reader can see now (0: none): follow the stream from here."""
        ...

    async def wait_for_events(self, after: int, max_wait: float) -> None:
        """Return once an event after ``after`` may exist (written by any process), or after
        ``max_wait`` seconds; ``read_events`` tells which. Cheap to call in a loop."""
        ...

    async def claim_deliveries(
        self, targets: Collection[str], now: datetime, lease: timedelta, limit: int = 50
    ) -> list[Delivery]:
        """Take up to ``limit`` pending deliveries to ``targets`` due at ``now``, oldest first.

        Each is leased until ``now + lease``: nobody else claims it meanwhile; if it is not
        settled by then it is due again (at-least-once).
        """
        ...

    async def settle_delivery(
        self, delivery: Delivery, now: datetime, *, error: str | None = None, retry_at: datetime | None = None
    ) -> bool:
        """Record a claimed delivery's try: delivered (no ``error``), due again at ``retry_at``,
        or failed for good (an ``error`` and no ``retry_at``). False, and nothing written, when
        the claim's lease was lost to another claim meanwhile."""
        ...

    async def list_deliveries(
        self, *, state: DeliveryState | None = None, target: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[Delivery]:
        """Deliveries matching every given filter, newest first."""
        ...

    async def requeue_delivery(self, delivery_id: int, now: datetime) -> bool:
        """Make a failed delivery pending again, due at ``now`` with no attempts counted; True if
        it was failed."""
        ...

    async def prune_events(self, before: datetime) -> int:
        """Delete events from before ``before`` with no delivery still pending or failed, and
        their settled deliveries. Returns how many events went. (A store may keep the latest
        event whatever its age: positions are never handed out twice.)"""
        ...


@runtime_checkable
class StoreSecret(Protocol):
    """A store that keeps a secret with its data (every built-in store does; a store of your own
    may leave it out)."""

    async def secret(self) -> bytes:
        """32 random bytes made once with the store's data, the same for every process and store
        object that opens it. The feed seals its event positions with them, so that an SSE id
        tells a reader nothing of how many events other sessions made; a store without it gets
        ids sealed with a key of the serving process, which only that process reads back."""
        ...


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A session's checkpoint: what the runtime wrote after folding its log up to ``version``.

    ``data`` is its base; ``extensions`` what was added to it since, oldest first (``version``
    is the latest extension's, or the base's when there is none). A store may give the base as
    a read-only ``memoryview`` instead of ``bytes`` (``SqliteSessionStore`` maps a large one
    from its file), so that reading it does not copy it; it compares equal to the same bytes.
    The runtime checks a view's items a chunk at a time, as it reads them, and bytes whole, at
    once.

    A store may also give a large base **in part**, so that a cold load reads what its turn
    needs rather than the history (``PostgresSessionStore`` and ``RedisSessionStore`` give its
    first bytes): ``data`` is then a read-only view of the base's whole length in which only
    some bytes are there yet, and ``fetch(start, stop)`` puts bytes ``start`` to ``stop - 1``
    there. The runtime calls it before it first reads any range, from the event loop's thread,
    and it blocks until the bytes are there, as reading a page of a mapped file does; it raises
    ``StoreError`` when they cannot be read. A store that gives a base in part keeps it
    readable for ``PARTIAL_BASE_KEPT`` seconds after a newer base replaced it, unless
    ``REPLACED_BASES_KEPT`` newer ones replaced it since, or the session was deleted (so that a
    busy session's replaced bases do not pile up); a process drops a state read from one before
    half of that time has passed, and reads the session again. A call that needs a range of a
    base gone sooner fails with ``StoreError``, and the next reads the session again.
    """

    version: int
    data: bytes | memoryview
    extensions: tuple[bytes, ...] = ()
    fetch: Callable[[int, int], None] | None = field(default=None, compare=False)

    def whole(self) -> Checkpoint:
        """This checkpoint with its base whole, in bytes (fetched, if it was given in part:
        blocking)."""
        if self.fetch is not None:
            self.fetch(0, len(self.data))
        return Checkpoint(self.version, bytes(self.data), self.extensions)


#: Seconds a base given in part stays readable after a newer one replaced it (``Checkpoint``).
PARTIAL_BASE_KEPT = 300.0
#: How many replaced bases of a session a store keeps, at most, within that time.
REPLACED_BASES_KEPT = 4


@runtime_checkable
class CheckpointStore(SessionStore, Protocol):
    """A store that keeps a checkpoint beside each session's log (see the module docstring).

    The built-in durable stores (SQLite, PostgreSQL, Redis) are; ``InMemorySessionStore`` is not
    (its sessions stay warm in the process that serves them). The runtime uses checkpoints when
    its store is one and folds the whole log otherwise.
    """

    async def write_checkpoint(self, session_id: str, version: int, data: bytes) -> bool:
        """Keep ``data`` as the base of the session's checkpoint at ``version`` (with no
        extensions), atomically, if the session exists with at least ``version`` records and has
        no checkpoint at ``version`` or later. Returns whether it was kept. Need not wait for
        stable storage."""
        ...

    async def extend_checkpoint(
        self, session_id: str, after: int, version: int, data: bytes, *, replaces: int = 0
    ) -> bool:
        """Add ``data`` to the session's checkpoint as an extension taking it from ``after`` to
        ``version``, in place of its last ``replaces`` extensions, atomically, if the session
        exists with at least ``version`` records and its checkpoint is at ``after`` exactly
        (``after < version``) with at least ``replaces`` extensions. Returns whether it was kept.
        Need not wait for stable storage. (An extension that replaces others holds what they
        held: the runtime merges them. A store of one's own whose method takes no ``replaces``
        is given extensions one by one.) Raises ``ValueError`` for a negative ``replaces``."""
        ...

    async def read_checkpoint(self, session_id: str) -> Checkpoint | None:
        """The session's checkpoint, or None (no session, or none written yet)."""
        ...


def version_conflict(session_id: str, expected: int, actual: int) -> VersionConflict:
    """The error every store raises when an append finds the session at another version."""
    return VersionConflict(
        f"session {session_id!r} is at version {actual}, not {expected}",
        session_id=session_id,
        expected=expected,
        actual=actual,
    )


def check_entries(
    expected_version: int, entries: Sequence[LogEntry], max_record_bytes: int, events: Sequence[Event] = ()
) -> None:
    """The checks of ``append``'s arguments every store makes before writing anything: entries
    there are (``ValueError``), their versions ``expected_version + 1`` onwards in order
    (``ValueError``), each within ``max_record_bytes`` (``PayloadTooLarge``)."""
    if not entries:
        raise ValueError("append needs at least one entry")
    for offset, entry in enumerate(entries, start=1):
        if entry.version != expected_version + offset:
            raise ValueError(f"entry versions must follow {expected_version} consecutively")
        if len(entry.data) > max_record_bytes:
            raise PayloadTooLarge(
                f"a {entry.kind!r} record of {len(entry.data)} bytes exceeds the store's limit of "
                f"{max_record_bytes} bytes",
                size=len(entry.data),
                limit=max_record_bytes,
            )
    for event in events:
        if len(event.data) > max_record_bytes:
            raise PayloadTooLarge(
                f"a {event.kind!r} event of {len(event.data)} bytes exceeds the store's limit of "
                f"{max_record_bytes} bytes",
                size=len(event.data),
                limit=max_record_bytes,
            )


def check_replaces(replaces: int) -> None:
    """Shared argument check for ``extend_checkpoint``: ``replaces`` is 0 or more."""
    if replaces < 0:
        raise ValueError(f"replaces must be 0 or more, not {replaces}")


def event_stream(store: SessionStore) -> Hashable:
    """What names the event stream ``store`` reads and writes. Store objects that share one (two
    ``SqliteSessionStore`` on one file, two ``PostgresSessionStore`` through one DSN and schema)
    read the same events, so a reader of every agent's events (the feed, ``/readyz``) follows
    one of them. A store without an ``event_source`` is its own."""
    source = getattr(store, "event_source", None)
    return ("object", id(store)) if source is None else source


def merges_extensions(store: CheckpointStore) -> bool:
    """Whether ``store.extend_checkpoint`` takes ``replaces`` (every built-in store's does; one
    of a user's own written before it could is given extensions one by one)."""
    if hasattr(type(store), "extend_checkpoint"):
        return _takes_replaces(type(store))
    return takes_keyword(store.extend_checkpoint, "replaces")  # a wrapper's, found by its __getattr__


@functools.cache
def _takes_replaces(kind: type[CheckpointStore]) -> bool:
    return takes_keyword(kind.extend_checkpoint, "replaces")


def takes_keyword(method: Callable[..., Any], name: str) -> bool:
    """Whether ``method`` may be given ``name`` by keyword: it names it, or takes ``**kwargs``
    (a wrapper that hands every argument on to the store it wraps)."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):  # pragma: no cover - a method without a signature
        return False
    return any(
        p.kind is inspect.Parameter.VAR_KEYWORD or (p.name == name and p.kind is not inspect.Parameter.POSITIONAL_ONLY)
        for p in parameters
    )
