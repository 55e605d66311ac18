#!/usr/bin/env bash
# Fuzz the C API (fuzz/fuzz_targets/c_api.rs) with cargo-fuzz / libFuzzer + AddressSanitizer.
#
#   bash scripts/fuzz.sh                    # 60 s
#   FUZZ_SECONDS=3600 bash scripts/fuzz.sh  # an hour
#
# Installs cargo-fuzz (cargo install cargo-fuzz --locked) if missing. Starts no server itself:
# the target starts a private redis-server on a free loopback port through the test kit
# (redislock-testkit), or uses $REDISLOCK_FUZZ_URL. Works on stable Rust through RUSTC_BOOTSTRAP=1 (cargo-fuzz needs
# -Zsanitizer and friends). Seeds: fuzz/corpus/c_api; the corpus grows in fuzz/corpus-work/c_api.
# Crashes land in fuzz/artifacts/c_api/; reproduce one with
#   RUSTC_BOOTSTRAP=1 cargo fuzz run c_api fuzz/artifacts/c_api/crash-...
# Exit status: 0 when the run finished without a crash, non-zero otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
SECONDS_TOTAL="${FUZZ_SECONDS:-60}"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi
command -v redis-server >/dev/null || [ -n "${REDISLOCK_FUZZ_URL:-}" ] || {
    echo "fuzz.sh: redis-server not found (apt-get install redis-server) and REDISLOCK_FUZZ_URL not set" >&2
    exit 2
}

LOG="$(mktemp -t redislock-fuzz.XXXXXX.log)"
# New inputs go to fuzz/corpus-work/c_api (not checked in); fuzz/corpus/c_api holds the seeds.
mkdir -p fuzz/corpus-work/c_api fuzz/artifacts/c_api
set +e
cargo fuzz run --fuzz-dir fuzz c_api fuzz/corpus-work/c_api fuzz/corpus/c_api -- \
    -max_total_time="$SECONDS_TOTAL" -timeout=20 -rss_limit_mb=4096 -max_len=4096 \
    -print_final_stats=1 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
set -e

echo
echo "==== fuzz summary (c_api, ${SECONDS_TOTAL}s) ===="
grep -E '^#[0-9]+.*(DONE|pulse)' "$LOG" | tail -n 1 || true
grep -E '^stat::' "$LOG" || true
if grep -qE 'ERROR: (libFuzzer|AddressSanitizer)|panicked at|==[0-9]+==ERROR|deadly signal|Test unit written' "$LOG"; then
    echo "CRASH found; see above and fuzz/artifacts/c_api/" >&2
    rc=${rc:-1}; [ "$rc" -eq 0 ] && rc=1
fi
echo "log: $LOG"
echo "exit: $rc"
exit "$rc"
