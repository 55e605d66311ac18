# shellcheck shell=bash disable=SC2016 # (PHP code in single quotes)
# Sourced by scripts/fpm/fpm.sh once the stack is up (scripts/fpm/stack.sh): the shop's data in
# Redis, waiting for an idle pool, the thread sampler (tests/fpm/threads.php), wrk with
# tests/fpm/wrk.lua, `run`, one measured load run and the checks after it, and `die_case`, one
# request that ends while holding the stock's lock and the purchase after it.
# ---- helpers for the runs
DATA_KEYS_RE='^fpm:(stock|sold|negative)$'
seed() { rcli set fpm:stock "$1" >/dev/null; rcli del fpm:sold fpm:negative >/dev/null; }
keys_left() { rcli --scan | grep -Ev "$DATA_KEYS_RE" || true; }
drop_keys_left() { keys_left | while read -r k; do rcli del "$k" >/dev/null; done; }
# Waits until no request is running in the pool (the status request itself is the one active).
wait_idle() {
  local deadline=$((SECONDS + 60)) active status
  while :; do
    # The status page is served by a worker too: it waits in line while they are all busy.
    status=$(curl -s --max-time 10 "$BASE/fpm-status?json" || true)
    active=$(php -r '$j = json_decode($argv[1], true); echo is_array($j) ? $j["active processes"] ?? -1 : -1;' "$status")
    [ "$active" = 1 ] && return 0
    [ $SECONDS -lt $deadline ] || die "the pool did not become idle within 60 s (active processes: $active)"
    sleep 0.1
  done
}
SAMPLER_PID=
sampler_start() { # sampler_start NAME [INTERVAL_MS]
  rm -f "$DIR/$1.stop"
  start "$DIR/$1.threads.json" php "$ROOT/tests/fpm/threads.php" --master="$FPM_PID" --stop="$DIR/$1.stop" \
    --interval-ms="${2:-25}"
  SAMPLER_PID=$LAST_PID
}
sampler_stop() { # sampler_stop NAME: sets THREADS to the sampler's JSON line
  touch "$DIR/$1.stop"
  wait "$SAMPLER_PID" || die "the thread sampler failed: $(cat "$DIR/$1.threads.json")"
  THREADS=$(cat "$DIR/$1.threads.json")
}
json_field() { # json_field JSON KEY
  php -r '$j = json_decode($argv[1], true); $v = $j[$argv[2]] ?? ""; echo is_bool($v) ? ($v ? "true" : "false") : $v;' "$1" "$2"
}
# wrk_run NAME URL REQUESTS: sets WRK to the JSON line of tests/fpm/wrk.lua. wrk waits out its -d duration
# even when every thread has stopped: SIGINT ends it as soon as each thread has its share.
wrk_run() {
  local per_thread=$(( ($3 + WRK_THREADS - 1) / WRK_THREADS )) done_dir="$DIR/$1.wrk-done" pid
  mkdir -p "$done_dir"
  WRK_REQUESTS_PER_THREAD=$per_thread WRK_DONE_DIR=$done_dir setpriv --pdeathsig KILL -- \
    wrk -t"$WRK_THREADS" -c"$CONCURRENCY" -d"${CAP}s" --timeout 30s -s "$ROOT/tests/fpm/wrk.lua" "$2" \
    > "$DIR/$1.wrk.out" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$(find "$done_dir" -type f | wc -l)" -ge "$WRK_THREADS" ]; then
      kill -INT "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.01
  done
  wait "$pid" || die "wrk failed: $(cat "$DIR/$1.wrk.out")"
  WRK=$(grep '^{' "$DIR/$1.wrk.out" | tail -1)
  [ -n "$WRK" ] || die "no result from wrk: $(cat "$DIR/$1.wrk.out")"
}

# run VARIANT REQUESTS STOCK NAME: one wrk run against the variant's endpoint, the checks after.
run() {
  local variant=$1 requests=$2 stock=$3 name=$4 url w t sold left negative stock_now
  url="$BASE/$(endpoint "$variant")"
  seed "$stock"
  wait_idle
  sampler_start "$name"
  wrk_run "$name" "$url" "$requests"
  w=$WRK
  wait_idle
  sampler_stop "$name"
  t=$THREADS
  sold=$(rcli get fpm:sold)
  stock_now=$(rcli get fpm:stock)
  negative=$(rcli get fpm:negative)
  left=$(keys_left | wc -l)
  echo "$w" >> "$DIR/results.jsonl"
  printf 'run variant=%s asked=%s requests=%s non2xx=%s errors=%s sold=%s stock=%s negative=%s keys_left=%s threads_max=%s threads_after=%s workers=%s pids_seen=%s rps=%s p50_us=%s p99_us=%s initial_stock=%s answered_sold=%s answered_soldout=%s answered_other=%s\n' \
    "$variant" "$requests" "$(json_field "$w" responses)" "$(json_field "$w" non2xx)" \
    "$(( $(json_field "$w" errors_connect) + $(json_field "$w" errors_read) + $(json_field "$w" errors_write) + $(json_field "$w" errors_timeout) ))" \
    "${sold:-0}" "${stock_now:-?}" "${negative:-0}" "$left" \
    "$(json_field "$t" max)" "$(json_field "$t" after)" "$(json_field "$t" workers_last)" "$(json_field "$t" pids_seen)" \
    "$(json_field "$w" rps)" "$(json_field "$w" lat_p50_us)" "$(json_field "$w" lat_p99_us)" \
    "$stock" "$(json_field "$w" sold)" "$(json_field "$w" soldout)" "$(json_field "$w" other)" | tee -a "$DIR/runs.txt"
  if [ "$left" -gt 0 ]; then
    log "keys left after $variant: $(keys_left | head -5 | tr '\n' ' ')"
    drop_keys_left
  fi
}

# metrics_check: after the client run, the workers' metrics added up by metrics.php (the recipe of
# docs/metrics.md), checked by promtool when it is there. One line:
#   metrics files=.. acquisitions=.. waited=.. handoffs=.. held=.. promtool=ok|failed|missing
# (acquisitions: every exclusive acquire the workers counted, whatever its outcome).
metrics_check() {
  local text="$DIR/metrics.prom" files promtool=missing
  wait_idle
  files=$(curl -s -D - -o "$text" --max-time 30 "$BASE/metrics.php" | tr -d '\r' \
    | awk -F': ' 'tolower($1) == "x-metrics-files" {print $2}')
  if command -v promtool >/dev/null; then
    if promtool check metrics < "$text" > "$DIR/promtool.out" 2>&1; then promtool=ok; else
      promtool=failed
      log "promtool: $(head -5 "$DIR/promtool.out" | tr '\n' ' ')"
    fi
  fi
  sum_of() { awk -v re="^$1" '$0 ~ re {s += $NF} END {print s + 0}' "$text"; }
  printf 'metrics files=%s acquisitions=%s waited=%s handoffs=%s held=%s promtool=%s\n' \
    "${files:-0}" "$(sum_of 'redislock_acquisitions_total[{]kind="exclusive"')" \
    "$(sum_of 'redislock_acquisitions_total[{]kind="exclusive",outcome="waited"')" \
    "$(sum_of 'redislock_handoffs_received_total[{]kind="exclusive"')" \
    "$(sum_of 'redislock_locks_held[{]')" "$promtool"
}

# die_case VIA HOW NEXT_WAIT_MS [QUERY]: die.php?how=HOW&via=VIA&QUERY ends a request while it holds
# the stock's lock; then a look at Redis, and at once one purchase on stock-client.php that waits
# up to NEXT_WAIT_MS for the lock. One line:
#   die via=V how=H status=.. keys_left=.. next_status=.. next=.. next_ms=..
# (next_ms: how long that purchase took, its wait for the lock included). Keys left are dropped.
die_case() {
  local via=$1 how=$2 wait_ms=$3 query=${4:-} name status left next_status next_s next_ms max_time
  name="die-$via-$how"
  max_time=$(( wait_ms / 1000 + 20 ))
  status=$(curl -s -o "$DIR/$name.body" -w '%{http_code}' --max-time 30 \
    "$BASE/die.php?how=$how&via=$via${query:+&$query}" || true)
  left=$(keys_left | wc -l)
  [ "$left" -eq 0 ] || log "keys left after die.php?how=$how&via=$via: $(keys_left | head -5 | tr '\n' ' ')"
  read -r next_status next_s < <(curl -s -o "$DIR/$name.next" -w '%{http_code} %{time_total}\n' \
    --max-time "$max_time" "$BASE/stock-client.php?wait_ms=$wait_ms" || true)
  next_ms=$(php -r 'echo (int) round((float) $argv[1] * 1000);' "${next_s:-0}")
  printf 'die via=%s how=%s status=%s keys_left=%s next_status=%s next=%s next_ms=%s\n' \
    "$via" "$how" "$status" "$left" "${next_status:-000}" "$(tr -d '\n' 2>/dev/null < "$DIR/$name.next" || true)" "$next_ms"
  drop_keys_left
}
