"""``LocalSessions``: what an agent keeps for the sessions it serves in this process.

A bounded in-process cache of session states: a session that has not changed is not read
again, and one that has is brought up to date by reading only the records after the cached
version. Calls on one session are serialised within the process by its lock; across processes
the store's conditional append keeps them safe.

A session not cached here is loaded from the store's checkpoint of it plus the records after
the checkpoint (``_checkpoint``): a cold load folds only the recent records, and decodes the
history only as far as the turn reads it (reading and checking the checkpoint's bytes still
grows with the history, unless the store gives the base as a view). Once a session has
``checkpoint_every`` records past its checkpoint, a background task writes an extension of it,
or a new one (off the turn's path; a failed write changes nothing): an extension holds what the
session added and changed since (for a long base, merged with the last ones of no more
records), so its cost does not grow with the history; a new base, written once the base has as
many extensions as its size allows (``_checkpoint.MIN_EXTENSIONS``, ``BYTES_PER_EXTENSION``,
``MERGED_SHARE``), does. The state loaded back from a new base is cheaper
to keep and to checkpoint next (its items stay encoded until read): it takes the place of the
cached state once the write ends, or, if a call took the session on meanwhile, the next call
starts from it and the records after it.

Also here: the tasks running in the background for these sessions (detached turns, streamed
turns, checkpoint writes), kept so they are not garbage-collected mid-run, and the detached
turns running in this process (``_detach``), so a call on their session is refused at once.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..checkpoints import _cache as _checkpoint
from ..checkpoints._books import books, checkpointed, partial_base
from ..errors import PausepointError, SessionNotFound, StoreError
from ..session._lineage import continues, last_record, note_last
from ..session._records import decode_record
from ..session._response import AgentResponse
from ..session._state import SessionState
from ..stores import CheckpointStore, LogEntry, SessionStore
from ..turn._journal import Appender, Journal
from ..turn._telemetry import Telemetry
from ._stopped import StoppedCalls

__all__ = ["LocalSessions", "Running", "of_another_agent", "others_session"]


def others_session(session_id: str, agent: str, owner: str) -> SessionNotFound:
    """A session of another agent (``owner``) on the same store: not ``agent``'s to read or
    continue, said as the REST API says it (404); ``details["agent"]`` names whose it is. A
    message never makes it this agent's either (``of_another_agent``)."""
    return SessionNotFound(
        f"no session {session_id!r} of agent {agent!r}: the id names a session of agent {owner!r} "
        "(ids are unique per store)",
        session_id=session_id,
        agent=owner,
    )


def of_another_agent(exc: SessionNotFound) -> bool:
    """Whether ``exc`` says the session is another agent's (``others_session``)."""
    return "agent" in exc.details


log = logging.getLogger("pausepoint")


@dataclass(slots=True, eq=False)
class Running:
    """A detached turn running in this process: its abort signal, and how to end its watcher."""

    turn_id: int = 0
    key: str | None = None  # the idempotency key of the call that started it
    request_hash: str | None = None  # ... and the hash of that call's request
    abort: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[AgentResponse] | None = None
    watcher: asyncio.Task[None] | None = None


class LocalSessions:
    """The sessions an agent serves in this process: their cached states, their locks, the
    background tasks working for them, and the detached turns running here.

    ``Agent`` holds one (``agent.sessions``); ``Chat``, ``Turn``, detached turns and the
    server use it. Internal: not part of the public API.
    """

    def __init__(
        self,
        appender: Appender,
        telemetry: Telemetry,
        *,
        cache_size: int = 1024,
        checkpoint_every: int | None = 64,
        agent: str = "",
    ) -> None:
        #: the agent whose sessions these are ("": any agent's)
        self.agent = agent
        #: how records reach the store (the store itself: ``store``)
        self.appender = appender
        self.telemetry = telemetry
        #: how many records past its checkpoint a session may grow before a new one is written
        #: (None: never write checkpoints; those in the store are still read)
        self.checkpoint_every = checkpoint_every
        #: tasks running in the background for these sessions, kept until they end
        self.tasks: set[asyncio.Task[Any]] = set()
        self._cache: OrderedDict[str, SessionState] = OrderedDict()
        self._cache_size = cache_size
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._running: dict[str, Running] = {}  # session id -> its detached turn running here
        self._checkpointing: set[str] = set()  # sessions whose checkpoint is being written
        # The state loaded back from a new base written while a call used the session: the
        # next call starts from it and the records after it (``refresh``).
        self._rebased: dict[str, SessionState] = {}
        self._checked: tuple[object, CheckpointStore | None] = (None, None)  # see _checkpoint_store()
        #: what this process knows of calls it stopped short on a session (``_stopped``)
        self.stopped = StoppedCalls()

    @property
    def store(self) -> SessionStore:
        return self.appender.store

    def _checkpoint_store(self) -> CheckpointStore | None:
        """The store if it keeps checkpoints, else None. Checked once per store object: an
        ``isinstance`` of a runtime-checkable protocol costs about 60 µs on Python 3.11."""
        store = self.store
        if store is not self._checked[0]:
            self._checked = (store, store if isinstance(store, CheckpointStore) else None)
        return self._checked[1]

    # -- states and locks -----------------------------------------------------------------------

    def lock(self, session_id: str) -> asyncio.Lock:
        """The lock that serialises calls on ``session_id`` in this process (held while a call
        runs; alive as long as someone holds a reference to it)."""
        lock = self._locks.get(session_id)
        if lock is None:
            lock = self._locks[session_id] = asyncio.Lock()
        return lock

    def cached(self, session_id: str) -> SessionState | None:
        """The session's cached state as it is (perhaps behind the store, perhaps holding
        records a failed call never wrote); None when it is not cached."""
        return self._cache.get(session_id)

    async def refresh(self, session_id: str) -> SessionState:
        """The session's state, brought up to date with the store. Raises ``SessionNotFound``
        (``others_session`` for a session of another agent)."""
        return self.owned(await self._refresh(session_id))

    def owned(self, state: SessionState) -> SessionState:
        """``state``, if it is a session of this agent; ``others_session`` otherwise."""
        if self.agent and state.agent and state.agent != self.agent:
            self.forget(state.session_id)
            raise others_session(state.session_id, self.agent, state.agent)
        return state

    async def _refresh(self, session_id: str) -> SessionState:
        state = self._cache.get(session_id)
        if state is not None and (state.version != state.durable_version or _base_may_be_gone(state)):
            # It holds records that were never written, or reads its items from a base the
            # store gave in part and may have dropped by now: start again from the store.
            state = None
        rebased = self._rebased.pop(session_id, None)
        if rebased is not None and (state is None or rebased.version <= state.version):
            state = rebased  # what the new base holds, then the records after it
        store = self.store
        checkpoints = self._checkpoint_store()
        if state is None and checkpoints is not None:
            with self.telemetry.store_call(store, "read"):
                state = await _checkpoint.load(checkpoints, session_id)
            if state is not None:
                self.remember(state)
                return state
        # A cached state reads from the record at its version on, to see that it is the one it
        # holds: else the session was deleted and made again under its id (``_lineage``).
        checked = state is not None and last_record(state) is not None
        after = 0 if state is None else state.durable_version - 1 if checked else state.durable_version
        with self.telemetry.store_call(store, "read"):
            found = await store.read(session_id, after_version=after)
        if found is None:
            self.forget(session_id)
            raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
        entries = found.entries
        if state is None:
            state = SessionState(session_id)
        elif not (continues(state, entries) if checked else found.version >= state.version):
            self.forget(session_id)  # another log under this id: read it as a new process would
            return await self._refresh(session_id)
        else:
            entries = entries[1:] if checked else entries
            if len(entries) > (self.checkpoint_every or _FOLD_ONTO_PARTIAL) and _reads_a_base(state):
                # Other processes moved the session on, and may have written bases enough since
                # that the store no longer holds this one (``stores.REPLACED_BASES_KEPT``): read
                # it from its checkpoint again, which costs less than folding that many records.
                return await self.reload(session_id)
        _fold(state, entries)
        if entries:
            note_last(state, entries[-1])
        state.durable_version = state.version
        self.remember(state)
        return state

    async def reload(self, session_id: str) -> SessionState:
        """The session's state as the store holds it, the cached one dropped first. Raises
        ``SessionNotFound``."""
        self._cache.pop(session_id, None)
        return self.owned(await self._refresh(session_id))

    def remember(self, state: SessionState) -> None:
        """Cache ``state`` as the session's latest (the least recently used session beyond
        ``cache_size`` is dropped), and start writing its checkpoint if it is due."""
        self._cache[state.session_id] = state
        self._cache.move_to_end(state.session_id)
        while len(self._cache) > self._cache_size:
            dropped, _ = self._cache.popitem(last=False)
            self._rebased.pop(dropped, None)
        every = self.checkpoint_every
        if (
            every is not None
            and state.version >= every  # (no lookup for a session too short to be due)
            and state.version - checkpointed(state) >= every
            and state.version == state.durable_version
            and state.session_id not in self._checkpointing
            and (store := self._checkpoint_store()) is not None
        ):
            self._checkpointing.add(state.session_id)
            self.keep(asyncio.get_running_loop().create_task(self._checkpoint(store, state)))

    def forget(self, session_id: str) -> None:
        """Drop the session's cached state (the next call reads the store)."""
        self._cache.pop(session_id, None)
        self._rebased.pop(session_id, None)

    def journal(self, state: SessionState) -> Journal:
        """A journal for a call on ``state``: it writes through the agent's appender and keeps
        what it writes (or reloads) in this cache."""
        reload = functools.partial(self.reload, state.session_id)
        journal = Journal(self.appender, state, reload, self.remember, telemetry=self.telemetry)
        self.stopped.watch(journal)
        return journal

    # -- background tasks -----------------------------------------------------------------------

    def keep(self, task: asyncio.Task[Any]) -> None:
        """Hold ``task`` until it ends (the event loop keeps only a weak reference to it)."""
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def settle(self) -> None:
        """Wait for the background tasks running now (detached and streamed turns, checkpoint
        writes); raises what the first of them that failed raised."""
        await asyncio.gather(*list(self.tasks))

    # -- detached turns running here ------------------------------------------------------------

    def running(self, session_id: str) -> Running | None:
        """The session's detached turn running in this process, if there is one."""
        return self._running.get(session_id)

    def track(self, session_id: str, running: Running) -> None:
        """``running`` is the session's detached turn, running here from now on."""
        self._running[session_id] = running

    def untrack(self, session_id: str, running: Running) -> None:
        """``running`` ended: it no longer holds the session (if it still did)."""
        if self._running.get(session_id) is running:
            del self._running[session_id]

    # -- checkpoints ----------------------------------------------------------------------------

    async def _checkpoint(self, store: CheckpointStore, state: SessionState) -> None:
        """Write the session's checkpoint (an extension of the one it has, or a new base); then,
        unless a call is using the session meanwhile, keep the state as the store now holds
        it, its items encoded until read (so the next checkpoint copies or skips them). If the
        session moved on while it was written, and far enough, write again (a few times at
        most: a busy session is checkpointed by its next turns)."""
        session_id = state.session_id

        def idle() -> bool:
            return self._cache.get(session_id) is state and not self.lock(session_id).locked()

        try:
            # After the call that made it due, which holds the lock still: then nothing is
            # using the state (unless the store makes the write wait), and it can be kept as
            # written. Not with the lock held: the next call does not wait for the write.
            async with self.lock(session_id):
                pass
            latest = self._cache.get(session_id)
            if latest is None:
                return
            state = latest
            for _ in range(3):
                kept = await _checkpoint.save(store, state, idle)
                if kept is not None and kept is not state:  # loaded back from the new base
                    if idle() and state.version == kept.version:
                        self._cache[session_id] = kept
                    elif self._cache.get(session_id) is not None:
                        self._rebased[session_id] = kept  # a call took the state on meanwhile
                latest = self._cache.get(session_id)
                every = self.checkpoint_every
                if latest is None or every is None or latest.version - checkpointed(latest) < every:
                    break
                state = latest
        except Exception:  # a checkpoint is only ever a shortcut: the log is complete without it
            log.warning("could not write the checkpoint of session %s", session_id, exc_info=True)
        finally:
            self._checkpointing.discard(session_id)


# The records a state read from a base given in part may fold on when its agent writes no
# checkpoints (``checkpoint_every`` None): the default's.
_FOLD_ONTO_PARTIAL = 64


def _reads_a_base(state: SessionState) -> bool:
    """Whether ``state`` still reads items from a base its store gave in part
    (``stores.Checkpoint.fetch``)."""
    kept = books(state)
    partial = kept.partial
    if partial is not None and partial.chunks.whole:
        kept.partial = partial = None  # every byte of it is here: it no longer needs the store
    return partial is not None


def _base_may_be_gone(state: SessionState) -> bool:
    """Whether ``state`` reads items from a base given in part that its store may no longer
    hold."""
    partial = partial_base(state)
    return partial is not None and time.monotonic() > partial.until and _reads_a_base(state)


def _fold(state: SessionState, entries: Sequence[LogEntry]) -> None:
    """Fold the log's ``entries`` into ``state``. A log no writer could have made — a torn
    copy of a SQLite file, a record missing between others — is the store's failure, said as
    one (``StoreError`` naming the session and the record), never an error of the fold's own."""
    for entry in entries:
        try:
            state.apply(decode_record(entry.data))
        except PausepointError:
            raise
        except Exception as exc:
            raise StoreError(
                f"the log of session {state.session_id!r} cannot be read at record {entry.version} "
                f"(a damaged store, or a copy torn while it was written): {type(exc).__name__}: {exc}",
                session_id=state.session_id,
                version=entry.version,
            ) from exc
