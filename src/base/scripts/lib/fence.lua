-- The fencing counter of a lock (`<base>:fence`, passed in KEYS). A fenced grant increments it
-- before it sets the lock key: a script that fails midway keeps its earlier writes, and a failing
-- INCR must not leave the key set with nobody holding it.

-- The fence of a new grant: the counter incremented when `on` is '1' (the grant is fenced),
-- else 0.
local function next_fence(counter, on)
  if on == '1' then return redis.call('INCR', counter) end
  return 0
end

-- The counter as it is (0 before the first fenced grant): the fence of a grant that is already
-- ours but whose signal was taken by an abandoned BLPOP (the counter cannot have moved since).
local function current_fence(counter)
  return tonumber(redis.call('GET', counter) or '0')
end
