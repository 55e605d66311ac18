-- RW_LEAVE: a waiter whose wait ended (bound, cancel, error) leaves the queue; the queue moves
-- on, as its entry may have held back the ones behind it.
--
-- KEYS as RW_ENQUEUE. ARGV[1] token, ARGV[2] the queue entry, ARGV[3] "r" or "w".
-- Returns {1, fence, ms left} when a release had handed the lock to this waiter after all (it
-- is ours), else {0, 0, 0}.
if wrongtype then return {0, 0, 0} end
local token, entry, kind = ARGV[1], ARGV[2], ARGV[3]
redis.call('LREM', Q, 1, entry)
local f = pop_grant(KEYS[6])
redis.call('DEL', KEYS[5], KEYS[6])
if holds(kind, token) then
  f = f or current_fence(F)
  return {1, f, left_ms(kind, token)}
end
dispatch(nil)
return {0, 0, 0}
