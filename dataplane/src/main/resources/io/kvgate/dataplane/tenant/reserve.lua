-- kvgate rate_limit_store: reserve one request of a tenant against all its limits, atomically (see docs/tenants.md).
-- KEYS: 1 requests_per_minute, 2 tokens_per_minute, 3 tokens_per_day (rings: hash of bucket slot -> count, plus
--       'h' = newest bucket epoch, 's' = the window's sum, 'l' = the newest bucket added to), 4 max_concurrent
--       (sorted set: reservation id -> lease end)
-- ARGV: 1 requests_per_minute, 2 tokens_per_minute, 3 tokens_per_day, 4 max_concurrent (0: no such limit),
--       5 tokens to hold, 6 reservation id, 7 lease ms (how long a crashed replica's in-flight slot lasts)
-- Returns {granted, denied kind (0 none, 1 max_concurrent, 2 requests_per_minute, 3 tokens_per_minute,
--          4 tokens_per_day), limit, used, asked, wait ms (-1 never fits), requests remaining (-1: no limit),
--          requests reset ms, tokens remaining (-1: no limit), tokens reset ms, minute bucket, day bucket}
-- Time is the Redis server's (one clock for every replica). Minute windows: 600 buckets of 100 ms; the day: 1,440 of
-- 1 min. A bucket leaves whole, at most one bucket early for the request that filled it: the overshoot of any window is
-- at most what one bucket admitted (0.17 % of a minute at a steady rate).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local MIN_MS, MIN_N, DAY_MS, DAY_N = 100, 600, 60000, 1440

-- Moves a ring to now (buckets that left the window are dropped); returns its epoch and sum.
local function advance(key, bms, n)
  local e = math.floor(now / bms)
  local v = redis.call('HMGET', key, 'h', 's')
  local head = tonumber(v[1])
  if not head then return e, 0 end
  local sum = tonumber(v[2]) or 0
  if e <= head then return head, sum end
  if e - head >= n then
    redis.call('DEL', key)
    return e, 0
  end
  for x = head + 1, e do
    local f = tostring(x % n)
    local c = tonumber(redis.call('HGET', key, f))
    if c then
      sum = sum - c
      redis.call('HDEL', key, f)
    end
  end
  redis.call('HSET', key, 'h', e, 's', sum)
  return e, sum
end

-- The ring's counts from oldest to newest bucket.
local function counts(key, e, n)
  local fields = {}
  for x = e - n + 1, e do fields[#fields + 1] = tostring(x % n) end
  local v = redis.call('HMGET', key, unpack(fields))
  local out = {}
  for i = 1, n do out[i] = tonumber(v[i]) or 0 end
  return out
end

-- How long until `needed` more fits under `limit` (0: now, -1: never).
local function wait(key, e, sum, bms, n, limit, needed)
  if sum + needed <= limit then return 0 end
  if needed > limit then return -1 end
  local c = counts(key, e, n)
  local freed = 0
  for i = 1, n do
    freed = freed + c[i]
    if sum - freed + needed <= limit then
      return math.max(0, (e - n + i + n) * bms - now)
    end
  end
  return math.max(0, (e + n) * bms - now)
end

-- How long until the window is empty: when the newest bucket that was added to ('l') leaves. O(1): scanning the
-- ring for its newest non-empty bucket (an HMGET of 600 fields, twice per reservation) made the script cost
-- milliseconds of Redis's single thread. A settlement that brings that bucket back to 0 leaves 'l' as it was, so the
-- reset can read up to a window late, never early.
local function untilEmpty(key, sum, bms, n)
  if sum <= 0 then return 0 end
  local l = tonumber(redis.call('HGET', key, 'l'))
  if not l then return n * bms end
  return math.max(0, (l + n) * bms - now)
end

local function add(key, e, sum, bms, n, amount)
  redis.call('HINCRBY', key, tostring(e % n), amount)
  redis.call('HSET', key, 'h', e, 's', sum + amount, 'l', e)
  redis.call('PEXPIRE', key, bms * n + 1000)
end

local rpm, tpm, tpd, conc = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local tokens, id, lease = tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])

local ce, rsum, me, tsum, de, dsum = 0, 0, 0, 0, 0, 0
local inflight = 0
if conc > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  inflight = redis.call('ZCARD', KEYS[4])
end
if rpm > 0 then ce, rsum = advance(KEYS[1], MIN_MS, MIN_N) end
if tpm > 0 then me, tsum = advance(KEYS[2], MIN_MS, MIN_N) else me = math.floor(now / MIN_MS) end
if tpd > 0 then de, dsum = advance(KEYS[3], DAY_MS, DAY_N) else de = math.floor(now / DAY_MS) end

local kind, limit, used, asked, w = 0, 0, 0, 0, 0
if conc > 0 and inflight + 1 > conc then
  kind, limit, used, asked, w = 1, conc, inflight, 1, 1000
elseif rpm > 0 then
  w = wait(KEYS[1], ce, rsum, MIN_MS, MIN_N, rpm, 1)
  if w ~= 0 then kind, limit, used, asked = 2, rpm, rsum, 1 end
end
if kind == 0 and tpm > 0 then
  w = wait(KEYS[2], me, tsum, MIN_MS, MIN_N, tpm, tokens)
  if w ~= 0 then kind, limit, used, asked = 3, tpm, tsum, tokens end
end
if kind == 0 and tpd > 0 then
  w = wait(KEYS[3], de, dsum, DAY_MS, DAY_N, tpd, tokens)
  if w ~= 0 then kind, limit, used, asked = 4, tpd, dsum, tokens end
end

if kind == 0 then
  if conc > 0 then
    redis.call('ZADD', KEYS[4], now + lease, id)
    redis.call('PEXPIRE', KEYS[4], lease)
  end
  if rpm > 0 then add(KEYS[1], ce, rsum, MIN_MS, MIN_N, 1); rsum = rsum + 1 end
  if tpm > 0 then add(KEYS[2], me, tsum, MIN_MS, MIN_N, tokens); tsum = tsum + tokens end
  if tpd > 0 then add(KEYS[3], de, dsum, DAY_MS, DAY_N, tokens) end
end

local rr, rreset, tr, treset = -1, 0, -1, 0
if rpm > 0 then
  rr = math.max(0, rpm - rsum)
  rreset = untilEmpty(KEYS[1], rsum, MIN_MS, MIN_N)
end
if tpm > 0 then
  tr = math.max(0, tpm - tsum)
  treset = untilEmpty(KEYS[2], tsum, MIN_MS, MIN_N)
end
return {kind == 0 and 1 or 0, kind, limit, used, asked, w, rr, rreset, tr, treset, me, de}
