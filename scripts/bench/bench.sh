#!/usr/bin/env bash
# One benchmark sitting for redislock:
#
#   scripts/bench/bench.sh [--peers] [--redlock-peers] [--masters N] [--fpm] [--quick] [--out DIR] [--plot FILE]
#                    [--peers-args "ARGS"] [--fpm-args "ARGS"] [-- ARGS for the standalone program]
#   scripts/bench/bench.sh --against REV [--rounds N] [--quick] [--out DIR] [-- ARGS for the standalone program]
#
#   1. builds, with the release profile, the benchmark program (the workspace crate bench/,
#      `cargo build --release -p redislock-bench`: <target>/release/redislock-bench) and
#      libredislock.so (for the PHP rows; REDISLOCK_LIB points to it unless already set);
#   2. runs the standalone program, `redislock-bench --raw OUT/standalone.jsonl`:
#      its own redis-server (through the test kit); floor, u1, u8, c8, h2, Sentinel (a group of
#      1 master, 2 replicas and 3 sentinels: u1 and c8 through redis-sentinel:// with and
#      without min_replicas(1), 3 failovers; about 1 minute; `-- --skip sentinel` leaves it
#      out, `-- --only sentinel` runs it alone), renewal scale, PHP rows; the report (markdown
#      tables, targets, JSON summary lines) goes to OUT/standalone.md and to the terminal;
#   3. with --peers: the peers harness of ../shared/bench/peers (setup.sh, then run.sh) with three
#      rows added through its --extra hook:
#        redislock_rust        = the bench binary --auto-renew off   (Rust, fixed 10 s lease)
#        redislock_rust-renew  = the bench binary --auto-renew on    (Rust, auto-renewal)
#        redislock_php         = php bench/php/bench_redislock.php (PHP package over FFI)
#      results and report in OUT/peers/ (report.md); the full run takes about 10 minutes,
#      --quick about 3 (plus its waits for a quiet machine);
#   3b. with --redlock-peers: the peers harness in Redlock mode, `run.sh --masters N` (N
#      independent masters, 3 unless --masters; the peers that take several: redlock-rs, pottery, node-redlock,
#      Symfony's CombinedStore, and the Redlock floor) with the bench binary given --ports:
#        redislock_rust        = --auto-renew off   (redlock:// over the three masters)
#        redislock_rust-renew  = --auto-renew on
#      results and report in OUT/peers-redlock/ (report.md); about 2 minutes with --quick;
#   4. regenerates the handoff plot, docs/handoff.png by default (--plot FILE), from the h2 records
#      of OUT/standalone.jsonl and OUT/peers/;
#   5. with --fpm: PHP-FPM under nginx, `scripts/fpm/fpm.sh bench` (8 workers, wrk at concurrency 32;
#      endpoints without a lock, phpredis pconnect + SET NX PX, Redislock\Client, Symfony Lock on
#      RedislockStore and on RedisStore; 3 rounds of 10,000 requests each, about 5 minutes):
#      requests/s and latency p50/p99 per endpoint in OUT/fpm.md, logs and raw results in OUT/fpm/.
#
# --against REV: A/B of two builds of the library, instead of steps 2-5. Builds the bench program
#   at git REV too (in a temporary git worktree, <target>/ab/<REV's short hash>/src, with the
#   cargo target dir <target>/ab/target shared by all REVs; the binary is kept as
#   <target>/ab/<short hash>/redislock-bench and reused by later runs: delete that directory to
#   rebuild; REV may predate the bench/ crate: then it is `cargo bench --bench locks --no-run`),
#   starts one redis-server, and runs --rounds N (default 6) rounds of three contestants: this
#   tree's binary as "head", the same binary again as "head-again" (the A/A row: the noise
#   between two identical builds) and REV's; the order rotates every round (head, head-again,
#   REV; head-again, REV, head; ...) so that drift hits all alike. Each run is the standalone
#   program with `--port P --only u1,u8,c8,h2 --rounds 1 --php off`, with --quick
#   `--n 4000 --target 500 --htarget 40 --cap 20`, then the ARGS after -- (later options win:
#   `-- --only u1,c8`, `-- --n 50000`). scripts/bench/ab_report.py then writes
#   OUT/ab.md, printed too: per scenario the median over the rounds of each contestant and the
#   ratios head/REV and head-again/head. Records and reports of every run in OUT/ab/. With
#   the program's default sizes a round takes about 2 minutes (h2: 200 handoffs of ~50 ms,
#   three times per run); --quick about 25 s.
#
# OUT defaults to bench-results/<date-time> (bench-results/latest points to it).
# --masters N: independent masters of the Redlock rows (an odd number, at least 3; default 3): the
#   standalone program's Redlock section (`--masters N`, u1 and c8; its stops section keeps three)
#   and --redlock-peers.
# --quick: short settings. Standalone: --n 4000 --rounds 3 --target 500 --htarget 40 --cap 20
#          --scale-secs 10 --failovers 1; peers: --n 2000 --target 300 --htarget 40 --cap 20; FPM: --rounds 1
#          --requests 5000.
# --peers-args "...": more run_all.py options, e.g. "--quiet-max 10 --retries 0" on a busy machine.
# --fpm-args "...": more scripts/fpm/fpm.sh bench options, e.g. "--requests 20000 --rounds 5".
# Environment: CARGO_TARGET_DIR (cargo's), PEERBENCH_WORK (peers work dir, default
# /tmp/peerbench-work), PEERBENCH_PORT (default: a free port), REDISLOCK_LIB.
# Benchmarks measure, they do not assert: the exit status only reports failures to run.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
export PATH="$HOME/.cargo/bin:$PATH"

PEERS=0
REDLOCK_PEERS=0
MASTERS=3
FPM=0
FPM_ARGS=
QUICK=0
OUT=
PLOT=docs/handoff.png
PEERS_ARGS=
AGAINST=
AB_ROUNDS=
while [ $# -gt 0 ]; do
  case "$1" in
    --peers) PEERS=1 ;;
    --redlock-peers) REDLOCK_PEERS=1 ;;
    --masters) MASTERS=$2; shift ;;
    --quick) QUICK=1 ;;
    --out) OUT=$2; shift ;;
    --plot) PLOT=$2; shift ;;
    --peers-args) PEERS_ARGS=$2; shift ;;
    --fpm) FPM=1 ;;
    --fpm-args) FPM_ARGS=$2; shift ;;
    --against) AGAINST=$2; shift ;;
    --rounds) AB_ROUNDS=$2; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
case "$MASTERS" in
  ''|*[!0-9]*) echo "bench.sh: --masters needs an odd number, at least 3" >&2; exit 2 ;;
esac
if [ "$MASTERS" -lt 3 ] || [ $((MASTERS % 2)) = 0 ]; then
  echo "bench.sh: --masters needs an odd number, at least 3" >&2; exit 2
fi
STANDALONE_ARGS=(--masters "$MASTERS" "$@")
USER_ARGS=("$@")
if [ -n "$AGAINST" ]; then
  [ "$PEERS$REDLOCK_PEERS$FPM" = 000 ] \
    || { echo "bench.sh: --against runs alone (no --peers, --redlock-peers, --fpm)" >&2; exit 2; }
  AB_ROUNDS=${AB_ROUNDS:-6}
  case "$AB_ROUNDS" in ''|*[!0-9]*|0) echo "bench.sh: --rounds needs a positive number" >&2; exit 2 ;; esac
  REV_HASH=$(git rev-parse --verify --quiet "$AGAINST^{commit}") \
    || { echo "bench.sh: --against $AGAINST: not a commit" >&2; exit 2; }
  REV_SHORT=$(git rev-parse --short "$REV_HASH")
elif [ -n "$AB_ROUNDS" ]; then
  echo "bench.sh: --rounds goes with --against (the program's own rounds: -- --rounds N)" >&2; exit 2
fi
if [ "$QUICK" = 1 ]; then
  STANDALONE_ARGS=(--n 4000 --rounds 3 --target 500 --htarget 40 --cap 20 --scale-secs 10 --failovers 1 "${STANDALONE_ARGS[@]}")
  AB_SIZES=(--n 4000 --target 500 --htarget 40 --cap 20)
  PEER_SIZES=(--n 2000 --target 300 --htarget 40 --cap 20)
  FPM_SIZES=(--rounds 1 --requests 5000)
else
  AB_SIZES=()
  PEER_SIZES=()
  FPM_SIZES=()   # scripts/fpm/fpm.sh bench's defaults: 3 rounds of 10,000 requests
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
cargo build --release --quiet -p redislock-bench
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
BIN=$TARGET_DIR/release/redislock-bench
[ -x "$BIN" ] || { echo "bench.sh: could not build the bench program" >&2; exit 1; }
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

# ---- A/B against REV (then exit)
if [ -n "$AGAINST" ]; then
  AB_DIR=$TARGET_DIR/ab/$REV_SHORT
  AB_TARGET=$TARGET_DIR/ab/target   # one cargo target dir for every REV: the dependencies build once
  REV_BIN=$AB_DIR/redislock-bench
  WT=$AB_DIR/src
  TMP=$(mktemp -d /tmp/redislock-ab.XXXXXX)
  RPID=
  ab_cleanup() {
    [ -n "$RPID" ] && kill "$RPID" 2>/dev/null
    [ -d "$WT" ] && git worktree remove --force "$WT" 2>/dev/null
    rm -rf "$TMP"
  }
  trap ab_cleanup EXIT
  if [ -x "$REV_BIN" ]; then
    echo "bench.sh: $REV_SHORT's bench program: $REV_BIN (built before; delete $AB_DIR to rebuild)"
  else
    echo "bench.sh: building $REV_SHORT's bench program (worktree $WT, target $AB_TARGET)"
    mkdir -p "$AB_DIR"
    [ -d "$WT" ] && git worktree remove --force "$WT"
    git worktree prune
    git worktree add --quiet --detach "$WT" "$REV_HASH"
    if git cat-file -e "$REV_HASH:bench/Cargo.toml" 2>/dev/null; then
      (cd "$WT" && CARGO_TARGET_DIR="$AB_TARGET" cargo build --release --quiet -p redislock-bench)
      cp "$AB_TARGET/release/redislock-bench" "$REV_BIN.tmp"
    elif git cat-file -e "$REV_HASH:benches/locks.rs" 2>/dev/null; then
      # Before the bench/ crate: the bench target `locks` of the root package.
      built=$(cd "$WT" && CARGO_TARGET_DIR="$AB_TARGET" cargo bench --bench locks --no-run --message-format=json \
        | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "locks" and m.get("executable"):
        print(m["executable"])')
      [ -x "$built" ] || { echo "bench.sh: could not build $REV_SHORT's bench program" >&2; exit 1; }
      cp "$built" "$REV_BIN.tmp"
    else
      echo "bench.sh: $REV_SHORT has neither bench/Cargo.toml nor benches/locks.rs" >&2; exit 1
    fi
    mv "$REV_BIN.tmp" "$REV_BIN"
    git worktree remove --force "$WT"
  fi
  # Private copies: a build of this tree during the runs cannot replace what is measured.
  cp "$BIN" "$TMP/head"
  cp "$REV_BIN" "$TMP/rev"
  LABELS=(head head-again "$REV_SHORT")
  BINS=("$TMP/head" "$TMP/head" "$TMP/rev")
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  mkdir -p "$OUT/ab"
  redis-server --bind 127.0.0.1 --port "$PORT" --save "" --appendonly no >"$OUT/ab/redis.log" 2>&1 &
  RPID=$!
  for _ in $(seq 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$PORT" ping >/dev/null || { echo "bench.sh: redis-server did not start (see $OUT/ab/redis.log)" >&2; exit 1; }
  AB_ARGS=(--port "$PORT" --only u1,u8,c8,h2 --rounds 1 --php off "${AB_SIZES[@]}" "${USER_ARGS[@]}")
  echo "bench.sh: A/B, $AB_ROUNDS rounds of ${LABELS[*]} (order rotating); redis-server on port $PORT; each run: redislock-bench ${AB_ARGS[*]}"
  echo "against: $AGAINST = $REV_HASH; rounds: $AB_ROUNDS; program arguments: ${AB_ARGS[*]}" >> "$OUT/meta.txt"
  rc=0
  for r in $(seq "$AB_ROUNDS"); do
    for k in 0 1 2; do
      i=$(( (k + r - 1) % 3 ))
      run="${LABELS[$i]}.r$r"
      echo "bench.sh: round $r/$AB_ROUNDS: ${LABELS[$i]} (load $(cut -d' ' -f1 /proc/loadavg))"
      "${BINS[$i]}" "${AB_ARGS[@]}" --raw "$OUT/ab/$run.jsonl" >"$OUT/ab/$run.md" 2>"$OUT/ab/$run.log" \
        || { rc=$?; echo "bench.sh: $run failed (status $rc; $OUT/ab/$run.log)" >&2; }
    done
  done
  python3 scripts/bench/ab_report.py --rev "$REV_SHORT" --title "$(git rev-parse --short HEAD)$(git diff --quiet HEAD 2>/dev/null || echo '+changes') against $AGAINST ($REV_SHORT), $AB_ROUNDS rounds; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg) at the end" \
    "$OUT/ab" | tee "$OUT/ab.md" || rc=$?
  echo "bench.sh: done (status $rc): $OUT/ab.md; every run's report and records in $OUT/ab/"
  exit "$rc"
fi

# ---- 2. standalone program
rc=0
echo "bench.sh: redislock-bench --raw $OUT/standalone.jsonl ${STANDALONE_ARGS[*]}"
"$BIN" --raw "$OUT/standalone.jsonl" "${STANDALONE_ARGS[@]}" \
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
    EXTRA+=(--extra "redislock_php=php $ROOT/bench/php/bench_redislock.php --auto-renew off")
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
  bash "$PEERS_DIR/run.sh" --masters "$MASTERS" --out "$OUT/peers-redlock" "${PEER_SIZES[@]}" \
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
  python3 scripts/bench/plot_handoff.py -o "$PLOT" "${INPUTS[@]}" \
    --title "h2 handoff latency: release called -> other worker's acquire returned ($(date +%F), $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg) at the end; $(basename "$OUT"))" \
    || rc=$?
fi

# ---- 5. PHP-FPM under nginx
if [ "$FPM" = 1 ]; then
  # shellcheck disable=SC2086 # FPM_ARGS is a list of options on purpose
  bash "$ROOT/scripts/fpm/fpm.sh" bench "${FPM_SIZES[@]}" --out "$OUT/fpm" $FPM_ARGS \
    | tee "$OUT/fpm.log" || rc=$?
  sed -n '/^| endpoint/,$p' "$OUT/fpm.log" | grep -v '^fpm: done' > "$OUT/fpm.md" || true
fi

REPORTS="$OUT/standalone.md"
[ "$PEERS" = 1 ] && REPORTS+=", $OUT/peers/report.md"
[ "$REDLOCK_PEERS" = 1 ] && REPORTS+=", $OUT/peers-redlock/report.md"
[ "$FPM" = 1 ] && REPORTS+=", $OUT/fpm.md"
echo "bench.sh: done (status $rc): $REPORTS; plot $PLOT"
exit "$rc"
