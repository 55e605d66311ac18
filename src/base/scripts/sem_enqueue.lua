-- SEM_ENQUEUE: take k permits if the queue lets us, else (unless it is a single attempt)
-- queue this waiter or refresh its entry. Also moves the queue along.
--
-- KEYS[1..2] as in lib/sem.lua, KEYS[3] this waiter's liveness key, KEYS[4] its signal list.
-- ARGV[1] token, ARGV[2] k, ARGV[3] n (permits of the semaphore), ARGV[4] lease ms, ARGV[5]
-- the queue entry (`wid:k:n:lease:token`), ARGV[6] entry lifetime ms, ARGV[7] "try", "first"
-- or "again".
-- Returns {1, 0, ms left of our lease} when the permits are ours, {0, 0, ms until the first
-- holder's lease runs out} when queued or refused; error replies `PERMITS <n>` when the
-- semaphore has another number of permits, `WRONGTYPE` when the name is in use as a lock.
if wrongtype then
  return redis.error_reply('WRONGTYPE the name is in use as a lock, not a semaphore')
end
local token, k, n, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local entry, mode, alive, sig = ARGV[5], ARGV[7], KEYS[3], KEYS[4]
local s = redis.call('ZSCORE', K, k .. ':' .. token)
if s and tonumber(s) > now then
  leave_queue(Q, entry, alive, sig)
  return {1, 0, tonumber(s) - now}
end
local size, used = state()
if size and size ~= n then
  sync()
  return redis.error_reply('PERMITS ' .. size)
end
local queued = redis.call('EXISTS', alive) == 1
local me = nil
if queued then me = string.match(entry, '^([^:]+):') end
local mine
mine, used = dispatch(me, n, used)
if mine then
  redis.call('DEL', sig)
  return {1, 0, lease}
end
if not queued and redis.call('LLEN', Q) == 0 and used + k <= n then
  grant(token, k, n, lease)
  return {1, 0, lease}
end
sync()
if mode == 'try' then return {0, 0, next_ms()} end
join_queue(Q, alive, entry, tonumber(ARGV[6]), mode == 'again')
return {0, 0, next_ms()}
