-- SET_ACQUIRE: takes every name of a set if none is held by another owner; otherwise passes on
-- the names handed to this waiter and (unless it is a single attempt, or leaving) queues it
-- behind the first held name.
--
-- KEYS, five per name in the set's order: lock key, fencing counter, queue, this waiter's
-- liveness key and signal list in that name's slot.
-- ARGV[1] token, ARGV[2] lease ms, ARGV[3] "1" for fencing, ARGV[4] "try", "first", "again"
-- or "leave" (the wait ended: never take the set, leave every queue), ARGV[5] the queue entry
-- (`wid:lease:0:token`), ARGV[6] entry lifetime ms.
-- Returns {1, fence1, fence2, ...} when the set is ours (fences 0 without fencing), or
-- {0, pttl of the first held name's key} (0 after "leave").
--
-- A set of names is a set of exclusive locks, each its own key holding the set's one token, so
-- every name interoperates with exclusive locks and plain `SET NX PX` clients of that name. The
-- set is taken all or none by one script. A set waiter that finds a name held queues as an
-- ordinary exclusive waiter of that name (entry `wid:lease:0:token`); the holder's RELEASE hands
-- it that name and wakes it, and its re-check then takes the whole set if the other names are
-- free, or passes the name straight on (the same handoff as RELEASE) and queues behind the next
-- held one. So a set waiter never holds some names while it waits for others.
local n = #KEYS / 5
local token, lease, mode, entry = ARGV[1], ARGV[2], ARGV[4], ARGV[5]
local function key(i, j) return KEYS[(i - 1) * 5 + j] end
local busy = nil
for i = 1, n do
  local cur = redis.call('GET', key(i, 1))
  if cur and cur ~= token then
    busy = i
    break
  end
end
if not busy and mode ~= 'leave' then
  local out = {1}
  for i = 1, n do
    local f = next_fence(key(i, 2), ARGV[3])
    redis.call('SET', key(i, 1), token, 'PX', lease)
    if mode == 'again' then leave_queue(key(i, 3), entry, key(i, 4), key(i, 5)) end
    out[i + 1] = f
  end
  return out
end
for i = 1, n do
  if redis.call('GET', key(i, 1)) == token then handoff(key(i, 1), key(i, 2), key(i, 3)) end
end
if mode == 'try' then return {0, redis.call('PTTL', key(busy, 1))} end
for i = 1, n do
  if i ~= busy then
    if redis.call('EXISTS', key(i, 4)) == 1 then redis.call('LREM', key(i, 3), 1, entry) end
    redis.call('DEL', key(i, 4), key(i, 5))
  end
end
if mode == 'leave' then
  if busy then leave_queue(key(busy, 3), entry, key(busy, 4), key(busy, 5)) end
  return {0, 0}
end
join_queue(key(busy, 3), key(busy, 4), entry, tonumber(ARGV[6]), mode == 'again')
return {0, redis.call('PTTL', key(busy, 1))}
