-- kvgate rate_limit_store: settle one granted reservation (see reserve.lua for the keys' layout).
-- KEYS: as reserve.lua. ARGV: 1 tokens held, 2 tokens used (-1: released: an error, a client gone, a timeout),
--       3 the minute bucket and 4 the day bucket the tokens went into, 5 reservation id,
--       6 tokens_per_minute set (1/0), 7 tokens_per_day set, 8 max_concurrent set.
-- The tokens' buckets are corrected by used - held while they are still in their window (never below zero); the
-- in-flight slot is removed. Returns 1.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local held, usedTokens = tonumber(ARGV[1]), tonumber(ARGV[2])
if usedTokens < 0 then usedTokens = 0 end
local delta = usedTokens - held

local function correct(key, bms, n, epoch)
  if delta == 0 then return end
  local v = redis.call('HMGET', key, 'h', 's')
  local head = tonumber(v[1])
  if not head then return end
  local e = math.max(head, math.floor(now / bms))
  -- Only a bucket still in the window counts; the ring is advanced by the next reserve, which drops old slots.
  if epoch > head or epoch <= e - n then return end
  local f = tostring(epoch % n)
  local c = tonumber(redis.call('HGET', key, f)) or 0
  local d = math.max(-c, delta)
  if d == 0 then return end
  redis.call('HINCRBY', key, f, d)
  redis.call('HINCRBY', key, 's', d)
end

if ARGV[6] == '1' then correct(KEYS[2], 100, 600, tonumber(ARGV[3])) end
if ARGV[7] == '1' then correct(KEYS[3], 60000, 1440, tonumber(ARGV[4])) end
if ARGV[8] == '1' then redis.call('ZREM', KEYS[4], ARGV[5]) end
return 1
