-- The fence of a resource of fenced writes (`<resource>:fenced`, passed in KEYS): the largest
-- fencing token a write to the resource was applied with, as decimal text. A write applies only
-- when its token is not older than it, and advances it, in one script. Tokens reach 2^63, beyond
-- the integers a Lua number holds exactly, so they are compared as text: of two decimals without
-- leading zeros, the longer is larger, and of two as long, the one larger byte by byte.

-- The resource's fence when `token` is older than it (the write must change nothing), else
-- false (no fence yet, or the token is not older).
local function stale_fence(fence_key, token)
  local stored = redis.call('GET', fence_key)
  if not stored then return false end
  if #token ~= #stored then
    if #token < #stored then return stored end
    return false
  end
  if token < stored then return stored end
  return false
end
