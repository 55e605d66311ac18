-- SET_RELEASE: releases every name of a set that still holds the set's token (handing each to
-- its oldest live exclusive waiter).
--
-- KEYS, three per name: lock key, fencing counter, queue. ARGV[1] token.
-- Returns how many names still held the token.
local function key(i, j) return KEYS[(i - 1) * 3 + j] end
local held = 0
for i = 1, #KEYS / 3 do
  if redis.call('GET', key(i, 1)) == ARGV[1] then
    handoff(key(i, 1), key(i, 2), key(i, 3))
    held = held + 1
  end
end
return held
