-- Needs lib/fence.lua and lib/signal.lua before it.
--
-- The handoff of an exclusive lock on release: `key` goes straight to the oldest live waiter in
-- `queue` (`<base>:q`, entries `wid:lease:fence:token`; the waiter's liveness key and signal
-- list are `<base>:e:<wid>` and `<base>:s:<wid>`, in the same Cluster slot), which is woken with
-- the grant's fence; with no live waiter, `key` is deleted. `counter` is the fencing counter.
-- Entries of dead waiters are dropped on the way: the DEL of the liveness key both tells whether
-- the waiter is alive and cleans up.
local function handoff(key, counter, queue)
  local base = string.sub(queue, 1, -2)
  while true do
    local head = redis.call('LPOP', queue)
    if not head then break end
    local wid, lease, fence, token = string.match(head, '^([^:]+):(%d+):(%d):(.+)$')
    if wid and redis.call('DEL', base .. 'e:' .. wid) == 1 then
      local f = next_fence(counter, fence)
      redis.call('SET', key, token, 'PX', lease)
      signal(base .. 's:' .. wid, f, lease)
      return
    end
  end
  redis.call('DEL', key)
end
