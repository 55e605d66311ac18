-- The end of a Redlock release on one master (QUORUM_RELEASE, QUORUM_HANDOVER): whether waiters
-- marked the lock as wanted here and whether some block here, which the releaser wakes once
-- every master is done.
--
-- KEYS[2] the "waiters exist" mark, KEYS[3] the woken waiter's turn, KEYS[4] the "waiters block
-- here" mark; ARGV[2] how long the turn lasts, in ms ("0": no turn, no waiter is woken).
-- `released` is 1 when the key held our token (and no longer does), else 0. Returns released +
-- 2 × wanted + 4 × blocked; when the lock is wanted and was ours, the turn is set for the waiter
-- the releaser wakes.
local function wanted_reply(released)
  if redis.call('PTTL', KEYS[2]) > 0 then
    if released == 1 and ARGV[2] ~= '0' then redis.call('SET', KEYS[3], '1', 'PX', ARGV[2]) end
    if redis.call('PTTL', KEYS[4]) > 0 then return released + 6 end
    return released + 2
  end
  return released
end
