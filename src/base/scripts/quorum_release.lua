-- QUORUM_RELEASE: delete the key on one master if it holds our token; tell whether waiters
-- marked the lock as wanted here and whether some block here (the releaser then wakes them, once
-- every master is done).
--
-- KEYS[1] lock key, KEYS[2] the "waiters exist" mark, KEYS[3] the woken waiter's turn, KEYS[4]
-- the "waiters block here" mark.
-- ARGV[1] token, ARGV[2] how long the turn lasts, in ms ("0": no turn, no waiter is woken).
-- Returns released + 2 × wanted + 4 × blocked: released 1 when the key held our token (and is
-- gone now), else 0; wanted 1 when the mark exists (the releaser then wakes a waiter: the turn is
-- set for it when the key was ours); blocked 1 when waiters block on this master. (An integer: a
-- Lua table reply costs the server about 1 µs more per call, on every master, on every release.)
local released = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  released = 1
end
return wanted_reply(released)
