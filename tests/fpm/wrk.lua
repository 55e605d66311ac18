-- wrk script of scripts/fpm/fpm.sh: each of wrk's threads stops after WRK_REQUESTS_PER_THREAD
-- responses (0: run for wrk's -d duration) and then creates the file WRK_DONE_DIR/<thread id>;
-- wrk itself waits for its -d duration, so scripts/fpm/fpm.sh sends it SIGINT once every thread is
-- done. The answers are tallied by kind, and at the end one JSON line is printed: requests,
-- duration, errors, status counts, answer kinds and latency percentiles (microseconds).

local per_thread = tonumber(os.getenv("WRK_REQUESTS_PER_THREAD") or "0") or 0
local done_dir = os.getenv("WRK_DONE_DIR")
local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("id", #threads)
end

responses = 0
ok = 0
sold = 0
soldout = 0
other = 0
non2xx = 0

function response(status, headers, body)
  responses = responses + 1
  if status >= 200 and status < 300 then
    ok = ok + 1
    if body == "sold\n" then
      sold = sold + 1
    elseif body == "soldout\n" then
      soldout = soldout + 1
    else
      other = other + 1
    end
  else
    non2xx = non2xx + 1
  end
  if per_thread > 0 and responses == per_thread then
    wrk.thread:stop()
    if done_dir then
      io.open(done_dir .. "/" .. id, "w"):close()
    end
  end
end

function done(summary, latency, requests)
  local t = { responses = 0, ok = 0, sold = 0, soldout = 0, other = 0, non2xx = 0 }
  for _, thread in ipairs(threads) do
    for k, _ in pairs(t) do
      t[k] = t[k] + (thread:get(k) or 0)
    end
  end
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"responses":%d,"duration_us":%d,"rps":%.1f,' ..
    '"ok":%d,"non2xx":%d,"sold":%d,"soldout":%d,"other":%d,' ..
    '"errors_connect":%d,"errors_read":%d,"errors_write":%d,"errors_timeout":%d,' ..
    '"lat_mean_us":%.1f,"lat_p50_us":%d,"lat_p90_us":%d,"lat_p99_us":%d,"lat_p999_us":%d,"lat_max_us":%d}\n',
    summary.requests, t.responses, summary.duration, t.responses / (summary.duration / 1e6),
    t.ok, t.non2xx, t.sold, t.soldout, t.other,
    e.connect, e.read, e.write, e.timeout,
    latency.mean, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9), latency.max))
end
