-- EXTEND: reset the lease of a lock we still hold (renewal uses it too).
--
-- KEYS[1] lock key. ARGV[1] token, ARGV[2] lease in ms.
-- Returns 1 when extended, 0 when the key is gone or holds another token.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
