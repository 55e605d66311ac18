#!/usr/bin/env bash
# PHP-FPM under nginx: the deployment the PHP package is for, started and stopped here on
# loopback ports, with the test app of tests/fpm/app ("decrement the stock if > 0, under a lock").
#
#   scripts/fpm.sh test  [options]   the checks tests/php_fpm.rs asserts on
#   scripts/fpm.sh bench [options]   requests/s and latency per endpoint, one sitting
#   scripts/fpm.sh serve [options]   start the stack, print its URL, wait for Ctrl-C
#
# The stack, all in a temporary directory and on free 127.0.0.1 ports (never 6379), serving a
# copy of tests/fpm/app, bindings/php and the PHP header made there (readable by every user):
#   redis-server (--save '' --appendonly no);
#   php-fpm8.2 (Debian's php8.2-fpm) in the foreground: one pool, pm=static with --workers
#     workers, opcache.enable=1, ffi.enable=preload, opcache.preload=bindings/php/preload.php.
#     As root the master needs opcache.preload_user (nobody), and PHP then refuses FFI::load() in
#     the preload script, so the library is bound by ffi.preload with a copy of
#     include/redislock_php.h whose FFI_LIB names the built library (README, "PHP-FPM"); as a
#     plain user preload.php loads it, with REDISLOCK_LIB in the master's environment;
#   nginx in the foreground, fastcgi_pass to the pool;
#   wrk (tests/fpm/wrk.lua) for the load, --requests at --concurrency per run.
# Every process is killed when the script ends (trap; and PR_SET_PDEATHSIG through setpriv, so
# they die with the script even if it is killed with SIGKILL).
#
# test: for each lock variant (Redislock\Client; Symfony LockFactory on RedislockStore; Symfony's
#   own RedisStore; phpredis pconnect + SET NX PX + compare-and-delete), the stock is seeded with
#   --stock units and --requests requests are sent to the Client endpoint (--peer-requests to
#   the others); then, once every worker is idle, one line
#     run variant=V asked=.. requests=.. non2xx=.. sold=.. stock=.. negative=.. keys_left=..
#         threads_max=.. threads_after=.. workers=.. pids_seen=.. rps=.. p50_us=.. p99_us=..
#   (sold = units sold by the app's count, stock = what is left, keys_left = keys in Redis other
#   than the shop's data, threads = the library's threads per worker, sampled every 25 ms during
#   the run and once after it); hold.php (variant=hold, --hold-requests): each request holds an
#   auto-renewed lock of its worker (300 ms lease) for 350 ms, so renewal threads run, and answers
#   "renewed" if the lock was still held (answered_other counts those); the same purchase
#   without a lock (variant=nolock, --nolock-requests) to show the race is real; then die.php
#   ends requests while they hold the stock's lock, by a fatal error, max_execution_time, an
#   uncaught exception, exit() and the end of the script, through Redislock\Client and through
#   the Symfony store (and, as the control, detaches one), each followed at once by a look at
#   Redis and by one purchase on stock-client.php (2 s wait for the lock):
#     die via=client how=fatal status=500 keys_left=0 next_status=200 next=sold
#   and last a line "threads ..." for the whole session and "fpm: done".
# bench: a warm-up of 2,000 requests per endpoint, then for each endpoint (no lock, phpredis,
#   Client, Symfony + RedislockStore, Symfony + RedisStore), --rounds times in rotating order,
#   --requests requests at --concurrency (stock large enough never to sell out); one "run" line
#   per run as above and a markdown table of the medians of requests/s, p50 and p99.
#
# Options:
#   --requests N          requests per run (default 20000 for test, 10000 for bench)
#   --concurrency C       wrk connections (default 32)
#   --wrk-threads T       wrk threads (default 2)
#   --workers W           PHP-FPM workers (default 8)
#   --stock S             test: initial stock (default 3/4 of --requests)
#   --variants LIST       comma-separated, from client, symfony-redislock, symfony-redis,
#                         phpredis, hold, nolock (default: all, in that order, for test; bench
#                         nolock,phpredis,client,symfony-redislock,symfony-redis)
#   --peer-requests N     test: requests to the other lock variants, symfony-redislock,
#                         symfony-redis and phpredis (default 3000; Symfony's RedisStore polls
#                         every 100 ms while the lock is held, so it is slow under load)
#   --nolock-requests N   test: requests to the no-lock endpoint (default 2000)
#   --hold-requests N     test: requests to hold.php (default 100)
#   --rounds R            bench: runs per endpoint (default 3)
#   --cap SECONDS         longest wrk run (default 120)
#   --out DIR             keep configs, logs and results (JSON lines) in DIR
# Environment: REDISLOCK_LIB (else the release library is built with cargo), CARGO_TARGET_DIR.
# Needs php8.2-fpm, nginx, wrk, curl, redis-server, php with FFI and phpredis, Symfony Lock:
# scripts/setup.sh installs them on Debian.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# php-fpm8.2 and nginx live in /usr/sbin, which a plain user's PATH may lack.
export PATH="$HOME/.cargo/bin:$PATH:/usr/sbin:/sbin"

MODE=${1:-}
case "$MODE" in
  test|bench|serve) shift ;;
  -h|--help|'') sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "fpm.sh: unknown mode $MODE (test, bench or serve; see --help)" >&2; exit 2 ;;
esac

REQUESTS=
CONCURRENCY=32
WRK_THREADS=2
WORKERS=8
STOCK=
VARIANTS=
NOLOCK_REQUESTS=2000
HOLD_REQUESTS=100
PEER_REQUESTS=3000
ROUNDS=3
CAP=120
OUT=
while [ $# -gt 0 ]; do
  case "$1" in
    --requests) REQUESTS=$2; shift ;;
    --concurrency) CONCURRENCY=$2; shift ;;
    --wrk-threads) WRK_THREADS=$2; shift ;;
    --workers) WORKERS=$2; shift ;;
    --stock) STOCK=$2; shift ;;
    --variants) VARIANTS=$2; shift ;;
    --nolock-requests) NOLOCK_REQUESTS=$2; shift ;;
    --hold-requests) HOLD_REQUESTS=$2; shift ;;
    --peer-requests) PEER_REQUESTS=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --cap) CAP=$2; shift ;;
    --out) OUT=$2; shift ;;
    *) echo "fpm.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$REQUESTS" ]; then
  if [ "$MODE" = bench ]; then REQUESTS=10000; else REQUESTS=20000; fi
fi
STOCK=${STOCK:-$((REQUESTS * 3 / 4))}
if [ -z "$VARIANTS" ]; then
  if [ "$MODE" = bench ]; then
    VARIANTS=nolock,phpredis,client,symfony-redislock,symfony-redis
  else
    VARIANTS=client,symfony-redislock,symfony-redis,phpredis,hold,nolock
  fi
fi
IFS=, read -r -a VARIANT_LIST <<< "$VARIANTS"

log() { echo "fpm: $*" >&2; }
die() { echo "fpm: $*" >&2; exit 1; }

endpoint() {
  case "$1" in
    client) echo stock-client.php ;;
    symfony-redislock) echo stock-symfony-redislock.php ;;
    symfony-redis) echo stock-symfony-redis.php ;;
    phpredis) echo stock-phpredis.php ;;
    nolock) echo nolock.php ;;
    hold) echo 'hold.php?ms=350' ;;
    *) die "unknown variant $1 (client, symfony-redislock, symfony-redis, phpredis, nolock, hold)" ;;
  esac
}
for v in "${VARIANT_LIST[@]}"; do endpoint "$v" >/dev/null; done

# ---- what the stack needs
FPM_BIN=$(command -v php-fpm8.2 || command -v php-fpm || true)
missing=()
[ -n "$FPM_BIN" ] || missing+=("php-fpm (php8.2-fpm)")
for tool in nginx wrk curl php redis-server redis-cli setpriv; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if command -v php >/dev/null; then
  php -r 'exit(extension_loaded("ffi") && extension_loaded("redis") ? 0 : 1);' \
    || missing+=("php extensions ffi and redis (php-redis)")
fi
[ -f /usr/share/php/Symfony/Component/Lock/autoload.php ] || missing+=("Symfony Lock (php-symfony-lock)")
if [ ${#missing[@]} -gt 0 ]; then
  die "missing: ${missing[*]}; run scripts/setup.sh to install them"
fi

if [ -z "${REDISLOCK_LIB:-}" ]; then
  log "building the library (cargo build --release --lib)"
  (cd "$ROOT" && cargo build --release --lib --quiet)
  target_dir=$(cd "$ROOT" && cargo metadata --format-version 1 --no-deps \
    | php -r 'echo json_decode(stream_get_contents(STDIN), false, 512, JSON_THROW_ON_ERROR)->target_directory;')
  REDISLOCK_LIB="$target_dir/release/libredislock.so"
fi
[ -f "$REDISLOCK_LIB" ] || die "REDISLOCK_LIB=$REDISLOCK_LIB does not exist"
BUILT_LIB=$(realpath "$REDISLOCK_LIB")

ROOT_USER=0
[ "$(id -u)" -eq 0 ] && ROOT_USER=1

# ---- the temporary directory and the clean-up
DIR=$(mktemp -d /tmp/redislock-fpm.XXXXXX)
chmod 755 "$DIR"
# A copy of the library: a build that replaces the original meanwhile cannot change this run.
REDISLOCK_LIB="$DIR/libredislock.so"
cp "$BUILT_LIB" "$REDISLOCK_LIB"
chmod 755 "$REDISLOCK_LIB"
# What the workers read, copied into a tree of the same shape readable by every user: as root
# they (and the preloading) run as nobody, who may not be able to read the checkout.
TREE="$DIR/tree"
mkdir -p "$TREE/tests/fpm" "$TREE/bindings/php" "$TREE/include"
cp -r "$ROOT/tests/fpm/app" "$TREE/tests/fpm/"
cp -r "$ROOT/bindings/php/autoload.php" "$ROOT/bindings/php/preload.php" "$ROOT/bindings/php/src" \
  "$TREE/bindings/php/"
cp "$ROOT/include/redislock_php.h" "$TREE/include/"
chmod -R a+rX "$TREE"
APP="$TREE/tests/fpm/app"
PIDS=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  local i
  for (( i=${#PIDS[@]}-1; i>=0; i-- )); do
    kill "${PIDS[$i]}" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [ -n "$OUT" ]; then
    mkdir -p "$OUT"
    cp -r "$DIR"/. "$OUT"/ 2>/dev/null || true
    log "configs, logs and results kept in $OUT"
  fi
  rm -rf "$DIR"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Starts "$@" in the background, killed with SIGKILL if this script dies; its pid goes to PIDS.
start() {
  local logfile=$1
  shift
  setpriv --pdeathsig KILL -- "$@" >"$logfile" 2>&1 < /dev/null &
  PIDS+=($!)
  LAST_PID=$!
}

free_port() {
  php -r '$s = stream_socket_server("tcp://127.0.0.1:0", $e, $m) or exit(1);
          $n = stream_socket_get_name($s, false); echo substr($n, strrpos($n, ":") + 1);'
}

wait_for() { # wait_for SECONDS DESCRIPTION PID COMMAND...
  local secs=$1 what=$2 pid=$3
  shift 3
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || die "$what exited at start"
    [ $SECONDS -lt $deadline ] || die "$what did not answer within $secs s"
    sleep 0.1
  done
}

REDIS_PORT=$(free_port)
FPM_PORT=$(free_port)
HTTP_PORT=$(free_port)
while [ "$FPM_PORT" = "$REDIS_PORT" ]; do FPM_PORT=$(free_port); done
while [ "$HTTP_PORT" = "$REDIS_PORT" ] || [ "$HTTP_PORT" = "$FPM_PORT" ]; do HTTP_PORT=$(free_port); done
BASE="http://127.0.0.1:$HTTP_PORT"

# ---- redis-server
mkdir "$DIR/redis"
start "$DIR/redis.log" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$DIR/redis"
REDIS_PID=$LAST_PID
rcli() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }
wait_for 10 redis-server "$REDIS_PID" rcli ping

# ---- php-fpm
FPM_INI=(-d opcache.enable=1 -d ffi.enable=preload -d "opcache.preload=$TREE/bindings/php/preload.php")
FPM_ENV=()
POOL_USER=
if [ "$ROOT_USER" = 1 ]; then
  sed "s|^#define FFI_LIB .*|#define FFI_LIB \"$REDISLOCK_LIB\"|" "$TREE/include/redislock_php.h" \
    > "$DIR/redislock_php.h"
  chmod 644 "$DIR/redislock_php.h"
  FPM_INI+=(-d "ffi.preload=$DIR/redislock_php.h" -d opcache.preload_user=nobody)
  POOL_USER=$'user = nobody\ngroup = nogroup'
else
  FPM_ENV=(env "REDISLOCK_LIB=$REDISLOCK_LIB")
fi
touch "$DIR/php-errors.log"
[ "$ROOT_USER" = 1 ] && chown nobody:nogroup "$DIR/php-errors.log"
cat > "$DIR/php-fpm.conf" <<EOF
[global]
pid = $DIR/php-fpm.pid
error_log = $DIR/php-fpm.log
daemonize = no

[app]
$POOL_USER
listen = 127.0.0.1:$FPM_PORT
listen.backlog = 511
pm = static
pm.max_children = $WORKERS
; workers live for the whole run, as in production: threads and connections must stay bounded
pm.max_requests = 0
pm.status_path = /fpm-status
request_terminate_timeout = 60s
clear_env = yes
env[FPM_REDIS_PORT] = $REDIS_PORT
php_admin_value[error_log] = $DIR/php-errors.log
php_admin_flag[log_errors] = on
php_admin_flag[display_errors] = off
; php_value, not php_admin_value: die.php lowers it with set_time_limit()
php_value[max_execution_time] = 30
EOF
start "$DIR/php-fpm.out" "${FPM_ENV[@]}" "$FPM_BIN" --nodaemonize --force-stderr --fpm-config "$DIR/php-fpm.conf" \
  "${FPM_INI[@]}"
FPM_PID=$LAST_PID
fpm_listens() { php -r 'exit(@fsockopen("127.0.0.1", (int) $argv[1]) ? 0 : 1);' "$FPM_PORT"; }
if ! (wait_for 20 php-fpm "$FPM_PID" fpm_listens); then
  die "php-fpm did not start: $(cat "$DIR/php-fpm.out" "$DIR/php-fpm.log" 2>/dev/null | tail -20)"
fi

# ---- nginx
mkdir -p "$DIR/nginx"
NGINX_USER=
if [ "$ROOT_USER" = 1 ]; then
  NGINX_USER="user nobody nogroup;"
  chown nobody:nogroup "$DIR/nginx"
fi
cat > "$DIR/nginx.conf" <<EOF
$NGINX_USER
worker_processes 1;
pid $DIR/nginx.pid;
error_log $DIR/nginx-error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $DIR/nginx/body;
    fastcgi_temp_path $DIR/nginx/fastcgi;
    proxy_temp_path $DIR/nginx/proxy;
    uwsgi_temp_path $DIR/nginx/uwsgi;
    scgi_temp_path $DIR/nginx/scgi;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$HTTP_PORT;
        root $APP;
        location = /fpm-status {
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_NAME /fpm-status;
            fastcgi_param SCRIPT_FILENAME /fpm-status;
            fastcgi_pass 127.0.0.1:$FPM_PORT;
        }
        location ~ \.php\$ {
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
            fastcgi_pass 127.0.0.1:$FPM_PORT;
        }
    }
}
EOF
start "$DIR/nginx.out" nginx -p "$DIR" -e "$DIR/nginx-error.log" -c "$DIR/nginx.conf" -g 'daemon off;'
NGINX_PID=$LAST_PID
status_ok() { curl -sf -o /dev/null --max-time 2 "$BASE/fpm-status"; }
wait_for 20 nginx "$NGINX_PID" status_ok
kill -0 "$FPM_PID" 2>/dev/null || die "php-fpm exited at start: $(cat "$DIR/php-fpm.out" "$DIR/php-fpm.log" 2>/dev/null)"

INFO=$(curl -s --max-time 10 "$BASE/info.php")
log "stack up: redis 127.0.0.1:$REDIS_PORT, php-fpm 127.0.0.1:$FPM_PORT ($WORKERS workers), nginx $BASE; library $REDISLOCK_LIB"
log "info.php: $INFO"
echo "info $INFO"
case "$INFO" in
  *'"preloaded":true'*'"library":true'*) ;;
  *) die "the workers cannot use the library: $INFO
$(cat "$DIR/php-fpm.log" "$DIR/php-errors.log" 2>/dev/null | tail -20)" ;;
esac

if [ "$MODE" = serve ]; then
  log "serving: $BASE/stock-client.php (and the other endpoints of $APP); Redis on port $REDIS_PORT; Ctrl-C stops"
  wait "$NGINX_PID"
  exit 0
fi

# ---- helpers for the runs
DATA_KEYS_RE='^fpm:(stock|sold|negative)$'
seed() { rcli set fpm:stock "$1" >/dev/null; rcli del fpm:sold fpm:negative >/dev/null; }
keys_left() { rcli --scan | grep -Ev "$DATA_KEYS_RE" || true; }
drop_keys_left() { keys_left | while read -r k; do rcli del "$k" >/dev/null; done; }
# Waits until no request is running in the pool (the status request itself is the one active).
wait_idle() {
  local deadline=$((SECONDS + 60)) active
  while :; do
    active=$(curl -s --max-time 2 "$BASE/fpm-status?json" | php -r '$j = json_decode(stream_get_contents(STDIN), true); echo $j["active processes"] ?? -1;')
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

# ---- test
if [ "$MODE" = test ]; then
  sampler_start session 100
  SESSION_SAMPLER=$SAMPLER_PID
  for v in "${VARIANT_LIST[@]}"; do
    case "$v" in
      nolock) n=$NOLOCK_REQUESTS ;;
      hold) n=$HOLD_REQUESTS ;;
      symfony-redislock|symfony-redis|phpredis) n=$PEER_REQUESTS ;;
      *) n=$REQUESTS ;;
    esac
    # The stock runs out before the requests do: the last ones race at zero.
    if [ "$n" = "$REQUESTS" ]; then stock=$STOCK; else stock=$((n * 3 / 4)); fi
    [ "$v" = nolock ] && stock=$((n / 2))
    log "$v: $n requests at concurrency $CONCURRENCY, stock $stock"
    run "$v" "$n" "$stock" "test-$v"
  done

  log "die.php: requests that end while holding the stock's lock"
  seed 100
  for via in client symfony; do
    hows=(fatal timeout exception exit end)
    # The control: a detached lock is left behind on purpose, and the purchase then times out.
    [ "$via" = client ] && hows+=(detach)
    for how in "${hows[@]}"; do
      status=$(curl -s -o "$DIR/die-$via-$how.body" -w '%{http_code}' --max-time 20 "$BASE/die.php?how=$how&via=$via" || true)
      left=$(keys_left | wc -l)
      [ "$left" -eq 0 ] || log "keys left after die.php?how=$how&via=$via: $(keys_left | head -5 | tr '\n' ' ')"
      next_status=$(curl -s -o "$DIR/die-$via-$how.next" -w '%{http_code}' --max-time 20 "$BASE/stock-client.php?wait_ms=2000" || true)
      printf 'die via=%s how=%s status=%s keys_left=%s next_status=%s next=%s\n' \
        "$via" "$how" "$status" "$left" "$next_status" "$(tr -d '\n' < "$DIR/die-$via-$how.next")"
      drop_keys_left
    done
  done
  wait_idle
  SAMPLER_PID=$SESSION_SAMPLER
  sampler_stop session
  t=$THREADS
  printf 'threads session max=%s after=%s workers=%s pids_seen=%s per_worker_after=%s\n' \
    "$(json_field "$t" max)" "$(json_field "$t" after)" "$(json_field "$t" workers_last)" \
    "$(json_field "$t" pids_seen)" \
    "$(php -r 'echo implode(",", json_decode($argv[1], true)["per_worker_after"]);' "$t")"
  grep -c 'Allowed memory size\|Maximum execution time\|uncaught, on purpose' "$DIR/php-errors.log" \
    | sed 's/^/php_errors_expected=/' >&2 || true
  echo "fpm: done"
  exit 0
fi

# ---- bench
if [ "$MODE" = bench ]; then
  echo "meta date=$(date -Is) git=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?') cpus=$(nproc) load_start=$(cut -d' ' -f1 /proc/loadavg) requests=$REQUESTS concurrency=$CONCURRENCY workers=$WORKERS rounds=$ROUNDS wrk_threads=$WRK_THREADS"
  for v in "${VARIANT_LIST[@]}"; do
    log "warm-up $v: 2000 requests"
    run "$v" 2000 1000000 "warm-$v" > /dev/null
  done
  : > "$DIR/runs.txt"
  n=${#VARIANT_LIST[@]}
  for (( round=0; round<ROUNDS; round++ )); do
    for (( k=0; k<n; k++ )); do
      v=${VARIANT_LIST[$(( (k + round) % n ))]}
      log "round $((round + 1))/$ROUNDS: $v, $REQUESTS requests at concurrency $CONCURRENCY"
      run "$v" "$REQUESTS" $((REQUESTS * 2)) "bench-$round-$v"
    done
  done
  echo "meta load_end=$(cut -d' ' -f1 /proc/loadavg)"
  php "$ROOT/tests/fpm/table.php" "$DIR/runs.txt" | tee "$DIR/table.md"
  echo "fpm: done"
  exit 0
fi
