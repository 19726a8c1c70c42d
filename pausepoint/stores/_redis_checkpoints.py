"""The Lua scripts of ``RedisSessionStore``'s checkpoints (the layout is in ``redis.py``).

Each runs atomically in Redis. A session's checkpoint is a hash naming its head and its base's
version, a list of extensions, and a key per base, by version: a base a newer one replaced
expires later, so that a process reading it in part (``_partial``) still finds it.
"""

__all__ = ["EXTEND_CHECKPOINT", "READ_CHECKPOINT", "WRITE_CHECKPOINT"]

# KEYS: summary, checkpoint, extensions, bases. ARGV: version, data, the bases' key stem, the
# milliseconds a replaced base is kept, how many replaced bases are kept at most. Keeps a new base
# only for a version the log holds and only over an older checkpoint (its head), dropping the old
# one's extensions; the old base expires later (a process may be reading it in part), and the
# replaced bases beyond the newest few, and those expired, leave. Returns 1 if kept.
WRITE_CHECKPOINT = """
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
EXTEND_CHECKPOINT = """
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
READ_CHECKPOINT = """
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
