-- kvgate rate_limit_store: a tenant's usage now, read only (what `ctl tenants` shows under a shared store; see
-- reserve.lua for the keys' layout). KEYS: as reserve.lua. No ARGV.
-- Returns {requests in the last minute, tokens in the last minute, tokens in the last day, requests in flight}: each
-- ring's sum less the buckets that left its window since it was last written (as reserve.lua's advance, not written).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function sum(key, bms, n)
  local e = math.floor(now / bms)
  local v = redis.call('HMGET', key, 'h', 's')
  local head = tonumber(v[1])
  if not head then return 0 end
  local s = tonumber(v[2]) or 0
  if e <= head then return s end
  if e - head >= n then return 0 end
  for x = head + 1, e do
    s = s - (tonumber(redis.call('HGET', key, tostring(x % n))) or 0)
  end
  return math.max(0, s)
end

return {sum(KEYS[1], 100, 600), sum(KEYS[2], 100, 600), sum(KEYS[3], 60000, 1440),
        redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf')}
