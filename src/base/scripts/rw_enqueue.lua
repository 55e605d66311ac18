-- RW_ENQUEUE: take the read or write lock if the queue lets us, else (unless it is a single
-- attempt) queue this waiter or refresh its entry. Also moves the queue along (dispatch).
--
-- KEYS[1..4] as in lib/rw.lua, KEYS[5] this waiter's liveness key, KEYS[6] its signal list.
-- ARGV[1] token, ARGV[2] lease ms, ARGV[3] "1" for fencing, ARGV[4] "r" or "w", ARGV[5] the
-- queue entry (`wid:kind:lease:fence:token`), ARGV[6] entry lifetime ms, ARGV[7] "try" (one
-- attempt, never queue), "first" or "again" (a re-check).
-- Returns {1, fence, ms left of our lease} when the lock is ours (taken now, or handed over
-- since the last BLPOP), {0, 0, ms until the first holder's lease runs out (the writer's, or
-- the earliest reader's)} when queued or (with "try") refused;
-- an error reply `WRONGTYPE` when the name is in use as a semaphore.
if wrongtype then
  return redis.error_reply('WRONGTYPE the name is in use as a semaphore')
end
local token, lease, kind, entry, mode = ARGV[1], tonumber(ARGV[2]), ARGV[4], ARGV[5], ARGV[7]
local alive, sig = KEYS[5], KEYS[6]
if holds(kind, token) then
  local f = pop_grant(sig) or current_fence(F)
  leave_queue(Q, entry, alive, sig)
  return {1, f, left_ms(kind, token)}
end
local queued = redis.call('EXISTS', alive) == 1
local me = nil
if queued then me = string.match(entry, '^([^:]+):') end
local f = dispatch(me)
if f then
  redis.call('DEL', sig)
  return {1, f, lease}
end
if not queued and redis.call('LLEN', Q) == 0 then
  local cur = redis.call('GET', K)
  if not cur or (kind == 'r' and cur == MARK) then
    return {1, grant(kind, token, lease, ARGV[3]), lease}
  end
end
if mode == 'try' then return {0, 0, next_ms()} end
join_queue(Q, alive, entry, tonumber(ARGV[6]), mode == 'again')
return {0, 0, next_ms()}
