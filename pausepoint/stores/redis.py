"""``RedisSessionStore``: sessions in Redis, shared by every process of a deployment.

Keys (all under a configurable prefix, ``pausepoint:`` by default)::

    {prefix}schema_version      the layout version below, checked at start
    {prefix}log:{id}            list: the session's entries, ``kind`` + "\\n" + JSON
    {prefix}summary:{id}        hash: the session's summary (times in epoch microseconds)
    {prefix}checkpoint:{id}     hash: the session's checkpoint: ``version`` (its head: the
                                latest extension's, or the base's), ``base`` (its base's version)
    {prefix}checkpoint-ext:{id} list: the checkpoint's extensions, oldest first
    {prefix}checkpoint-base:{id}:{version}  string: a base; one a newer base replaced expires
                                ``PARTIAL_BASE_KEPT`` seconds later, or once
                                ``REPLACED_BASES_KEPT`` newer ones did (see ``read_checkpoint``)
    {prefix}checkpoint-bases:{id}  set: the versions of the session's bases still held
    {prefix}all                 sorted set: every session by updated time
    {prefix}agent:{agent}       sorted set: the agent's sessions by updated time
    {prefix}owner:{owner}       sorted set: the owner's sessions by updated time
    {prefix}pending             sorted set: sessions with pending interrupts by updated time
    {prefix}expiry              sorted set: sessions with an expiring pause, by expiry time
    {prefix}event_seq           counter: the latest event position handed out
    {prefix}events              sorted set: the event stream, by position (member: the event)
    {prefix}delivery_seq        counter: the latest delivery id handed out
    {prefix}delivery:{n}        hash: one delivery of the outbox
    {prefix}deliveries          sorted set: every delivery by id
    {prefix}deliveries:failed   sorted set: the failed deliveries by id
    {prefix}due:{target}        sorted set: a webhook's pending deliveries by due time

Every write is a Lua script, which Redis runs atomically: no other command runs between its
first and last line. The append script checks the version first and returns before writing
anything if it does not match, so a refused append leaves no trace; otherwise it pushes the
entries, rewrites the summary, moves the session in every index, adds the events and their
deliveries and publishes on the ``{prefix}events`` channel in the same step (a reader's
``wait_for_events`` subscribes to it). Equal
scores in a sorted set are ordered by member, so "most recently updated first" breaks ties by
session id, as on the SQL backends.

The scripts reach index keys derived from the prefix, so the store needs a single Redis server,
version 6.2 or later (or a cluster with a hash-tagged prefix such as ``{pausepoint}:``, which
keeps every key in one slot). Sessions are as durable as the server is configured to be, for
every append alike (``append(durable=...)`` changes nothing here): with Redis's default
snapshots a crash of the server loses the writes since the last snapshot; ``appendonly yes``
with ``appendfsync everysec`` loses up to about a second of writes on a power loss or OS crash
(a crash of the Redis process alone loses none); ``appendfsync always`` loses none. What a lost
write means is the same as for SQLite's ``synchronous=NORMAL``: an answer whose tool already
ran may be lost, and answering again would run the tool again. Every redis-py error is
translated to ``StoreError`` in ``_translated``.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from .._extras import missing_extra
from ..errors import SchemaVersionError, StoreError
from ._base import (
    DEFAULT_MAX_RECORD_BYTES,
    PARTIAL_BASE_KEPT,
    REPLACED_BASES_KEPT,
    Checkpoint,
    Delivery,
    DeliveryState,
    Event,
    LogEntry,
    LogSlice,
    SessionSummary,
    check_entries,
    check_replaces,
    version_conflict,
)
from ._partial import PREFIX_BYTES, BlockingLoop, PartialBase
from ._redis_outbox import CLAIM, LIST_DELIVERIES, PRUNE, REQUEUE, SETTLE
from ._signal import Signal, wait_after

try:
    import redis.asyncio as aioredis
    from redis.exceptions import RedisError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("redis", "redis") from exc

__all__ = ["RedisSessionStore"]

# The layout's versions, each adding keys only, so a prefix of any earlier version is upgraded by
# naming the new one: 1 sessions and logs, 2 the event stream and the delivery outbox, 3
# checkpoints, 4 checkpoint extensions (named so that a process of layout 3, whose checkpoint
# writes would leave the extensions of an older base behind, refuses the prefix), 5 bases in keys
# of their own, by version (a checkpoint hash of layout 4 holds its base in ``data`` and no
# ``base``: it reads as no checkpoint, and the next base written replaces it). A new version that
# changes existing keys adds its migration here.
_LAYOUTS = [
    "sessions and logs",
    "the event stream and the delivery outbox",
    "checkpoints",
    "checkpoint extensions",
    "checkpoint bases by version",
]
SCHEMA_VERSION = len(_LAYOUTS)
_UPGRADABLE = {str(version).encode() for version in range(1, SCHEMA_VERSION)}

# KEYS: summary, log, all, pending, expiry, agent index[, owner index]
# ARGV: id, expected, prefix, agent, has_owner, owner, created, updated, pending, expiry, turn,
# event slots (k), events (k slots: id, kind, agent, at, data, target count, targets...), entries...
_APPEND = """
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
local expected = tonumber(ARGV[2])
if current ~= expected then
    return {0, current}
end
local id, prefix = ARGV[1], ARGV[3]
-- A summary may name another agent or owner than before: leave their indexes.
if current > 0 then
    local old = redis.call('HMGET', KEYS[1], 'agent', 'owner')
    if old[1] ~= ARGV[4] then
        redis.call('ZREM', prefix .. 'agent:' .. old[1], id)
    end
    if old[2] and (ARGV[5] == '0' or old[2] ~= ARGV[6]) then
        redis.call('ZREM', prefix .. 'owner:' .. old[2], id)
    end
end
local first = 13 + tonumber(ARGV[12])
-- unpack() is bounded by Lua's C stack: push in slices.
for i = first, #ARGV, 1000 do
    redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
local version = expected + #ARGV - first + 1
local updated = ARGV[8]
local i = 13
while i < first do
    local seq = redis.call('INCR', prefix .. 'event_seq')
    redis.call('ZADD', prefix .. 'events', seq, seq .. '\\n' .. ARGV[i] .. '\\n' .. ARGV[i + 1] .. '\\n' .. id ..
        '\\n' .. ARGV[i + 2] .. '\\n' .. ARGV[i + 3] .. '\\n' .. ARGV[i + 4])
    local targets = tonumber(ARGV[i + 5])
    for t = 1, targets do
        local target = ARGV[i + 5 + t]
        local n = redis.call('INCR', prefix .. 'delivery_seq')
        redis.call('HSET', prefix .. 'delivery:' .. n, 'target', target, 'seq', seq, 'state', 'pending',
            'attempts', 0, 'due_us', updated, 'updated_us', updated)
        redis.call('ZADD', prefix .. 'deliveries', n, n)
        redis.call('ZADD', prefix .. 'due:' .. target, updated, n)
    end
    i = i + 6 + targets
end
if first > 13 then
    redis.call('PUBLISH', prefix .. 'events', '')
end
redis.call('HSET', KEYS[1], 'version', version, 'agent', ARGV[4], 'created_us', ARGV[7],
    'updated_us', updated, 'pending', ARGV[9], 'turn', ARGV[11])
redis.call('ZADD', KEYS[3], updated, id)
redis.call('ZADD', KEYS[6], updated, id)
if ARGV[5] == '1' then
    redis.call('HSET', KEYS[1], 'owner', ARGV[6])
    redis.call('ZADD', KEYS[7], updated, id)
else
    redis.call('HDEL', KEYS[1], 'owner')
end
if tonumber(ARGV[9]) > 0 then
    redis.call('ZADD', KEYS[4], updated, id)
else
    redis.call('ZREM', KEYS[4], id)
end
if ARGV[10] ~= '' then
    redis.call('HSET', KEYS[1], 'expiry_us', ARGV[10])
    redis.call('ZADD', KEYS[5], ARGV[10], id)
else
    redis.call('HDEL', KEYS[1], 'expiry_us')
    redis.call('ZREM', KEYS[5], id)
end
return {1, version}
"""

# KEYS: summary, log. ARGV: after_version.
# Returns nil for no session, else {version, entry1, entry2, ...} (the entries after after_version).
_READ = """
local version = redis.call('HGET', KEYS[1], 'version')
if not version then
    return false
end
local out = redis.call('LRANGE', KEYS[2], tonumber(ARGV[1]), -1)
table.insert(out, 1, tonumber(version))
return out
"""

# KEYS: summary, checkpoint, extensions, bases. ARGV: version, data, the bases' key stem, the
# milliseconds a replaced base is kept, how many replaced bases are kept at most. Keeps a new base
# only for a version the log holds and only over an older checkpoint (its head), dropping the old
# one's extensions; the old base expires later (a process may be reading it in part), and the
# replaced bases beyond the newest few, and those expired, leave. Returns 1 if kept.
_WRITE_CHECKPOINT = """
local version = redis.call('HGET', KEYS[1], 'version')
if not version or tonumber(version) < tonumber(ARGV[1]) then
    return 0
end
local current = redis.call('HMGET', KEYS[2], 'version', 'base')
if current[2] and tonumber(current[1]) >= tonumber(ARGV[1]) then
    return 0
end
local stem = ARGV[3]
local replaced = {}
for _, held in ipairs(redis.call('SMEMBERS', KEYS[4])) do
    if held ~= current[2] and redis.call('EXISTS', stem .. held) == 1 then
        table.insert(replaced, tonumber(held))
    elseif held ~= current[2] then
        redis.call('SREM', KEYS[4], held)
    end
end
table.sort(replaced, function(a, b) return a > b end)
for i = tonumber(ARGV[5]), #replaced do
    redis.call('DEL', stem .. replaced[i])
    redis.call('SREM', KEYS[4], tostring(replaced[i]))
end
if current[2] then
    redis.call('PEXPIRE', stem .. current[2], ARGV[4])
end
redis.call('SET', stem .. ARGV[1], ARGV[2])
redis.call('SADD', KEYS[4], ARGV[1])
redis.call('HSET', KEYS[2], 'version', ARGV[1], 'base', ARGV[1])
redis.call('HDEL', KEYS[2], 'data')
redis.call('DEL', KEYS[3])
return 1
"""

# KEYS: summary, checkpoint, extensions. ARGV: after, version, data, how many extensions it
# replaces. Moves the checkpoint's head from after to version, and adds the extension in place of
# the last ones it replaces, only if the head is at after, has that many and the log holds
# version; returns 1 if kept.
_EXTEND_CHECKPOINT = """
local after, version, replaces = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[4])
if after >= version then
    return 0
end
local held = redis.call('HGET', KEYS[1], 'version')
if not held or tonumber(held) < version then
    return 0
end
local current = redis.call('HMGET', KEYS[2], 'version', 'base')
if not current[2] or tonumber(current[1]) ~= after then
    return 0
end
if replaces > 0 then
    if redis.call('LLEN', KEYS[3]) < replaces then
        return 0
    end
    redis.call('LTRIM', KEYS[3], 0, -replaces - 1)
end
redis.call('HSET', KEYS[2], 'version', ARGV[2])
redis.call('RPUSH', KEYS[3], ARGV[3])
return 1
"""

# KEYS: checkpoint, extensions. ARGV: the bases' key stem, how many bytes of the base to read.
# Returns nil for no checkpoint, else {head version, base version, base length, its first bytes,
# extension1, extension2, ...}.
_READ_CHECKPOINT = """
local head = redis.call('HMGET', KEYS[1], 'version', 'base')
if not head[2] then
    return false
end
local key = ARGV[1] .. head[2]
local length = redis.call('STRLEN', key)
if length == 0 then
    return false
end
local out = redis.call('LRANGE', KEYS[2], 0, -1)
table.insert(out, 1, redis.call('GETRANGE', key, 0, tonumber(ARGV[2]) - 1))
table.insert(out, 1, length)
table.insert(out, 1, tonumber(head[2]))
table.insert(out, 1, tonumber(head[1]))
return out
"""

# KEYS: source index. ARGV: prefix, owner ('' = any), agent ('' = any), pending ('', '1', '0'),
# expiring_before_us ('' = any), offset, limit, has_owner filter ('1'/'0'), has_agent filter.
# With an expiry filter KEYS[1] is the expiry index and matches are sorted here; otherwise the
# index is walked newest first and matches come out in order. Returns {{id, hgetall...}, ...}.
_LIST = """
local prefix, owner, agent, pending = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local before, offset, limit = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local by_owner, by_agent = ARGV[8] == '1', ARGV[9] == '1'
local function matches(s)
    if by_owner and s.owner ~= owner then return false end
    if by_agent and s.agent ~= agent then return false end
    if pending == '1' and tonumber(s.pending) == 0 then return false end
    if pending == '0' and tonumber(s.pending) > 0 then return false end
    return true
end
local function load(id)
    local flat = redis.call('HGETALL', prefix .. 'summary:' .. id)
    local s = {id = id, flat = flat}
    for i = 1, #flat, 2 do
        s[flat[i]] = flat[i + 1]
    end
    return s
end
local function reply(s)
    local row = {s.id}
    for _, v in ipairs(s.flat) do
        row[#row + 1] = v
    end
    return row
end
local out = {}
if before ~= '' then
    local found = {}
    for _, id in ipairs(redis.call('ZRANGE', KEYS[1], '-inf', '(' .. before, 'BYSCORE')) do
        local s = load(id)
        if matches(s) then
            found[#found + 1] = s
        end
    end
    table.sort(found, function(a, b)
        local ua, ub = tonumber(a.updated_us), tonumber(b.updated_us)
        if ua ~= ub then return ua > ub end
        return a.id > b.id
    end)
    for i = offset + 1, math.min(offset + limit, #found) do
        out[#out + 1] = reply(found[i])
    end
    return out
end
local skipped, start, page = 0, 0, 200
while #out < limit do
    local ids = redis.call('ZRANGE', KEYS[1], start, start + page - 1, 'REV')
    if #ids == 0 then break end
    for _, id in ipairs(ids) do
        local s = load(id)
        if matches(s) then
            if skipped < offset then
                skipped = skipped + 1
            elseif #out < limit then
                out[#out + 1] = reply(s)
            end
        end
    end
    start = start + page
end
return out
"""

# KEYS: summary, log, all, pending, expiry. ARGV: id, prefix. Returns 1 if the session existed.
_DELETE = """
local old = redis.call('HMGET', KEYS[1], 'agent', 'owner')
if not old[1] then
    return 0
end
local id, prefix = ARGV[1], ARGV[2]
redis.call('DEL', KEYS[1], KEYS[2], prefix .. 'checkpoint:' .. id, prefix .. 'checkpoint-ext:' .. id)
local bases = prefix .. 'checkpoint-bases:' .. id
for _, held in ipairs(redis.call('SMEMBERS', bases)) do
    redis.call('DEL', prefix .. 'checkpoint-base:' .. id .. ':' .. held)
end
redis.call('DEL', bases)
redis.call('ZREM', KEYS[3], id)
redis.call('ZREM', KEYS[4], id)
redis.call('ZREM', KEYS[5], id)
redis.call('ZREM', prefix .. 'agent:' .. old[1], id)
if old[2] then
    redis.call('ZREM', prefix .. 'owner:' .. old[2], id)
end
return 1
"""


def _us(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


def _moment(us: bytes | str) -> datetime:
    return datetime.fromtimestamp(int(us) / 1_000_000, tz=UTC)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _event(member: bytes) -> Event:
    seq, event_id, kind, session_id, agent, at, data = member.split(b"\n", 6)
    return Event(
        id=event_id.decode(),
        kind=kind.decode(),
        session_id=session_id.decode(),
        agent=agent.decode(),
        at=_moment(at),
        data=data,
        seq=int(seq),
    )


def _delivery(row: list[Any]) -> Delivery:
    number, flat, member = row
    fields = {_text(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}
    error = fields.get("error")
    lease = fields.get("lease")
    return Delivery(
        id=int(number),
        target=_text(fields["target"]),
        event=_event(member),
        state=_text(fields["state"]),  # type: ignore[arg-type]
        attempts=int(fields["attempts"]),
        due_at=_moment(fields["due_us"]),
        updated_at=_moment(fields["updated_us"]),
        last_error=None if error is None else _text(error),
        lease=None if lease is None else _text(lease),
    )


def _summary(session_id: str, fields: Mapping[str, bytes | str]) -> SessionSummary:
    owner = fields.get("owner")
    expiry = fields.get("expiry_us")
    return SessionSummary(
        session_id=session_id,
        agent=_text(fields["agent"]),
        owner=None if owner is None else _text(owner),
        version=int(fields["version"]),
        created_at=_moment(fields["created_us"]),
        updated_at=_moment(fields["updated_us"]),
        pending=int(fields["pending"]),
        next_expiry=None if expiry is None else _moment(expiry),
        turn=int(fields["turn"]),
    )


async def _close_client(client: aioredis.Redis) -> None:
    with contextlib.suppress(RedisError, OSError):
        await client.aclose()


class RedisSessionStore:
    """Sessions in Redis, under the key ``prefix`` (see the module docstring for the layout).

    ``connection`` is a ``redis://`` URL (the store makes, and on ``close`` closes, its own
    client) or an existing ``redis.asyncio.Redis`` client created with
    ``decode_responses=False`` (which stays the caller's to close). The schema version key is
    checked on first use: a prefix holding a newer or unknown layout raises
    ``SchemaVersionError``. Any Redis failure raises ``StoreError`` with the redis-py error as
    its cause.
    """

    def __init__(
        self,
        connection: str | aioredis.Redis,
        *,
        prefix: str = "pausepoint:",
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    ) -> None:
        if isinstance(connection, str):
            self._client: aioredis.Redis | None = aioredis.Redis.from_url(connection, decode_responses=False)
            self._owns_client = True
        else:
            if connection.connection_pool.connection_kwargs.get("decode_responses"):
                raise ValueError("RedisSessionStore needs a client made with decode_responses=False")
            self._client = connection
            self._owns_client = False
        self.prefix = prefix
        self.max_record_bytes = max_record_bytes
        self._scripts = {
            name: self._client.register_script(source)
            for name, source in (
                ("append", _APPEND),
                ("read", _READ),
                ("list", _LIST),
                ("delete", _DELETE),
                ("write_checkpoint", _WRITE_CHECKPOINT),
                ("extend_checkpoint", _EXTEND_CHECKPOINT),
                ("read_checkpoint", _READ_CHECKPOINT),
                ("claim", CLAIM),
                ("settle", SETTLE),
                ("requeue", REQUEUE),
                ("list_deliveries", LIST_DELIVERIES),
                ("prune", PRUNE),
            )
        }
        self._ready = False
        self._ranges = BlockingLoop("pausepoint-redis-ranges", self._ranges_client, _close_client)
        self._signal = Signal()
        self._subscriber: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"<RedisSessionStore prefix={self.prefix!r}>"

    # -- connection and schema ----------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _translated(self, action: str) -> AsyncIterator[None]:
        """The one place redis-py's errors become ``StoreError`` (pausepoint's own pass through)."""
        try:
            yield
        except (RedisError, OSError) as exc:
            raise StoreError(f"Redis failed while {action}: {exc}", prefix=self.prefix) from exc

    async def _ready_client(self) -> aioredis.Redis:
        """The client, once the prefix is known to hold our layout (checked on first use)."""
        if self._client is None:
            raise StoreError("the store is closed")
        if not self._ready:
            await self._check_schema(self._client)
        return self._client

    async def _run(self, script: str, action: str, keys: list[str], args: list[Any]) -> Any:
        """Run one of the Lua scripts."""
        async with self._translated(action):
            client = await self._ready_client()
            return await self._scripts[script](keys=keys, args=args, client=client)

    async def _check_schema(self, client: aioredis.Redis) -> None:
        key = self.prefix + "schema_version"
        # SET NX: the first process claims the (empty) prefix; everyone then reads what is there.
        await client.set(key, str(SCHEMA_VERSION), nx=True)
        found = await client.get(key)
        if found in _UPGRADABLE:  # the new layout only adds keys: upgrading is naming it
            await client.set(key, str(SCHEMA_VERSION))
            found = str(SCHEMA_VERSION).encode()
        if found != str(SCHEMA_VERSION).encode():
            shown = found.decode(errors="replace") if isinstance(found, bytes) else found
            raise SchemaVersionError(
                f"Redis prefix {self.prefix!r} holds pausepoint schema version {shown!r}; this version of "
                f"pausepoint uses version {SCHEMA_VERSION}",
                found=shown,
                expected=SCHEMA_VERSION,
            )
        self._ready = True

    def _keys(self, session_id: str) -> list[str]:
        p = self.prefix
        return [f"{p}summary:{session_id}", f"{p}log:{session_id}", f"{p}all", f"{p}pending", f"{p}expiry"]

    # -- the contract -------------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        expected_version: int,
        entries: Sequence[LogEntry],
        summary: SessionSummary,
        events: Sequence[Event] = (),
        *,
        durable: bool = True,  # as durable as the server is configured to be (see the module docstring)
    ) -> int:
        check_entries(expected_version, entries, self.max_record_bytes, events)
        for entry in entries:
            if "\n" in entry.kind:
                raise ValueError(f"record kind {entry.kind!r} contains a newline")
        keys = [*self._keys(session_id), f"{self.prefix}agent:{summary.agent}"]
        if summary.owner is not None:
            keys.append(f"{self.prefix}owner:{summary.owner}")
        args: list[Any] = [
            session_id,
            expected_version,
            self.prefix,
            summary.agent,
            "0" if summary.owner is None else "1",
            summary.owner or "",
            _us(summary.created_at),
            _us(summary.updated_at),
            summary.pending,
            "" if summary.next_expiry is None else _us(summary.next_expiry),
            summary.turn,
            0,
        ]
        for event in events:
            for text in (event.id, event.kind, event.agent, session_id):
                if "\n" in text:
                    raise ValueError(f"an event's id, kind, agent and session id may not contain a newline: {text!r}")
            args += [event.id, event.kind, event.agent, _us(event.at), event.data, len(event.targets), *event.targets]
        args[11] = len(args) - 12
        args += [e.kind.encode() + b"\n" + e.data for e in entries]
        applied, version = await self._run("append", f"appending to session {session_id!r}", keys, args)
        if applied and events:
            self._signal.fire()
        if not applied:
            raise version_conflict(session_id, expected_version, int(version))
        return int(version)

    async def read(self, session_id: str, after_version: int = 0) -> LogSlice | None:
        keys = self._keys(session_id)[:2]
        reply = await self._run("read", f"reading session {session_id!r}", keys, [after_version])
        if reply is None:
            return None
        entries = []
        for version, entry in enumerate(reply[1:], start=after_version + 1):
            kind, _, data = entry.partition(b"\n")
            entries.append(LogEntry(version, kind.decode(), data))
        return LogSlice(int(reply[0]), entries)

    def _checkpoint_keys(self, session_id: str) -> list[str]:
        p = self.prefix
        return [f"{p}summary:{session_id}", f"{p}checkpoint:{session_id}", f"{p}checkpoint-ext:{session_id}"]

    def _base_stem(self, session_id: str) -> str:
        """The key of the session's base at version V is this and V."""
        return f"{self.prefix}checkpoint-base:{session_id}:"

    async def write_checkpoint(self, session_id: str, version: int, data: bytes) -> bool:
        action = f"writing the checkpoint of session {session_id!r}"
        keys = [*self._checkpoint_keys(session_id), f"{self.prefix}checkpoint-bases:{session_id}"]
        args = [version, data, self._base_stem(session_id), round(PARTIAL_BASE_KEPT * 1000), REPLACED_BASES_KEPT]
        return bool(await self._run("write_checkpoint", action, keys, args))

    async def extend_checkpoint(
        self, session_id: str, after: int, version: int, data: bytes, *, replaces: int = 0
    ) -> bool:
        check_replaces(replaces)
        action = f"extending the checkpoint of session {session_id!r}"
        keys = self._checkpoint_keys(session_id)
        return bool(await self._run("extend_checkpoint", action, keys, [after, version, data, replaces]))

    async def read_checkpoint(self, session_id: str) -> Checkpoint | None:
        # One script: the head, the extensions and the base's first PREFIX_BYTES in one atomic
        # step. A longer base is given in part (``_partial``): the runtime fetches the rest of it
        # a range at a time, as it reads it, from the base's own key, which a newer base leaves
        # in place for PARTIAL_BASE_KEPT seconds (unless REPLACED_BASES_KEPT newer ones replace it).
        _, head, extensions = self._checkpoint_keys(session_id)
        action = f"reading the checkpoint of session {session_id!r}"
        stem = self._base_stem(session_id)
        reply = await self._run("read_checkpoint", action, [head, extensions], [stem, PREFIX_BYTES])
        if not reply:
            return None
        version, base, length, prefix = int(reply[0]), int(reply[1]), int(reply[2]), bytes(reply[3])
        added = tuple(bytes(e) for e in reply[4:])
        if length <= len(prefix):
            return Checkpoint(version, prefix, added)
        key = f"{stem}{base}"
        partial = PartialBase(length, prefix, lambda start, stop: self._read_range(key, start, stop))
        return Checkpoint(version, partial.view, added, partial.fetch)

    def _read_range(self, key: str, start: int, stop: int) -> bytes:
        """Bytes ``start`` to ``stop - 1`` of the string at ``key``, blocking (see ``_partial``)."""

        async def getrange(client: aioredis.Redis) -> bytes:
            async with self._translated(f"reading part of a checkpoint ({key})"):
                return cast(bytes, await client.getrange(key, start, stop - 1))

        return self._ranges.run(getrange)

    async def _ranges_client(self) -> aioredis.Redis:
        """A client of its own for ``_ranges``' loop, to the same server as the store's."""
        if self._client is None:
            raise StoreError("the store is closed")
        pool = self._client.connection_pool
        return aioredis.Redis.from_pool(
            aioredis.ConnectionPool(connection_class=pool.connection_class, **pool.connection_kwargs)
        )

    async def get_summary(self, session_id: str) -> SessionSummary | None:
        async with self._translated(f"reading session {session_id!r}"):
            client = await self._ready_client()
            fields = await client.hgetall(self._keys(session_id)[0])
        if not fields:
            return None
        return _summary(session_id, {_text(k): v for k, v in fields.items()})

    async def list_sessions(
        self,
        *,
        owner: str | None = None,
        agent: str | None = None,
        has_pending: bool | None = None,
        expiring_before: datetime | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[SessionSummary]:
        # Walk the narrowest index that still yields sessions in order; the script filters the rest.
        p = self.prefix
        if expiring_before is not None:
            source = f"{p}expiry"
        elif owner is not None:
            source = f"{p}owner:{owner}"
        elif has_pending:
            source = f"{p}pending"
        elif agent is not None:
            source = f"{p}agent:{agent}"
        else:
            source = f"{p}all"
        args: list[Any] = [
            p,
            owner or "",
            agent or "",
            "" if has_pending is None else ("1" if has_pending else "0"),
            "" if expiring_before is None else _us(expiring_before),
            offset,
            limit,
            "0" if owner is None else "1",
            "0" if agent is None else "1",
        ]
        if limit <= 0:
            return []
        rows = await self._run("list", "listing sessions", [source], args)
        return [_summary(row[0].decode(), {row[i].decode(): row[i + 1] for i in range(1, len(row), 2)}) for row in rows]

    async def delete(self, session_id: str) -> bool:
        gone = await self._run(
            "delete",
            f"deleting session {session_id!r}",
            self._keys(session_id),
            [
                session_id,
                self.prefix,
            ],
        )
        return bool(gone)

    # -- the event stream and the outbox --------------------------------------------------------

    async def read_events(self, after: int = 0, limit: int = 100) -> list[Event]:
        async with self._translated("reading events"):
            client = await self._ready_client()
            members = await client.zrangebyscore(f"{self.prefix}events", f"({after}", "+inf", start=0, num=limit)
        return [_event(m) for m in members if isinstance(m, bytes)]

    async def last_event(self) -> int:
        async with self._translated("reading events"):
            client = await self._ready_client()
            found = await client.get(f"{self.prefix}event_seq")
        return 0 if found is None else int(found)

    async def wait_for_events(self, after: int, max_wait: float) -> None:
        try:
            await self._subscribe()
        except StoreError:  # not subscribed now: look again soon instead
            max_wait = min(max_wait, 0.5)
        await wait_after(self._signal, after, max_wait, self.last_event)

    async def _subscribe(self) -> None:
        if self._subscriber is not None and not self._subscriber.done():
            return
        async with self._translated("subscribing to events"):
            client = await self._ready_client()
            pubsub = client.pubsub()
            await pubsub.subscribe(f"{self.prefix}events")
        self._subscriber = asyncio.get_running_loop().create_task(self._listen(pubsub))

    async def _listen(self, pubsub: Any) -> None:
        try:
            async for message in pubsub.listen():
                if message.get("type") == "message":
                    self._signal.fire()
        except (RedisError, OSError):
            pass  # the next wait subscribes again
        finally:
            self._signal.fire()
            with contextlib.suppress(RedisError, OSError):
                await pubsub.aclose()

    async def claim_deliveries(
        self, targets: Collection[str], now: datetime, lease: timedelta, limit: int = 50
    ) -> list[Delivery]:
        if not targets or limit <= 0:
            return []
        args = [self.prefix, _us(now), _us(now + lease), secrets.token_hex(8), limit, *targets]
        rows = await self._run("claim", "claiming deliveries", [], args)
        return sorted((_delivery(r) for r in rows), key=lambda d: d.id)

    async def settle_delivery(
        self, delivery: Delivery, now: datetime, *, error: str | None = None, retry_at: datetime | None = None
    ) -> bool:
        state = "delivered" if error is None else ("pending" if retry_at is not None else "failed")
        args = [
            self.prefix,
            delivery.id,
            delivery.lease or "",
            state,
            "" if retry_at is None else _us(retry_at),
            _us(now),
            "0" if error is None else "1",
            error or "",
        ]
        return bool(await self._run("settle", "settling a delivery", [], args))

    async def list_deliveries(
        self, *, state: DeliveryState | None = None, target: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[Delivery]:
        if limit <= 0:
            return []
        args = [self.prefix, state or "", target or "", offset, limit, "0" if target is None else "1"]
        rows = await self._run("list_deliveries", "listing deliveries", [], args)
        return [_delivery(r) for r in rows]

    async def requeue_delivery(self, delivery_id: int, now: datetime) -> bool:
        return bool(await self._run("requeue", "requeueing a delivery", [], [self.prefix, delivery_id, _us(now)]))

    async def prune_events(self, before: datetime) -> int:
        return int(await self._run("prune", "pruning events", [], [self.prefix, _us(before)]))

    async def close(self) -> None:
        subscriber, self._subscriber = self._subscriber, None
        if subscriber is not None and not subscriber.done():
            subscriber.cancel()
            with contextlib.suppress(asyncio.CancelledError, RedisError, OSError):
                await subscriber
        await self._ranges.aclose()
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            async with self._translated("closing"):
                await client.aclose()
