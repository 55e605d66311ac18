-- QUORUM_ENQUEUE: a Redlock waiter's attempt on one master: take the lock if it is free here
-- (or find it handed over to us), else queue the waiter here (or refresh its entry).
--
-- KEYS[1] lock key, KEYS[2] the "waiters exist" mark, KEYS[3] the woken waiter's turn, KEYS[4]
-- the "waiters block here" mark, KEYS[5] the queue (`<base>:rq`, a sorted set of waiters'
-- tokens), KEYS[6] this waiter's entry (`<base>:e:<token>`, holding `lease:round:at:wid`, `at`
-- the index of the master it blocks on; it lives while the waiter comes back).
-- ARGV[1] token, ARGV[2] lease in ms, ARGV[3] how long the marks and the entry must live at
-- least, in ms, ARGV[4] "1" when a release's wake-up woke this waiter (it takes its turn), else
-- "0", ARGV[5] "1" on the master the waiter blocks on next, else "0", ARGV[6] the waiter's id
-- (its signal list is `<base>:s:<wid>`), ARGV[7] its place in the queue (the same score on every
-- master: when it first queued), ARGV[8] the number of this round of the waiter, ARGV[9] until
-- when its entry lives, in Unix ms of its clock (an absolute time, so that a round that ran late,
-- the master having been stopped, queues nobody who has gone since), ARGV[10] the index of the
-- master the waiter blocks on next (among the client's masters).
-- Returns {1, 0} when this attempt set the key here, {1, 1} when the key held our token already
-- (a release handed the lock over to us here, or an earlier try of this round set it): the lease
-- is reset; {0, pttl, token} when another owner holds it here (pttl -1: no expiry); {0, pttl, ''}
-- while the lock is free but the turn of a woken waiter of an older version (pttl: the turn's).
-- Queued or not, the marks of `quorum_acquire.lua` are kept for clients of older versions.
-- Granted here, the waiter is queued too (or stays queued): the attempt may fail on the other
-- masters, and a waiter queued on some masters only would make them name different first
-- waiters (with one master of three stopped, the two left then split every handover). Its
-- entries go when it releases the lock or leaves the wait (`quorum_handover.lua`, on every
-- master); until then a master that hands the lock over skips its own holder.
--
-- The queue orders waiters by when they first queued (the waiter's clock, the same score on
-- every master), so that every master that has the same live waiters names the same first one;
-- a release (`quorum_handover.lua`) writes that waiter's token into the key on every master.
local ttl = tonumber(ARGV[3])
if redis.call('PTTL', KEYS[2]) < ttl then redis.call('SET', KEYS[2], '1', 'PX', ttl) end
if ARGV[5] == '1' and redis.call('PTTL', KEYS[4]) < ttl then
  redis.call('SET', KEYS[4], '1', 'PX', ttl)
end
local function join()
  local entry = ARGV[2] .. ':' .. ARGV[8] .. ':' .. ARGV[10] .. ':' .. ARGV[6]
  redis.call('SET', KEYS[6], entry, 'PXAT', ARGV[9])
  redis.call('ZADD', KEYS[5], 'NX', ARGV[7], ARGV[1])
  local keep = ttl + 10000
  if redis.call('PTTL', KEYS[5]) < keep then redis.call('PEXPIRE', KEYS[5], 2 * keep) end
end
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, 1}
end
if cur then
  join()
  return {0, redis.call('PTTL', KEYS[1]), cur}
end
if ARGV[4] == '1' then
  redis.call('DEL', KEYS[3])
else
  local turn = redis.call('PTTL', KEYS[3])
  if turn > 0 then
    join()
    return {0, turn, ''}
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
join()
return {1, 0}
