"""The Lua scripts of :class:`~idempotency.stores.redis.RedisStore`: every transition of a
record is one script, run atomically by the Redis server and judged by its clock
(``TIME``). A record is a hash: ``state`` (``p`` in progress, ``c`` completed), ``fp``
(the request fingerprint), ``fence``, ``lease`` (ms), the stored ``status``, ``headers``
and ``body``, the recovery point ``rp`` and its data ``rd``, and a completed record's
tag ``mac`` (:mod:`~idempotency.stores.authentication`)."""

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

#: A replay (a completed record) reads the hash and its TTL and nothing else: the clock is
#: read only where a lease is judged or set (``TIME`` and its arithmetic cost the server
#: more than the two reads a replay needs). The TTL goes back relative, in ms.
CLAIM = (
    """
local rec = redis.call('HMGET', KEYS[1], 'state', 'fp', 'lease', 'status', 'headers', 'body',
  'rp', 'rd', 'fence', 'mac')
if rec[1] then
  if rec[1] == 'c' then
    return {'completed', rec[4], rec[5], rec[6], redis.call('PTTL', KEYS[1]), rec[2] or '',
      rec[9] or '', rec[10] or ''}
  end
  if rec[2] ~= ARGV[1] then return {'mismatch', rec[2] or ''} end
end
"""
    + _NOW
    + """
if rec[1] then
  local lease = tonumber(rec[3]) or 0
  if lease > now then return {'in_progress', tostring(lease - now), rec[7] or '', rec[8] or ''} end
  redis.call('HSET', KEYS[1], 'fence', ARGV[2], 'lease', tostring(now + tonumber(ARGV[3])))
  return {'claimed', rec[7] or '', rec[8] or '', 'takeover'}
end
redis.call('HSET', KEYS[1], 'state', 'p', 'fp', ARGV[1], 'fence', ARGV[2],
  'lease', tostring(now + tonumber(ARGV[3])), 'method', ARGV[5], 'route', ARGV[6],
  'created', tostring(now))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {'claimed', '', ''}
"""
)

#: No clock and no ``HDEL``: the lease is emptied in the same ``HSET`` (a completed record's
#: lease is never read), and when it completed is its expiry less the TTL. Each
#: ``redis.call`` costs the server more than the command it runs.
COMPLETE = """
local r = redis.call('HMGET', KEYS[1], 'state', 'fence')
if r[1] ~= 'p' or r[2] ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', 'c', 'status', ARGV[2], 'headers', ARGV[3], 'body', ARGV[4],
  'lease', '', 'mac', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
"""

RELEASE = (
    _NOW
    + """
local r = redis.call('HMGET', KEYS[1], 'state', 'fence', 'rp')
if r[1] ~= 'p' or r[2] ~= ARGV[1] then return 0 end
if r[3] and r[3] ~= '' then
  redis.call('HSET', KEYS[1], 'lease', tostring(now))
else
  redis.call('DEL', KEYS[1])
end
return 1
"""
)

EXTEND = (
    _NOW
    + """
local r = redis.call('HMGET', KEYS[1], 'state', 'fence')
if r[1] ~= 'p' or r[2] ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'lease', tostring(now + tonumber(ARGV[2])))
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
"""
)

SAVE_RECOVERY_POINT = """
local r = redis.call('HMGET', KEYS[1], 'state', 'fence')
if r[1] ~= 'p' or r[2] ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'rp', ARGV[2], 'rd', ARGV[3])
return 1
"""

#: Count one new record of a scope in its window: the counter expires with the window.
COUNT_NEW_RECORD = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n
"""
