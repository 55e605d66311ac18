#!/usr/bin/env bash
# PHP-FPM under nginx: the deployment the PHP package is for, started and stopped here on
# loopback ports, with the test app of tests/fpm/app ("decrement the stock if > 0, under a lock").
#
#   scripts/fpm/fpm.sh test    [options]   the checks tests/php_fpm.rs asserts on
#   scripts/fpm/fpm.sh bench   [options]   requests/s and latency per endpoint, one sitting
#   scripts/fpm/fpm.sh killed  [options]   how long a request waits for a lock whose holder was killed
#   scripts/fpm/fpm.sh preload [options]   php-fpm started without the library in reach: what it says
#   scripts/fpm/fpm.sh serve   [options]   start the stack, print its URL, wait for Ctrl-C
#
# The stack, all in a temporary directory and on free 127.0.0.1 ports (never 6379), serving a
# copy of tests/fpm/app, bindings/php and the PHP header made there (readable by every user):
#   redis-server (--save '' --appendonly no);
#   php-fpm8.2 (Debian's php8.2-fpm) in the foreground: one pool, pm=static with --workers
#     workers, opcache.enable=1, ffi.enable=preload, opcache.preload=bindings/php/preload.php.
#     As root the master needs opcache.preload_user (nobody), and PHP then refuses FFI::load() in
#     the preload script, so the library is bound by ffi.preload with a copy of
#     include/redislock_php.h whose FFI_LIB names the built library (bindings/php/docs/php-fpm.md);
#     as a plain user preload.php loads it, with REDISLOCK_LIB in the master's environment;
#   nginx in the foreground, fastcgi_pass to the pool;
#   wrk (tests/fpm/wrk.lua) for the load, --requests at --concurrency per run.
# scripts/fpm/base.sh gets the library and makes the directory, scripts/fpm/stack.sh starts the
# stack, scripts/fpm/runs.sh measures the runs, scripts/fpm/preload.sh is the preload mode (all
# sourced).
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
#   auto-renewed lock of its worker (600 ms lease) for 700 ms, so renewal threads run, and answers
#   "renewed" if the lock was still held (answered_other counts those); the same purchase
#   without a lock (variant=nolock, --nolock-requests) to show the race is real; then die.php
#   ends requests while they hold the stock's lock, by a fatal error, max_execution_time, an
#   uncaught exception, exit() and the end of the script, through Redislock\Client and through
#   the Symfony store (and, as the control, detaches one), and inside the callback of a Laravel
#   lock (Cache::lock(name, 60)->get($callback), ->block(5, $callback), and Cache::lock(name)
#   without seconds), by a fatal error, memory exhausted little by little, max_execution_time and
#   exit() (and, as the control, a Laravel lock taken without a callback, which outlives its
#   request); each followed at once by a look at Redis and by one purchase on stock-client.php
#   (--next-wait-ms for the lock, default 2000):
#     die via=client how=fatal status=500 keys_left=0 next_status=200 next=sold next_ms=12
#   and last a line "threads ..." for the whole session and "fpm: done". Right after the client
#   run, the workers' metrics as metrics.php adds them up (each stock-client.php request saves its
#   worker's at its end, Redislock\Metrics::saveAtRequestEnd):
#     metrics files=8 acquisitions=20000 waited=19000 handoffs=18000 held=0 promtool=ok
# killed: the requests of the issue "a Laravel lock taken for a callback outlives a killed
#   request", measured: for Cache::lock(name, --seconds)->get($callback), ->block(5, $callback)
#   and Cache::lock(name)->block(5, $callback), the request killed inside the callback by
#   max_execution_time and by memory exhausted; the purchase after each waits up to
#   --next-wait-ms (default 60000) for the lock, and its next_ms is how long it waited. With
#   --package DIR, the package of another revision (git archive REV bindings/php) is served, for
#   a before/after comparison.
# preload: php-fpm alone (no pool is ever asked), started as a plain user (nobody when run as
#   root) with opcache.preload=preload.php and the library not where the dynamic loader finds it,
#   one php-fpm per case: REDISLOCK_LIB only in the pool's env[] (case=pool-env; skipped when a
#   libredislock.so is installed system-wide), in the master's environment too (case=master-env,
#   the control: it starts), naming a file that does not exist (case=missing-file), and, as root,
#   a root master with opcache.preload_user and no ffi.preload (case=preload-user). One line per
#   case, then its log, each log line prefixed:
#     preload case=pool-env started=0 status=70
#     preload-log case=pool-env ... PHP Fatal error:  Uncaught Redislock\Exception\LibraryException: ...
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
#   --stock S             test and serve: initial stock (default 3/4 of --requests)
#   --variants LIST       comma-separated, from client, symfony-redislock, symfony-redis,
#                         phpredis, hold, nolock (default: all, in that order, for test; bench
#                         nolock,phpredis,client,symfony-redislock,symfony-redis)
#   --peer-requests N     test: requests to the other lock variants, symfony-redislock,
#                         symfony-redis and phpredis (default 3000; Symfony's RedisStore polls
#                         every 100 ms while the lock is held, so it is slow under load)
#   --nolock-requests N   test: requests to the no-lock endpoint (default 2000)
#   --hold-requests N     test: requests to hold.php (default 64)
#   --rounds R            bench: runs per endpoint (default 3)
#   --cap SECONDS         longest wrk run (default 120)
#   --next-wait-ms MS     test, killed: how long the purchase after a die.php request waits for
#                         the lock (default 2000 for test, 60000 for killed)
#   --seconds S           killed: the Laravel locks' lifetime (default 5)
#   --package DIR         the PHP package to serve (default bindings/php of this checkout)
#   --out DIR             keep configs, logs and results (JSON lines) in DIR
# Environment: REDISLOCK_LIB (else the release library is built with cargo), CARGO_TARGET_DIR.
# Needs php8.2-fpm, nginx, wrk, curl, redis-server, php with FFI and phpredis, Symfony Lock,
# Laravel 8's cache, config and container components (preload: php8.2-fpm and php with FFI):
# scripts/setup.sh installs them on Debian.
# shellcheck source-path=SCRIPTDIR disable=SC2016 # (PHP code in single quotes)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# php-fpm8.2 and nginx live in /usr/sbin, which a plain user's PATH may lack.
export PATH="$HOME/.cargo/bin:$PATH:/usr/sbin:/sbin"

MODE=${1:-}
case "$MODE" in
  test|bench|serve|killed|preload) shift ;;
  -h|--help|'') sed -n '2,/^set -euo/p' "$0" | sed '/^# shellcheck/d; $d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "fpm.sh: unknown mode $MODE (test, bench, killed, preload or serve; see --help)" >&2; exit 2 ;;
esac

REQUESTS=
CONCURRENCY=32
WRK_THREADS=2
WORKERS=8
STOCK=
VARIANTS=
NOLOCK_REQUESTS=2000
HOLD_REQUESTS=64
PEER_REQUESTS=3000
ROUNDS=3
CAP=120
NEXT_WAIT_MS=
SECONDS_LOCK=5
PACKAGE="$ROOT/bindings/php"
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
    --next-wait-ms) NEXT_WAIT_MS=$2; shift ;;
    --seconds) SECONDS_LOCK=$2; shift ;;
    --package) PACKAGE=$(cd "$2" && pwd); shift ;;
    --out) OUT=$2; shift ;;
    *) echo "fpm.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$REQUESTS" ]; then
  if [ "$MODE" = bench ]; then REQUESTS=10000; else REQUESTS=20000; fi
fi
STOCK=${STOCK:-$((REQUESTS * 3 / 4))}
if [ -z "$NEXT_WAIT_MS" ]; then
  if [ "$MODE" = killed ]; then NEXT_WAIT_MS=60000; else NEXT_WAIT_MS=2000; fi
fi
[ -f "$PACKAGE/preload.php" ] || { echo "fpm.sh: --package $PACKAGE has no preload.php" >&2; exit 2; }
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
    hold) echo 'hold.php?ms=700' ;;
    *) die "unknown variant $1 (client, symfony-redislock, symfony-redis, phpredis, nolock, hold)" ;;
  esac
}
for v in "${VARIANT_LIST[@]}"; do endpoint "$v" >/dev/null; done

FPM_STACK=1
[ "$MODE" = preload ] && FPM_STACK=0
# shellcheck source=fpm/base.sh
source "$ROOT/scripts/fpm/base.sh"

if [ "$MODE" = preload ]; then
  # shellcheck source=fpm/preload.sh
  source "$ROOT/scripts/fpm/preload.sh"
  echo "fpm: done"
  exit 0
fi

# shellcheck source=fpm/stack.sh
source "$ROOT/scripts/fpm/stack.sh"

if [ "$MODE" = serve ]; then
  rcli set fpm:stock "$STOCK" >/dev/null
  log "stock: $STOCK units (fpm:stock)"
  log "serving: $BASE/stock-client.php (and the other endpoints of $APP); Redis on port $REDIS_PORT; Ctrl-C stops"
  wait "$NGINX_PID"
  exit 0
fi

# shellcheck source=fpm/runs.sh
source "$ROOT/scripts/fpm/runs.sh"

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
    if [ "$v" = client ]; then metrics_check; fi
  done

  log "die.php: requests that end while holding the stock's lock"
  seed 100
  for via in client symfony; do
    hows=(fatal timeout exception exit end)
    # The control: a detached lock is left behind on purpose, and the purchase then times out.
    [ "$via" = client ] && hows+=(detach)
    for how in "${hows[@]}"; do
      die_case "$via" "$how" "$NEXT_WAIT_MS"
    done
  done
  for via in laravel-get laravel-block laravel-forever; do
    for how in fatal memory timeout exit; do
      die_case "$via" "$how" "$NEXT_WAIT_MS"
    done
  done
  # The control: a Laravel lock taken without a callback outlives its request, as Laravel's do.
  die_case laravel-plain fatal "$NEXT_WAIT_MS"
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

# ---- killed
if [ "$MODE" = killed ]; then
  echo "meta date=$(date -Is) git=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?') package=$PACKAGE seconds=$SECONDS_LOCK next_wait_ms=$NEXT_WAIT_MS"
  seed 100
  for via in laravel-get laravel-block laravel-forever; do
    for how in timeout memory; do
      die_case "$via" "$how" "$NEXT_WAIT_MS" "seconds=$SECONDS_LOCK"
    done
  done
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
