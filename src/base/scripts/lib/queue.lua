-- A lock's queue of waiters (a list of entries in arrival order, each starting `wid:`), and each
-- waiter's liveness key (`<base>:e:<wid>`, or `<base>:rw:e:<wid>`, `<base>:sem:e:<wid>`): it
-- exists while the waiter's entry is queued and the waiter refreshes it on every re-check, so the
-- entry of a waiter that died is skipped once its liveness key has expired. The queue's expiry is
-- only ever extended, to at least that of every liveness key.

-- Queues `entry` at the back (a first call, or a re-check that finds its entry used up), or
-- keeps its place (a re-check): either way the waiter is alive for `ttl` ms more. A re-check
-- (`again`) whose liveness key ran out while it could not reach the server (a failover: the
-- entry reached the new master, its liveness key expired there before the waiter came back)
-- keeps its place too while its entry is still queued: no release has skipped it meanwhile.
-- The queue itself outlives its last liveness key by 10 s, so that it survives such a wait.
local function join_queue(queue, alive, entry, ttl, again)
  if redis.call('SET', alive, '1', 'PX', ttl, 'NX') then
    if not (again and redis.call('LPOS', queue, entry)) then
      redis.call('RPUSH', queue, entry)
    end
  else
    redis.call('PEXPIRE', alive, ttl)
  end
  local keep = ttl + 10000
  if redis.call('PTTL', queue) < keep then redis.call('PEXPIRE', queue, 2 * keep) end
end

-- Removes the waiter's entry, liveness key and signal list (it has the lock, or gave up).
local function leave_queue(queue, entry, alive, sig)
  redis.call('LREM', queue, 1, entry)
  redis.call('DEL', alive, sig)
end

-- The first entry of `queue` whose waiter is alive, split by `pattern` (its first capture is the
-- wid; the liveness key is `base .. 'e:' .. wid`), after dropping the entries before it that are
-- dead or malformed; nil when there is none. The entry stays queued.
local function live_head(queue, base, pattern)
  while true do
    local head = redis.call('LINDEX', queue, 0)
    if not head then return nil end
    local parts = {string.match(head, pattern)}
    if not parts[1] or redis.call('EXISTS', base .. 'e:' .. parts[1]) == 0 then
      redis.call('LPOP', queue)
    else
      return unpack(parts)
    end
  end
end
