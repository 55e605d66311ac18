-- luacheck's settings for the Redis scripts (src/base/scripts/). scripts/test.sh runs, from here:
--   LUACHECK_DIR=$PWD/target/luacheck \
--     cargo test --lib base::scripts::tests::write_for_luacheck -- --ignored --exact
--   luacheck src/base/scripts target/luacheck
-- The first line writes each script as Redis receives it (its fragments from src/base/scripts/lib/,
-- then its own file: see src/base/scripts.rs) to target/luacheck/<name>.lua; the second checks those
-- and the files as written.

std = "lua51"  -- Redis runs Lua 5.1
codes = true    -- show each warning's code (as in the ignore lists below)
quiet = 1       -- list only the files with warnings, and the total
max_line_length = 100
-- What Redis gives a script. A script must not set a global (Redis 7 refuses it): luacheck
-- reports any it sets.
read_globals = { "redis", "KEYS", "ARGV", "cjson", "cmsgpack", "bit", "struct" }

-- The functions the fragments (src/base/scripts/lib/) define, for the scripts that include them: a
-- script calls some of them, not all, and a fragment alone calls few of its own, so an unused one
-- is not reported. (That every one of them is called by some script is a unit test in
-- src/base/scripts.rs.) A fragment function missing here shows up as "unused function".
ignore = {
  "211/server_ms",                                          -- lib/clock.lua
  "211/next_fence", "211/current_fence",                    -- lib/fence.lua
  "211/signal", "211/pop_grant",                            -- lib/signal.lua
  "211/join_queue", "211/leave_queue", "211/live_head",     -- lib/queue.lua
  "211/handoff",                                            -- lib/handoff.lua
  "211/stale_fence",                                        -- lib/fenced.lua
  "211/wanted_reply",                                       -- lib/wanted.lua
  "211/reader_holds", "211/holds", "211/left_ms", "211/grant_reader",
  "211/grant", "211/readers_left", "211/next_ms", "211/dispatch", -- lib/rw.lua
  "211/state", "211/sync",                 -- lib/sem.lua (also grant, next_ms and dispatch)
}

-- The files as written: a fragment uses functions of the fragments before it, and a script's own
-- file what its fragments define, so a name defined in none of the file's lines (113) is not
-- reported there; the assembled scripts in target/luacheck/ are checked for it.
files["src/base/scripts"] = { ignore = { "113" } }
-- The read/write lock and semaphore preludes set `wrongtype` for their scripts' own files.
files["src/base/scripts/lib"] = { ignore = { "211/wrongtype" } }
