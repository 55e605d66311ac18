-- A waiter's signal list (`<base>:s:<wid>`, `<base>:rw:s:<wid>`, `<base>:sem:s:<wid>`): the
-- waiter blocks on it with BLPOP. A grant pushes the grant's fence (a number; '0' for permits,
-- 'mismatch' for permits of another size); a cancellation pushes the cancel mark.

-- Pushes `value` onto `list`, which then lives `ms` milliseconds (so a signal for a waiter that
-- is gone does not stay).
local function signal(list, value, ms)
  redis.call('RPUSH', list, value)
  redis.call('PEXPIRE', list, ms)
end

-- Pops the head of `list`: the fence of a grant that no BLPOP took, or nil when the list is empty
-- or its head was a cancel mark (dropped all the same).
local function pop_grant(list)
  return tonumber(redis.call('LPOP', list) or '')
end
