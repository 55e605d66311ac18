-- FENCED_SET: set the resource to a value if the writer's fencing token is not older than the
-- resource's fence (`lib/fenced.lua`), and advance the fence to the token.
--
-- KEYS[1] the resource, KEYS[2] its fence.
-- ARGV[1] the writer's fencing token (decimal), ARGV[2] the value.
-- Returns {1} when written, or {0, fence} when the token is older than the resource's fence
-- (nothing written).
local stored = stale_fence(KEYS[2], ARGV[1])
if stored then return {0, stored} end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[1])
return {1}
