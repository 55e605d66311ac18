#!/usr/bin/env bash
# One benchmark sitting for redislock:
#
#   scripts/bench.sh [--peers] [--redlock-peers] [--fpm] [--quick] [--out DIR] [--plot FILE] [--peers-args "ARGS"]
#                    [--fpm-args "ARGS"] [-- ARGS for the standalone program]
#
#   1. builds, with the release profile, the benchmark program (benches/locks.rs) and
#      libredislock.so (for the PHP rows; REDISLOCK_LIB points to it unless already set);
#   2. runs the standalone program, `cargo bench --bench locks -- --raw OUT/standalone.jsonl`:
#      its own redis-server (through the test kit); floor, u1, u8, c8, h2, Sentinel (a group of
#      1 master, 2 replicas and 3 sentinels: u1 and c8 through redis-sentinel:// with and
#      without min_replicas(1), 3 failovers; about 1 minute; `-- --skip sentinel` leaves it
#      out, `-- --only sentinel` runs it alone), renewal scale, PHP rows; the report (markdown
#      tables, targets, JSON summary lines) goes to OUT/standalone.md and to the terminal;
#   3. with --peers: the peers harness of ../shared/bench/peers (setup.sh, then run.sh) with three
#      rows added through its --extra hook:
#        redislock_rust        = the bench binary --auto-renew off   (Rust, fixed 10 s lease)
#        redislock_rust-renew  = the bench binary --auto-renew on    (Rust, auto-renewal)
#        redislock_php         = php benches/php/bench_redislock.php (PHP package over FFI)
#      results and report in OUT/peers/ (report.md); the full run takes about 10 minutes,
#      --quick about 3 (plus its waits for a quiet machine);
#   3b. with --redlock-peers: the peers harness in Redlock mode, `run.sh --masters 3` (three
#      independent masters; the peers that take several: redlock-rs, pottery, node-redlock,
#      Symfony's CombinedStore, and the Redlock floor) with the bench binary given --ports:
#        redislock_rust        = --auto-renew off   (redlock:// over the three masters)
#        redislock_rust-renew  = --auto-renew on
#      results and report in OUT/peers-redlock/ (report.md); about 2 minutes with --quick;
#   4. regenerates the handoff plot, docs/handoff.png by default (--plot FILE), from the h2 records
#      of OUT/standalone.jsonl and OUT/peers/;
#   5. with --fpm: PHP-FPM under nginx, `scripts/fpm.sh bench` (8 workers, wrk at concurrency 32;
#      endpoints without a lock, phpredis pconnect + SET NX PX, Redislock\Client, Symfony Lock on
#      RedislockStore and on RedisStore; 3 rounds of 10,000 requests each, about 5 minutes):
#      requests/s and latency p50/p99 per endpoint in OUT/fpm.md, logs and raw results in OUT/fpm/.
#
# OUT defaults to bench-results/<date-time> (bench-results/latest points to it).
# --quick: short settings. Standalone: --n 4000 --rounds 3 --target 500 --htarget 40 --cap 20
#          --scale-secs 10 --failovers 1; peers: --n 2000 --target 300 --htarget 40 --cap 20; FPM: --rounds 1
#          --requests 5000.
# --peers-args "...": more run_all.py options, e.g. "--quiet-max 10 --retries 0" on a busy machine.
# --fpm-args "...": more scripts/fpm.sh bench options, e.g. "--requests 20000 --rounds 5".
# Environment: CARGO_TARGET_DIR (cargo's), PEERBENCH_WORK (peers work dir, default
# /tmp/peerbench-work), PEERBENCH_PORT (default: a free port), REDISLOCK_LIB.
# Benchmarks measure, they do not assert: the exit status only reports failures to run.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export PATH="$HOME/.cargo/bin:$PATH"

PEERS=0
REDLOCK_PEERS=0
FPM=0
FPM_ARGS=
QUICK=0
OUT=
PLOT=docs/handoff.png
PEERS_ARGS=
while [ $# -gt 0 ]; do
  case "$1" in
    --peers) PEERS=1 ;;
    --redlock-peers) REDLOCK_PEERS=1 ;;
    --quick) QUICK=1 ;;
    --out) OUT=$2; shift ;;
    --plot) PLOT=$2; shift ;;
    --peers-args) PEERS_ARGS=$2; shift ;;
    --fpm) FPM=1 ;;
    --fpm-args) FPM_ARGS=$2; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
STANDALONE_ARGS=("$@")
if [ "$QUICK" = 1 ]; then
  STANDALONE_ARGS=(--n 4000 --rounds 3 --target 500 --htarget 40 --cap 20 --scale-secs 10 --failovers 1 "${STANDALONE_ARGS[@]}")
  PEER_SIZES=(--n 2000 --target 300 --htarget 40 --cap 20)
  FPM_SIZES=(--rounds 1 --requests 5000)
else
  PEER_SIZES=()
  FPM_SIZES=()   # scripts/fpm.sh bench's defaults: 3 rounds of 10,000 requests
fi

if [ -z "$OUT" ]; then
  OUT="bench-results/$(date +%Y%m%d-%H%M%S)"
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
case "$OUT" in "$ROOT"/bench-results/*) ln -sfn "$OUT" "$ROOT/bench-results/latest" ;; esac

# ---- 1. build
echo "bench.sh: building (release profile)"
cargo build --release --lib --quiet
BIN=$(cargo bench --bench locks --no-run --message-format=json \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "locks" and m.get("executable"):
        print(m["executable"])')
[ -x "$BIN" ] || { echo "bench.sh: could not build the bench program" >&2; exit 1; }
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
export REDISLOCK_LIB=${REDISLOCK_LIB:-$TARGET_DIR/release/libredislock.so}
echo "bench.sh: bench program $BIN; REDISLOCK_LIB=$REDISLOCK_LIB; results in $OUT"
{
  echo "date: $(date -Is)"
  echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "uname: $(uname -srm); cpus: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "rustc: $(rustc --version)"
  echo "redis-server: $(redis-server --version 2>/dev/null || echo missing)"
  echo "php: $(php -r 'echo PHP_VERSION;' 2>/dev/null || echo missing)"
} > "$OUT/meta.txt"

# ---- 2. standalone program
rc=0
echo "bench.sh: cargo bench --bench locks -- --raw $OUT/standalone.jsonl ${STANDALONE_ARGS[*]}"
cargo bench --quiet --bench locks -- --raw "$OUT/standalone.jsonl" "${STANDALONE_ARGS[@]}" \
  | tee "$OUT/standalone.md" || rc=$?

# ---- 3. peers harness
if [ "$PEERS" = 1 ]; then
  PEERS_DIR=$(cd "$ROOT/../shared/bench/peers" && pwd)
  bash "$PEERS_DIR/setup.sh"
  if [ -z "${PEERBENCH_PORT:-}" ]; then
    PEERBENCH_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  fi
  export PEERBENCH_PORT
  EXTRA=(--extra "redislock_rust=$BIN --auto-renew off"
         --extra "redislock_rust-renew=$BIN --auto-renew on")
  if php -r 'exit(extension_loaded("ffi") && extension_loaded("pcntl") ? 0 : 1);' 2>/dev/null \
     && [ -d "$ROOT/bindings/php/src" ] && [ -f "$REDISLOCK_LIB" ]; then
    EXTRA+=(--extra "redislock_php=php $ROOT/benches/php/bench_redislock.php --auto-renew off")
  else
    echo "bench.sh: no PHP row in the peers run (needs php with FFI and pcntl, bindings/php, $REDISLOCK_LIB)" >&2
  fi
  # shellcheck disable=SC2086 # PEERS_ARGS is a list of options on purpose
  bash "$PEERS_DIR/run.sh" --out "$OUT/peers" "${PEER_SIZES[@]}" "${EXTRA[@]}" $PEERS_ARGS \
    | tee "$OUT/peers.log" || rc=$?
fi

# ---- 3b. peers harness, Redlock mode
if [ "$REDLOCK_PEERS" = 1 ]; then
  PEERS_DIR=$(cd "$ROOT/../shared/bench/peers" && pwd)
  bash "$PEERS_DIR/setup.sh"
  if [ -z "${PEERBENCH_PORT:-}" ]; then
    # Three consecutive free ports.
    PEERBENCH_PORT=$(python3 -c 'import socket
for base in range(20000, 60000, 7):
    socks = []
    try:
        for p in range(base, base + 3):
            s = socket.socket(); s.bind(("127.0.0.1", p)); socks.append(s)
        print(base); break
    except OSError:
        pass
    finally:
        for s in socks: s.close()')
  fi
  export PEERBENCH_PORT
  # shellcheck disable=SC2086 # PEERS_ARGS is a list of options on purpose
  bash "$PEERS_DIR/run.sh" --masters 3 --out "$OUT/peers-redlock" "${PEER_SIZES[@]}" \
    --extra "redislock_rust=$BIN --auto-renew off" \
    --extra "redislock_rust-renew=$BIN --auto-renew on" $PEERS_ARGS \
    | tee "$OUT/peers-redlock.log" || rc=$?
fi

# ---- 4. plot
INPUTS=()
# (a run without h2, e.g. `-- --only sentinel`, has nothing to plot from the standalone program)
grep -qs '"scenario":"h2"' "$OUT/standalone.jsonl" && INPUTS+=("$OUT/standalone.jsonl")
[ -d "$OUT/peers" ] && INPUTS+=("$OUT/peers")
if [ ${#INPUTS[@]} -gt 0 ]; then
  python3 scripts/plot_handoff.py -o "$PLOT" "${INPUTS[@]}" \
    --title "h2 handoff latency: release called -> other worker's acquire returned ($(date +%F), $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg) at the end; $(basename "$OUT"))" \
    || rc=$?
fi

# ---- 5. PHP-FPM under nginx
if [ "$FPM" = 1 ]; then
  # shellcheck disable=SC2086 # FPM_ARGS is a list of options on purpose
  bash "$ROOT/scripts/fpm.sh" bench "${FPM_SIZES[@]}" --out "$OUT/fpm" $FPM_ARGS \
    | tee "$OUT/fpm.log" || rc=$?
  sed -n '/^| endpoint/,$p' "$OUT/fpm.log" | grep -v '^fpm: done' > "$OUT/fpm.md" || true
fi

REPORTS="$OUT/standalone.md"
[ "$PEERS" = 1 ] && REPORTS+=", $OUT/peers/report.md"
[ "$REDLOCK_PEERS" = 1 ] && REPORTS+=", $OUT/peers-redlock/report.md"
[ "$FPM" = 1 ] && REPORTS+=", $OUT/fpm.md"
echo "bench.sh: done (status $rc): $REPORTS; plot $PLOT"
exit "$rc"
