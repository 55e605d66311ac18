-- SET_EXTEND: resets the lease of every name of a set, if every one still holds the token
-- (renewal uses it too).
--
-- KEYS: the lock keys. ARGV[1] token, ARGV[2] lease ms.
-- Returns 1 when extended, 0 when some name no longer held the token (nothing is extended).
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end
end
for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
return 1
