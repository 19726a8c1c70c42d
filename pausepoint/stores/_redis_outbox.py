"""The Lua scripts of ``RedisSessionStore``'s delivery outbox (the layout is in ``redis.py``).

Each runs atomically in Redis. A claim moves each due delivery's score in ``{prefix}due:{target}``
to the end of its lease and stamps a fresh token, so a claimed delivery is due again by itself
if nobody settles it; settling checks that token.
"""

__all__ = ["CLAIM", "LIST_DELIVERIES", "PRUNE", "REQUEUE", "SETTLE"]

# The outbox. A delivery is returned as {id, hgetall..., event member}.
_DELIVERY_ROW = """
local function row(prefix, n)
    local key = prefix .. 'delivery:' .. n
    local fields = redis.call('HGETALL', key)
    local seq = redis.call('HGET', key, 'seq')
    local event = redis.call('ZRANGE', prefix .. 'events', seq, seq, 'BYSCORE')
    return {n, fields, event[1] or ''}
end
"""

# ARGV: prefix, now, lease end, token, limit, targets...
CLAIM = (
    _DELIVERY_ROW
    + """
local prefix, now, lease_end, token, limit = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local found = {}
for i = 6, #ARGV do
    local due = redis.call('ZRANGE', prefix .. 'due:' .. ARGV[i], '-inf', now, 'BYSCORE', 'LIMIT', 0, limit,
        'WITHSCORES')
    for j = 1, #due, 2 do
        found[#found + 1] = {tonumber(due[j + 1]), tonumber(due[j]), ARGV[i]}
    end
end
table.sort(found, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
end)
local out = {}
for k = 1, math.min(limit, #found) do
    local n, target = found[k][2], found[k][3]
    redis.call('HSET', prefix .. 'delivery:' .. n, 'due_us', lease_end, 'lease', token)
    redis.call('ZADD', prefix .. 'due:' .. target, lease_end, n)
    out[#out + 1] = row(prefix, n)
end
return out
"""
)

# ARGV: prefix, id, token, state, due ('' = keep), now, has error ('1'/'0'), error
SETTLE = """
local prefix, n, token, state = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local key = prefix .. 'delivery:' .. n
local current = redis.call('HMGET', key, 'state', 'lease', 'target')
if current[1] ~= 'pending' or current[2] ~= token then
    return 0
end
redis.call('HINCRBY', key, 'attempts', 1)
redis.call('HSET', key, 'state', state, 'updated_us', ARGV[6])
redis.call('HDEL', key, 'lease')
if ARGV[7] == '1' then
    redis.call('HSET', key, 'error', ARGV[8])
else
    redis.call('HDEL', key, 'error')
end
if state == 'pending' then
    redis.call('HSET', key, 'due_us', ARGV[5])
    redis.call('ZADD', prefix .. 'due:' .. current[3], ARGV[5], n)
else
    redis.call('ZREM', prefix .. 'due:' .. current[3], n)
end
if state == 'failed' then
    redis.call('ZADD', prefix .. 'deliveries:failed', n, n)
end
return 1
"""

# ARGV: prefix, id, now
REQUEUE = """
local prefix, n, now = ARGV[1], ARGV[2], ARGV[3]
local key = prefix .. 'delivery:' .. n
local current = redis.call('HMGET', key, 'state', 'target')
if current[1] ~= 'failed' then
    return 0
end
redis.call('HSET', key, 'state', 'pending', 'attempts', 0, 'due_us', now, 'updated_us', now)
redis.call('HDEL', key, 'lease')
redis.call('ZADD', prefix .. 'due:' .. current[2], now, n)
redis.call('ZREM', prefix .. 'deliveries:failed', n)
return 1
"""

# ARGV: prefix, state ('' = any), target ('' = any), offset, limit, has target ('1'/'0')
LIST_DELIVERIES = (
    _DELIVERY_ROW
    + """
local prefix, state, target = ARGV[1], ARGV[2], ARGV[3]
local offset, limit, by_target = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6] == '1'
local source = prefix .. (state == 'failed' and 'deliveries:failed' or 'deliveries')
local out, skipped, start, page = {}, 0, 0, 200
while #out < limit do
    local ids = redis.call('ZRANGE', source, start, start + page - 1, 'REV')
    if #ids == 0 then break end
    for _, n in ipairs(ids) do
        local f = redis.call('HMGET', prefix .. 'delivery:' .. n, 'state', 'target')
        if (state == '' or f[1] == state) and (not by_target or f[2] == target) then
            if skipped < offset then
                skipped = skipped + 1
            elseif #out < limit then
                out[#out + 1] = row(prefix, n)
            end
        end
    end
    start = start + page
end
return out
"""
)

# ARGV: prefix, before. Events are ``seq \n id \n kind \n session \n agent \n at \n data``.
PRUNE = """
local prefix, before = ARGV[1], tonumber(ARGV[2])
local held, delivered = {}, {}
for _, n in ipairs(redis.call('ZRANGE', prefix .. 'deliveries', 0, -1)) do
    local f = redis.call('HMGET', prefix .. 'delivery:' .. n, 'state', 'seq')
    if f[1] == 'delivered' then
        delivered[f[2]] = delivered[f[2]] or {}
        table.insert(delivered[f[2]], n)
    else
        held[f[2]] = true
    end
end
local gone = 0
for _, member in ipairs(redis.call('ZRANGE', prefix .. 'events', 0, -1)) do
    local fields, start = {}, 1
    for k = 1, 6 do
        local stop = string.find(member, '\\n', start, true)
        fields[k] = string.sub(member, start, stop - 1)
        start = stop + 1
    end
    local seq = fields[1]
    if tonumber(fields[6]) < before and not held[seq] then
        redis.call('ZREM', prefix .. 'events', member)
        for _, n in ipairs(delivered[seq] or {}) do
            redis.call('DEL', prefix .. 'delivery:' .. n)
            redis.call('ZREM', prefix .. 'deliveries', n)
        end
        gone = gone + 1
    end
end
return gone
"""
