-- FENCED_INCR: add to the resource's integer if the writer's fencing token is not older than
-- the resource's fence (`lib/fenced.lua`), and advance the fence to the token.
--
-- KEYS[1] the resource, KEYS[2] its fence.
-- ARGV[1] the writer's fencing token (decimal), ARGV[2] the increment.
-- Returns {1, new value} when written, or {0, fence} when the token is older than the
-- resource's fence (nothing written).
local stored = stale_fence(KEYS[2], ARGV[1])
if stored then return {0, stored} end
local value = redis.call('INCRBY', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[1])
return {1, value}
