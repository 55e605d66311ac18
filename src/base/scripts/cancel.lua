-- CANCEL: a waiter whose wait bound ran out leaves the queue.
--
-- KEYS[1] lock key, KEYS[2] queue, KEYS[3] this waiter's liveness key, KEYS[4] its signal
-- list, KEYS[5] fencing counter (read when the grant was popped by an abandoned BLPOP, or the
-- list's head is a cancel mark: the counter cannot have moved since, as the lock is ours).
-- ARGV[1] token, ARGV[2] the waiter's queue entry.
-- Returns {1, fence, pttl} when a release had handed the lock to this waiter after all (it is
-- ours), else {0, 0, 0}.
redis.call('LREM', KEYS[2], 1, ARGV[2])
local f = pop_grant(KEYS[4])
redis.call('DEL', KEYS[3], KEYS[4])
if redis.call('GET', KEYS[1]) == ARGV[1] then
  f = f or current_fence(KEYS[5])
  return {1, f, redis.call('PTTL', KEYS[1])}
end
return {0, 0, 0}
