-- QUORUM_HANDOVER: a Redlock release on one master: if the key holds our token, write the token
-- of the first live waiter of the queue into it (the lock goes straight to that waiter here), or
-- delete it when no waiter of this version is queued; tell, as `quorum_release.lua` does,
-- whether waiters of older versions wait (the releaser then wakes one).
--
-- KEYS[1] lock key, KEYS[2] the "waiters exist" mark, KEYS[3] the woken waiter's turn, KEYS[4]
-- the "waiters block here" mark, KEYS[5] the queue (`<base>:rq`: waiters' tokens; a waiter's
-- entry `<base>:e:<token>` holds `lease:round:at:wid` while it lives).
-- ARGV[1] token, ARGV[2] how long the turn lasts, in ms ("0": no turn), ARGV[3] "1" to take our
-- own token out of the queue first (a holder that releases, whose entry stays queued while it
-- holds, or a waiter that gives up), else "0"; ARGV[4] (optional) the masters the releaser finds
-- stopped, as `,i,j,`: a waiter blocked on one of them would learn of the lock only when its
-- block ends, so the first live waiter blocked elsewhere gets it, if one of the first 16 is;
-- ARGV[5] (optional) "1" for a holder's release: where the key is free (a plain attempt took
-- and cleared it, or it expired here), it goes to that waiter too, so that the waiter holds
-- every master that answers (a stop of one of two it held would leave it a minority).
-- Returns `wid:round:at` (a string) when the lock was handed over to that waiter here (`+wid:…`
-- when the key was free here, ARGV[5])
-- (`round`: the waiter's round that queued it, `at`: the index of the master it blocks on, read
-- from its entry), else released + 2 × wanted + 4 × blocked (an integer), as
-- `quorum_release.lua`.
local base = string.sub(KEYS[5], 1, -4)
if ARGV[3] == '1' then
  redis.call('ZREM', KEYS[5], ARGV[1])
  redis.call('DEL', base .. ':e:' .. ARGV[1])
end
local released = 0
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] or (not cur and ARGV[5] == '1') then
  -- The first live waiter stays queued (it leaves when it releases the lock or gives up), so
  -- that a handover changes no master's queue: masters that named different first waiters
  -- (one had not queued them all yet) name the same again once they have.
  local away = ARGV[4] or ''
  local first
  local k = 0
  while k < 16 do
    local head = redis.call('ZRANGE', KEYS[5], k, k)[1]
    if not head then break end
    local lease, round, at, wid =
      string.match(redis.call('GET', base .. ':e:' .. head) or '', '^(%d+):(%d+):(%d+):(.+)$')
    if wid then
      local live = {head, lease, wid .. ':' .. round .. ':' .. at}
      if not string.find(away, ',' .. at .. ',', 1, true) then
        first = live
        break
      end
      first = first or live
      k = k + 1
    else
      redis.call('ZREM', KEYS[5], head)
    end
  end
  if first then
    redis.call('SET', KEYS[1], first[1], 'PX', first[2])
    if cur then return first[3] end
    return '+' .. first[3]
  end
  if cur then
    redis.call('DEL', KEYS[1])
    released = 1
  end
end
return wanted_reply(released)
