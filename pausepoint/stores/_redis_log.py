"""Sessions and their logs in ``RedisSessionStore``: the Lua scripts of the conditional append,
reads, listings and deletion (the layout is in ``redis.py``), and the arguments they take.

Each script runs atomically in Redis. The append checks the version first and returns before
writing anything if it does not match; otherwise it pushes the entries, rewrites the summary,
moves the session in every index, and adds the events and their deliveries.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ._base import Event, LogEntry, SessionSummary
from ._redis_rows import us

__all__ = ["APPEND", "DELETE", "LIST", "READ", "append_args", "listing"]

# KEYS: summary, log, all, pending, expiry, agent index[, owner index][, tenant index]
# ARGV: id, expected, prefix, agent, has_owner, owner, created, updated, pending, expiry, turn,
# has_tenant, tenant, event slots (k), events (k slots: id, kind, agent, at, data, target count,
# targets...), entries...
APPEND = """
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
local expected = tonumber(ARGV[2])
if current ~= expected then
    return {0, current}
end
local id, prefix = ARGV[1], ARGV[3]
-- A summary may name another agent, owner or tenant than before: leave their indexes.
if current > 0 then
    local old = redis.call('HMGET', KEYS[1], 'agent', 'owner', 'tenant')
    if old[1] ~= ARGV[4] then
        redis.call('ZREM', prefix .. 'agent:' .. old[1], id)
    end
    if old[2] and (ARGV[5] == '0' or old[2] ~= ARGV[6]) then
        redis.call('ZREM', prefix .. 'owner:' .. old[2], id)
    end
    if old[3] and (ARGV[12] == '0' or old[3] ~= ARGV[13]) then
        redis.call('ZREM', prefix .. 'tenant:' .. old[3], id)
    end
end
local first = 15 + tonumber(ARGV[14])
-- unpack() is bounded by Lua's C stack: push in slices.
for i = first, #ARGV, 1000 do
    redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
local version = expected + #ARGV - first + 1
local updated = ARGV[8]
local i = 15
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
if first > 15 then
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
if ARGV[12] == '1' then
    redis.call('HSET', KEYS[1], 'tenant', ARGV[13])
    redis.call('ZADD', KEYS[#KEYS], updated, id)
else
    redis.call('HDEL', KEYS[1], 'tenant')
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
READ = """
local version = redis.call('HGET', KEYS[1], 'version')
if not version then
    return false
end
local out = redis.call('LRANGE', KEYS[2], tonumber(ARGV[1]), -1)
table.insert(out, 1, tonumber(version))
return out
"""

# KEYS: source index. ARGV: prefix, owner ('' = any), agent ('' = any), pending ('', '1', '0'),
# expiring_before_us ('' = any), offset, limit, has_owner filter ('1'/'0'), has_agent filter,
# has_tenant filter, tenant.
# With an expiry filter KEYS[1] is the expiry index and matches are sorted here; otherwise the
# index is walked newest first and matches come out in order. Returns {{id, hgetall...}, ...}.
LIST = """
local prefix, owner, agent, pending = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local before, offset, limit = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local by_owner, by_agent = ARGV[8] == '1', ARGV[9] == '1'
local by_tenant, tenant = ARGV[10] == '1', ARGV[11]
local function matches(s)
    if by_owner and s.owner ~= owner then return false end
    if by_tenant and s.tenant ~= tenant then return false end
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
DELETE = """
local old = redis.call('HMGET', KEYS[1], 'agent', 'owner', 'tenant')
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
if old[3] then
    redis.call('ZREM', prefix .. 'tenant:' .. old[3], id)
end
return 1
"""


def append_args(
    prefix: str,
    session_id: str,
    expected_version: int,
    summary: SessionSummary,
    entries: Sequence[LogEntry],
    events: Sequence[Event],
) -> list[Any]:
    """``APPEND``'s ARGV. Raises ``ValueError`` for a record kind, or an event's id, kind, agent or
    session id, with a newline (the separator of what the script keeps)."""
    for entry in entries:
        if "\n" in entry.kind:
            raise ValueError(f"record kind {entry.kind!r} contains a newline")
    args: list[Any] = [
        session_id,
        expected_version,
        prefix,
        summary.agent,
        "0" if summary.owner is None else "1",
        summary.owner or "",
        us(summary.created_at),
        us(summary.updated_at),
        summary.pending,
        "" if summary.next_expiry is None else us(summary.next_expiry),
        summary.turn,
        "0" if summary.tenant is None else "1",
        summary.tenant or "",
        0,
    ]
    for event in events:
        for text in (event.id, event.kind, event.agent, session_id):
            if "\n" in text:
                raise ValueError(f"an event's id, kind, agent and session id may not contain a newline: {text!r}")
        args += [event.id, event.kind, event.agent, us(event.at), event.data, len(event.targets), *event.targets]
    args[13] = len(args) - 14
    args += [e.kind.encode() + b"\n" + e.data for e in entries]
    return args


def listing(
    prefix: str,
    *,
    owner: str | None,
    agent: str | None,
    has_pending: bool | None,
    expiring_before: datetime | None,
    limit: int,
    offset: int,
    tenant: str | None = None,
) -> tuple[str, list[Any]]:
    """``LIST``'s source index (KEYS[1]) and ARGV for a listing: the narrowest index that still
    yields sessions in order; the script filters the rest. (The pending index before a
    tenant's: pauses waiting are few, a tenant's sessions grow with its history.)"""
    if expiring_before is not None:
        source = f"{prefix}expiry"
    elif owner is not None:
        source = f"{prefix}owner:{owner}"
    elif has_pending:
        source = f"{prefix}pending"
    elif tenant is not None:
        source = f"{prefix}tenant:{tenant}"
    elif agent is not None:
        source = f"{prefix}agent:{agent}"
    else:
        source = f"{prefix}all"
    args: list[Any] = [
        prefix,
        owner or "",
        agent or "",
        "" if has_pending is None else ("1" if has_pending else "0"),
        "" if expiring_before is None else us(expiring_before),
        offset,
        limit,
        "0" if owner is None else "1",
        "0" if agent is None else "1",
        "0" if tenant is None else "1",
        tenant or "",
    ]
    return source, args
