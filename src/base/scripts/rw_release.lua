-- RW_RELEASE: releases a read or write lock and grants what can now proceed.
--
-- KEYS as in lib/rw.lua. ARGV[1] token, ARGV[2] "r" or "w".
-- Returns 1 when the lock was ours, 0 when it was not (expired, lost or taken over).
if wrongtype then return 0 end
local token = ARGV[1]
local ours
if ARGV[2] == 'w' then
  ours = redis.call('GET', K) == token
  if ours then redis.call('DEL', K) end
else
  ours = reader_holds(token)
  redis.call('ZREM', R, token)
  readers_left()
end
dispatch(nil)
if ours then return 1 end
return 0
