-- The server's clock (TIME), in milliseconds. Scripts that compare expiries kept as scores
-- (readers' leases, semaphore permits) read it once, at their start.
local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
