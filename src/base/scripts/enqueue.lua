-- ENQUEUE: a waiter's atomic "take it if free, else queue me (or refresh my entry)".
--
-- KEYS[1] lock key, KEYS[2] fencing counter, KEYS[3] queue (list), KEYS[4] this waiter's
-- liveness key, KEYS[5] this waiter's signal list.
-- ARGV[1] token, ARGV[2] lease ms, ARGV[3] "1" for fencing, ARGV[4] the waiter's queue entry
-- (`wid:lease:fence:token`), ARGV[5] entry lifetime in ms (the waiter re-checks before it runs
-- out), ARGV[6] "1" when the waiter may have queued before (a re-check), "0" on its first call.
-- Returns {1, fence, pttl} when the lock is ours now (taken here, or handed over to this waiter
-- by a release since its last BLPOP; if an abandoned BLPOP took the grant, the fence is read
-- from the counter), or {0, 0, pttl} when queued (pttl of the lock key, -1 if it has no
-- expiry).
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  local f = pop_grant(KEYS[5]) or current_fence(KEYS[2])
  leave_queue(KEYS[3], ARGV[4], KEYS[4], KEYS[5])
  return {1, f, redis.call('PTTL', KEYS[1])}
end
if not cur then
  local f = next_fence(KEYS[2], ARGV[3])
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  if ARGV[6] == '1' then leave_queue(KEYS[3], ARGV[4], KEYS[4], KEYS[5]) end
  return {1, f, tonumber(ARGV[2])}
end
join_queue(KEYS[3], KEYS[4], ARGV[4], tonumber(ARGV[5]), ARGV[6] == '1')
return {0, 0, redis.call('PTTL', KEYS[1])}
