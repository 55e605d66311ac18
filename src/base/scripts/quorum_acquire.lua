-- QUORUM_ACQUIRE: the retry of a plain Redlock attempt whose outcome on one master is unknown (the
-- first try is a plain `SET NX PX`); with the marks, the attempt of an earlier version's waiter
-- (this version's waiters run `quorum_enqueue.lua`).
--
-- KEYS[1] lock key, KEYS[2] the "waiters exist" mark, KEYS[3] the woken waiter's turn, KEYS[4]
-- the "waiters block here" mark.
-- ARGV[1] token, ARGV[2] lease in ms, ARGV[3] how long the marks must live at least, in ms ("0":
-- leave them alone), ARGV[4] "1" when a release woke this waiter (it takes its turn), else "0",
-- ARGV[5] "1" on the master the waiter blocks on next (it sets the "waiters block here" mark
-- too), else "0".
-- Returns {1, 0} when this master holds the lock for us now (set here, or it held our token
-- already: the lease is reset), or {0, pttl, token} when another owner holds it here (pttl -1:
-- the key has no expiry; token: that owner's, so that a waiter can tell a holder that a
-- majority names from attempts that split the masters), or {0, pttl, ''} while the lock is
-- free but the turn of a woken waiter (pttl: the turn's).
--
-- Redlock (`quorum/`): each QUORUM_ script runs on one master of several. A lock is held where a
-- majority of masters hold its key with the owner's token; each master only ever sees its own
-- key. Waiters queue on every master (`quorum_enqueue.lua`) and a release hands the lock to the
-- first of them (`quorum_handover.lua`). Waiters of earlier versions do not queue: they mark the
-- name as wanted on every master and block on one master's wake list (the name's home master, or
-- the next one while it is away), marked there; a release pushes one wake-up onto the home
-- master's list and onto every list marked so (QUORUM_WAKE), and leaves the turn to the woken
-- waiter for a moment: until it has tried, other waiters' attempts are refused.
local ttl = tonumber(ARGV[3])
if ttl > 0 then
  if redis.call('PTTL', KEYS[2]) < ttl then redis.call('SET', KEYS[2], '1', 'PX', ttl) end
  if ARGV[5] == '1' and redis.call('PTTL', KEYS[4]) < ttl then
    redis.call('SET', KEYS[4], '1', 'PX', ttl)
  end
end
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, 0}
end
if cur then return {0, redis.call('PTTL', KEYS[1]), cur} end
if ARGV[4] == '1' then
  redis.call('DEL', KEYS[3])
else
  local turn = redis.call('PTTL', KEYS[3])
  if turn > 0 then return {0, turn, ''} end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, 0}
