#!/usr/bin/env bash
# Soak test: the oversell race from Rust, C and PHP clients at once against one private
# redis-server that a chaos loop keeps killing, pausing and restarting.
#
#   bash scripts/bench/soak.sh                 # 10 minutes
#   bash scripts/bench/soak.sh --minutes 1     # or SOAK_SECONDS=90 bash scripts/bench/soak.sh
#
# Options (or environment): --minutes M (SOAK_SECONDS overrides), RUST_THREADS (4),
# C_THREADS (4), PHP_PROCS (3), CHAOS_MIN_S/CHAOS_MAX_S (5/20: seconds between chaos events).
# Needs: cargo, gcc, php (ffi, pcntl), redis-server, redis-cli, python3, flock (scripts/setup.sh).
#
# What runs:
# - the lock server: a private redis-server on a free loopback port (--save "" --appendonly no,
#   so every kill or restart loses all keys: locks, waiter queues and the fencing counter),
#   started and faulted by the test kit's program (`redislock-testkit single`, scripts/lib/testkit.sh);
# - workers: soak/target soak_worker (Rust, threads), soak/worker.c (C, pthreads),
#   soak/worker.php (PHP, pcntl_fork processes), all hammering one lock name. Each iteration:
#   acquire with fencing (wait bound 2 s, fixed lease 1.5 s, no auto-renewal), read the stock
#   through the resource with the fencing token, sleep 0-3 ms (widens the race), write stock+1
#   with the token, release (NOT_HELD there = "lock reported lost");
# - the protected resource: a file "value highest_token" that the chaos cannot touch, changed
#   only under flock(2). A read registers its token (rejected if below the highest seen), a
#   write is accepted only if its token is still >= the highest seen. So a holder whose lock
#   was lost (lease ran out during a SIGSTOP, key wiped by a restart) cannot write once a newer
#   holder has touched the resource: every accepted write is value_read + 1 with nobody else in
#   between, and accepted writes must equal the final value (lost updates = 0);
# - chaos: every CHAOS_MIN_S..CHAOS_MAX_S seconds one of: kill (SIGKILL, down 0-1 s, start again
#   on the same port), pause (SIGSTOP for 0.2-3 s, then SIGCONT), restart (SIGTERM, start again).
#
# Fencing counter after a restart: the new server starts empty, so {lock}:fence restarts at 1
# and every token would be below the resource's high-water mark: all writes rejected (safe, but
# the soak would stop making progress). As docs/guarantees.md advises, the chaos loop re-seeds
# the counter after each kill/restart: SET {soak:stock}:fence <highest seen by the resource +
# 1000000>. The margin covers grants the dead server handed out that have not reached the
# resource yet (at most a few: one per worker), so no token is ever given out twice. Grants made
# between the restart and the re-seed get small tokens and are rejected by the resource
# (counted as stale reads/writes), which is the intended safe outcome.
#
# At the end it prints the figures; exit status 1 if lost updates != 0 (or a worker failed).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$PWD"

SOAK_SECONDS="${SOAK_SECONDS:-}"
MINUTES=10
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) MINUTES="$2"; shift 2 ;;
        --minutes=*) MINUTES="${1#--minutes=}"; shift ;;
        -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
        *) echo "soak.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
if [ -z "$SOAK_SECONDS" ]; then
    SOAK_SECONDS=$(python3 -c "print(max(1, int(float('$MINUTES') * 60)))")
fi
RUST_THREADS="${RUST_THREADS:-4}"
C_THREADS="${C_THREADS:-4}"
PHP_PROCS="${PHP_PROCS:-3}"
CHAOS_MIN_S="${CHAOS_MIN_S:-5}"
CHAOS_MAX_S="${CHAOS_MAX_S:-20}"
LOCK_NAME="soak:stock"
FENCE_KEY="{soak:stock}:fence"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

for tool in cargo gcc php redis-server redis-cli python3 flock; do
    command -v "$tool" >/dev/null || { echo "soak.sh: $tool not found; run scripts/setup.sh" >&2; exit 2; }
done

# ---- build ----------------------------------------------------------------------------------
echo "soak: building (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
cargo build --release --lib --quiet
LIBDIR="$CARGO_TARGET_DIR/release"
(cd soak && cargo build --release --quiet)
# shellcheck source=scripts/lib/testkit.sh
source scripts/lib/testkit.sh
testkit_build
WORK="$(mktemp -d -t redislock-soak.XXXXXX)"
gcc -std=c11 -O2 -Wall -Wextra -Iinclude soak/worker.c -L"$LIBDIR" -lredislock -lpthread \
    -Wl,-rpath,"$LIBDIR" -o "$WORK/c_worker"
RUST_WORKER="$CARGO_TARGET_DIR/release/soak_worker"
export REDISLOCK_LIB="$LIBDIR/libredislock.so"

# ---- the lock server ------------------------------------------------------------------------
RES="$WORK/resource"
echo "0 0" > "$RES"
EVENTS="$WORK/chaos.log"
: > "$EVENTS"

reseed_fence() {
    local highest
    highest="$(flock "$RES" cat "$RES" | awk '{print $2}')"
    redis-cli -p "$PORT" SET "$FENCE_KEY" "$((highest + 1000000))" >/dev/null
}

rand_between() { # $1..$2 as a decimal with two digits
    python3 -c "import random; print(f'{random.uniform($1, $2):.2f}')"
}

chaos_loop() {
    local end=$(( $(date +%s) + SOAK_SECONDS )) n=0
    set +e
    trap 'exit 0' TERM
    while [ "$n" -lt 10000 ]; do
        sleep "$(rand_between "$CHAOS_MIN_S" "$CHAOS_MAX_S")"
        [ "$(date +%s)" -lt "$((end - 2))" ] || break
        n=$((n + 1))
        case $((RANDOM % 3)) in
            0)
                testkit_cmd kill node 0
                sleep "$(rand_between 0 1)"
                testkit_cmd restart node 0
                reseed_fence
                echo "kill $(date +%s)" >> "$EVENTS"
                ;;
            1)
                local d; d="$(rand_between 0.2 3)"
                testkit_cmd pause node 0
                sleep "$d"
                testkit_cmd resume node 0
                echo "pause $d" >> "$EVENTS"
                ;;
            2)
                # SIGTERM, answered once the server has exited; then a new one on the same port.
                testkit_cmd term node 0
                testkit_cmd restart node 0
                reseed_fence
                echo "restart $(date +%s)" >> "$EVENTS"
                ;;
        esac
    done
}

PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    # The server's log, for the work dir; then the kit stops the server and removes its files.
    if [ -n "$TESTKIT_PID" ] && testkit_cmd log node 0 2>/dev/null; then
        cp "${TESTKIT_REPLY#LOG }" "$WORK/redis.log" 2>/dev/null || true
    fi
    testkit_stop
}
trap cleanup EXIT INT TERM

if ! testkit_start single; then
    echo "soak: cannot start redis-server" >&2
    exit 1
fi
URL="$TESTKIT_URL"
PORT="${TESTKIT_NODES[0]}"
echo "soak: lock server $URL, resource $RES, ${SOAK_SECONDS}s, workers: rust ${RUST_THREADS} threads, c ${C_THREADS} threads, php ${PHP_PROCS} processes"

chaos_loop &
CHAOS_PID=$!
PIDS+=("$CHAOS_PID")

# The workers do not hold the kit's pipes (only this shell and the chaos loop talk to it).

"$RUST_WORKER" "$URL" "$RES" "$LOCK_NAME" "$SOAK_SECONDS" "$RUST_THREADS" > "$WORK/rust.out" 2> "$WORK/rust.err" \
    {TESTKIT_IN}>&- {TESTKIT_OUT}<&- &
RUST_PID=$!; PIDS+=("$RUST_PID")
"$WORK/c_worker" "$URL" "$RES" "$LOCK_NAME" "$SOAK_SECONDS" "$C_THREADS" > "$WORK/c.out" 2> "$WORK/c.err" \
    {TESTKIT_IN}>&- {TESTKIT_OUT}<&- &
C_PID=$!; PIDS+=("$C_PID")
php soak/worker.php "$URL" "$RES" "$LOCK_NAME" "$SOAK_SECONDS" "$PHP_PROCS" > "$WORK/php.out" 2> "$WORK/php.err" \
    {TESTKIT_IN}>&- {TESTKIT_OUT}<&- &
PHP_PID=$!; PIDS+=("$PHP_PID")

worker_fail=0
for p in "$RUST_PID" "$C_PID" "$PHP_PID"; do
    wait "$p" || { echo "soak: worker $p exited with $?" >&2; worker_fail=1; }
done
kill "$CHAOS_PID" 2>/dev/null || true
wait "$CHAOS_PID" 2>/dev/null || true

for f in rust c php; do
    if [ -s "$WORK/$f.err" ]; then echo "--- $f stderr (last lines):"; tail -n 5 "$WORK/$f.err"; fi
done

# ---- report ---------------------------------------------------------------------------------
FINAL="$(flock "$RES" cat "$RES")"
cat "$WORK/rust.out" "$WORK/c.out" "$WORK/php.out" | grep '^STATS' > "$WORK/stats" || true
echo
echo "==== redislock soak: ${SOAK_SECONDS}s, Rust + C + PHP against one chaotic redis-server ===="
set +e
awk -v final="$FINAL" -v events="$EVENTS" -v worker_fail="$worker_fail" '
function field(line, key,   i, n, parts, kv) {
    n = split(line, parts, " ")
    for (i = 1; i <= n; i++) { split(parts[i], kv, "="); if (kv[1] == key) return substr(parts[i], length(key) + 2) }
    return ""
}
{
    lang = field($0, "lang"); if (!(lang in lines)) nlang++; lines[lang]++
    it[lang] += field($0, "iterations"); inc[lang] += field($0, "increments"); lost[lang] += field($0, "lost")
    sr[lang] += field($0, "stale_reads"); sw[lang] += field($0, "stale_writes")
    e = field($0, "errors")
    if (e != "-") { n = split(e, es, ","); for (i = 1; i <= n; i++) { split(es[i], kv, "="); err[kv[1]] += kv[2] } }
}
END {
    split(final, fv, " "); value = fv[1]; highest = fv[2]
    total_inc = 0; total_lost = 0; total_sr = 0; total_sw = 0; total_it = 0
    printf "%-6s %12s %12s %12s %12s %12s\n", "client", "iterations", "increments", "locks lost", "stale reads", "stale writes"
    for (l in lines) {
        printf "%-6s %12d %12d %12d %12d %12d\n", l, it[l], inc[l], lost[l], sr[l], sw[l]
        total_it += it[l]; total_inc += inc[l]; total_lost += lost[l]; total_sr += sr[l]; total_sw += sw[l]
    }
    printf "%-6s %12d %12d %12d %12d %12d\n", "all", total_it, total_inc, total_lost, total_sr, total_sw
    print ""
    printf "increments done (accepted writes): %d\n", total_inc
    printf "final value in the resource:       %d   (highest fencing token seen: %s)\n", value, highest
    printf "lost updates (accepted - final):   %d\n", total_inc - value
    printf "locks reported lost (release NOT_HELD): %d\n", total_lost
    printf "stale operations rejected by fencing: %d (reads %d, writes %d)\n", total_sr + total_sw, total_sr, total_sw
    printf "errors per class:"
    ne = 0
    for (k in err) { printf "%s %s=%d", (ne++ ? "," : ""), k, err[k] }
    if (ne == 0) printf " none"
    print ""
    kills = 0; pauses = 0; restarts = 0
    while ((getline line < events) > 0) { split(line, w, " "); if (w[1] == "kill") kills++; else if (w[1] == "pause") pauses++; else if (w[1] == "restart") restarts++ }
    printf "chaos events: %d kills (SIGKILL + restart), %d pauses (SIGSTOP 0.2-3 s), %d restarts (SIGTERM + restart)\n", kills, pauses, restarts
    if (nlang < 3 || worker_fail) { print "RESULT: FAIL (a worker did not report or failed)"; exit 1 }
    if (total_inc - value != 0) { print "RESULT: FAIL (lost updates)"; exit 1 }
    print "RESULT: OK (no lost updates)"
}' "$WORK/stats"
rc=$?
echo "work dir: $WORK"
exit $rc
