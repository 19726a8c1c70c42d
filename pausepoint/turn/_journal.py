"""How a call's records reach the store: ``Journal`` (what a call adds, written at its flush
points) over ``Appender`` (one conditional append, with the events announcing the records).

``Turn`` and ``Chat`` add records to a ``Journal`` as they make them; the journal folds each into
the session's state at once and appends them to the store only at the flush points its
docstring lists, each for a reason. ``LocalSessions.journal`` makes one wired to the agent's
cache of sessions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import TypedDict

from ..content._messages import Message
from ..errors import ConcurrentUpdate, StoreError, VersionConflict
from ..session._lineage import note_last
from ..session._records import (
    CallAnswered,
    CallCompleted,
    CallDecided,
    CallPaused,
    GrantRevoked,
    MessageAdded,
    PauseEscalated,
    Record,
    TurnEnded,
    decode_record,
    encode_record,
)
from ..session._state import SessionState
from ..stores import Event, LogEntry, SessionStore
from ..stores._base import takes_keyword
from ._events import announce
from ._telemetry import Telemetry

__all__ = ["Appender", "Journal"]

_QUIET = Telemetry(tracing=False)

# What another writer may append meanwhile without changing what a call's pending records depend
# on (``Journal.absorb_unrelated``).
_ABSORBED = frozenset({"abort_requested", "grant_revoked"})


class Appender:
    """How an agent's records reach its store: one conditional append carrying the events that
    announce them (``_events``; written in the same transaction) and the durability hint — as
    far as the store's ``append`` takes them (the built-in stores take both; one written
    against an older protocol may take neither, and then every append is durable).
    """

    def __init__(
        self,
        store: SessionStore,
        targets: Mapping[str, tuple[str, ...]],
        tenants: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        takes = _append_takes(store)
        self.store = store
        #: event kind -> the webhooks it goes to; None when the store keeps no events
        self.targets = targets if "events" in takes else None
        #: a webhook limited to some tenants -> those tenants (``Webhook.tenants``)
        self.tenants = tenants
        #: whether the store's append takes ``durable``
        self.durable_hint = "durable" in takes

    async def append(
        self,
        state: SessionState,
        base: int,
        records: Sequence[Record],
        entries: Sequence[LogEntry],
        now: datetime,
        *,
        durable: bool = True,
    ) -> None:
        """Append ``entries`` — ``records`` encoded, already folded into ``state`` — if the
        session is at version ``base``, with the session's summary as of ``now`` and the events
        announcing them. Raises ``VersionConflict`` (nothing written) when it is at another."""
        session_id = state.session_id
        summary = state.summary(now)
        extra: _AppendOptions = {}
        if self.targets is not None:
            extra["events"] = announce(state, records, entries, now, self.targets, self.tenants)
        if self.durable_hint:
            extra["durable"] = durable
        await self.store.append(session_id, base, entries, summary, **extra)
        if entries:
            note_last(state, entries[-1])  # the log ``state`` is of ends with it (``session._lineage``)


class _AppendOptions(TypedDict, total=False):
    """The arguments of ``SessionStore.append`` a store written against an older protocol lacks."""

    events: Sequence[Event]
    durable: bool


def _append_takes(store: SessionStore) -> set[str]:
    """Which of ``events`` and ``durable`` the store's ``append`` takes by keyword (``takes_keyword``)."""
    return {name for name in ("events", "durable") if takes_keyword(store.append, name)}


class Journal:
    """Folds new records into a session's state and appends them to the store at flush points.

    ``on_message`` sees each message the new records add to the history, as it is added (a
    tool message appears when the last result of its batch arrives).

    A turn writes what it adds in as few appends as its promises allow. Each append is one
    conditional append (the only arbiter between writers) carrying its events in the same
    transaction. The flush points, and why each one is needed:

    1. **A resume's claims, before anything runs** (``Chat._resume``, also ``settle_expired``'s
       expiry claims). The conditional append decides which of two racing resumes owns the
       pauses before either calls the model or a tool. *Not durable* when only the model runs
       next: a power loss before the next durable append loses the claim, and with it nothing
       that has happened outside the session (the model call has no side effect; the pause is
       open again). *Durable* when a restarted tool that must not run twice runs next, and for
       a detached turn (the caller is told it runs).
    2. **A batch of calls, before a tool that must not run twice starts** (``Turn.run_model``):
       the calls are in the log, durably, before any side effect, so a crash mid-call leaves a
       call the next process settles as of unknown outcome, never runs again. This append also
       carries the results of the batches before it.
    3. **The end of the call** (``Turn.end``), before the caller gets the response: durable, so
       what a caller was told — a pause to answer, a tool's result — survives any crash.
    4. **The start of a detached turn** (``TurnStarted``): durable, the caller is told it runs.
    5. **Between writers** (``Turn.proceed``, after restarted tools ran): the append brings in
       what another process wrote meanwhile, so exactly one of them sees the batch complete and
       calls the model. Not durable (the end is).

    There is no flush between a batch's results and the next model call: the results ride with
    the next append (2 or 3). If that model call fails, ``Turn`` writes them before the error
    reaches the caller (``Turn._after_model_failure``); only a crash during it loses them, and the next
    process then settles those calls as of unknown outcome (an idempotent one runs again), as
    for a crash during the tool itself.

    Durable appends wait for stable storage as the store is configured (``stores._base``); a
    durable append makes the session's earlier non-durable ones durable too. A store whose
    ``append`` takes no ``durable`` argument makes every append durable.
    """

    def __init__(
        self,
        appender: Appender,
        state: SessionState,
        reload: Callable[[], Awaitable[SessionState]],
        remember: Callable[[SessionState], None],
        *,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.store = appender.store
        self.state = state
        self.pending: list[Record] = []
        self.written: list[Record] = []  # what its flushes wrote
        self.dispatched: set[str] = set()  # the calls whose tools this call started (``runtime._stopped``)
        self.on_message: Callable[[Message], None] | None = None
        # records added already encoded (``add_encoded``), by id, beside the record (kept alive,
        # so that its id is never another's): their bytes are written as they are
        self._encoded: dict[int, tuple[Record, bytes]] = {}
        self._appender = appender
        self._reload = reload
        self._remember = remember
        self._telemetry = telemetry or _QUIET

    def add(self, *records: Record) -> None:
        for record in records:
            messages = self.state.messages
            before = len(messages)
            self.state.apply(record)
            self.pending.append(record)
            if self.on_message is not None:
                for message in messages[before:]:
                    self.on_message(message)

    def add_encoded(self, *encoded: tuple[Record, bytes]) -> None:
        """``add``, for records already encoded as ``encode_record`` encodes them (each with its
        data, to measure it before it is added): nothing is encoded twice."""
        for record, data in encoded:
            self._encoded[id(record)] = (record, data)
            self.add(record)

    def _bytes(self, record: Record) -> bytes:
        kept = self._encoded.get(id(record))
        return kept[1] if kept is not None and kept[0] is record else encode_record(record)

    async def flush(self, now: datetime, *, rebase: bool = True, durable: bool = True) -> None:
        """Append pending records with a conditional append on the session's version (durably,
        unless ``durable`` is False: see the class docstring).

        If another writer got in first, records that do not depend on the history — results
        and answers of calls this call has already claimed — are replayed on the fresh state
        and appended again (``rebase``); anything else raises ``ConcurrentUpdate``. Records
        that change nothing the pending ones depend on (requests to abort a detached turn,
        revocations of grants they do not use: ``absorb_unrelated``) are taken in and everything
        is appended again (unless a turn end is pending: it is computed again by ``Turn.end``).
        """
        while self.pending:
            state = self.state
            base = state.durable_version
            entries = [LogEntry(base + i, record.kind, self._bytes(record)) for i, record in enumerate(self.pending, 1)]
            try:
                with self._telemetry.store_call(self.store, "append"):
                    await self._appender.append(state, base, self.pending, entries, now, durable=durable)
            except VersionConflict as exc:
                if not any(isinstance(r, TurnEnded) for r in self.pending) and await self.absorb_unrelated():
                    continue
                if not rebase or any(isinstance(r, MessageAdded | TurnEnded) for r in self.pending):
                    raise ConcurrentUpdate(
                        f"session {state.session_id!r} was changed by another writer during this call",
                        session_id=state.session_id,
                    ) from exc
                await self.refresh()
                continue
            except StoreError:
                if not await self._kept(entries):
                    raise
            state.durable_version = state.version
            self._telemetry.recorded(state, self.pending)
            self.written.extend(self.pending)
            self.pending.clear()
            self._encoded.clear()
            self._remember(state)

    async def _kept(self, entries: Sequence[LogEntry]) -> bool:
        """Whether an append whose store reported a failure wrote ``entries`` all the same (its
        connection dropped after the commit, say): read back, the session holds exactly them
        where they were appended, so they are written — the call goes on as if told so. A read
        that fails too tells nothing (False: the failure stands; ``runtime._stopped`` then keeps
        what this process knows for its next call)."""
        try:
            found = await self.store.read(self.state.session_id, after_version=entries[0].version - 1)
        except StoreError:
            return False
        read = found.entries[: len(entries)] if found is not None else []
        return [(e.version, e.kind, decode_record(e.data)) for e in read] == [
            (e.version, e.kind, decode_record(e.data)) for e in entries
        ]

    async def absorb_unrelated(self) -> bool:
        """Take in what other writers appended since our last write if it changes nothing our
        pending records depend on — requests to abort detached turns, and revocations of grants
        none of them uses (a call a grant approved, once written, stays approved: revoking the
        grant stops its later uses) — replay the pending records on top and return True.
        Otherwise change nothing and return False."""
        state = self.state
        found = await self.store.read(state.session_id, after_version=state.durable_version)
        if found is None or not found.entries or any(e.kind not in _ABSORBED for e in found.entries):
            return False
        told = [decode_record(e.data) for e in found.entries]
        revoked = {r.id for r in told if isinstance(r, GrantRevoked)}
        if any(isinstance(r, CallDecided) and r.grant in revoked for r in self.pending):
            return False
        fresh = await self._reload()
        if fresh.version != state.durable_version + len(found.entries):
            return False  # it changed again meanwhile: the caller's own rules decide
        for record in self.pending:
            fresh.apply(record)
        self.state = fresh
        return True

    async def discard(self, keep: Callable[[Record], bool] = lambda record: False) -> None:
        """Forget the pending records ``keep`` does not keep: back to the store's state, with
        the kept ones replayed on top."""
        kept = [r for r in self.pending if keep(r)]
        fresh = await self._reload()
        for record in kept:
            fresh.apply(record)
        self.pending = kept
        self.state = fresh

    async def refresh(self) -> None:
        """Start again from the store's state, replaying the pending records on top of it.

        Records another writer made moot are dropped: a result for a call settled meanwhile
        (as of unknown outcome), an expiry or cancellation of a pause answered meanwhile, an
        escalation of a pause answered or handed on that far meanwhile (two processes sweeping
        at once hand a pause on once).
        (Answers given by a resume are never replayed: they are checked again instead.)
        """
        fresh = await self._reload()
        told = len(self.state.messages)  # the messages ``on_message`` has seen (or that were there)
        kept = []
        for record in self.pending:
            if isinstance(record, CallCompleted | CallPaused) and fresh.calls[record.call_ref].status != "running":
                continue
            if isinstance(record, CallAnswered) and fresh.pauses[record.ref].answer is not None:
                continue
            if isinstance(record, PauseEscalated) and _handed_on(fresh, record):
                continue
            fresh.apply(record)
            kept.append(record)
        self.pending = kept
        self.state = fresh
        if self.on_message is not None:
            # A batch another writer answered part of is complete now: its tool message, which
            # neither state had alone, is added here.
            for message in fresh.messages[told:]:
                self.on_message(message)

    async def end_after(self, version: int) -> tuple[TurnEnded, int] | None:
        """The first turn end the session has after ``version``, and its version (read from the
        store, unless it is the last one); None when no turn ended since."""
        state = self.state
        at = state.first_end_after(version)
        if at is None:
            return None
        if at == state.last_end_version and state.last_end is not None:
            return state.last_end, at
        found = await self.store.read(state.session_id, after_version=at - 1)
        record = decode_record(found.entries[0].data) if found is not None and found.entries else None
        if not isinstance(record, TurnEnded):
            raise ConcurrentUpdate(f"session {state.session_id!r} changed while its turn end was read")
        return record, at


def _handed_on(state: SessionState, escalation: PauseEscalated) -> bool:
    """Whether ``state`` has the pause ``escalation`` hands on answered, or handed on that far."""
    pause = state.pauses[escalation.ref]
    return pause.answer is not None or pause.level >= escalation.level
