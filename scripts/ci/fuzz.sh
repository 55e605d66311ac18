#!/usr/bin/env bash
# Fuzz with cargo-fuzz / libFuzzer + AddressSanitizer: the C API (fuzz/fuzz_targets/c_api.rs),
# then the crate's RESP parser against redis-rs' on the same bytes (fuzz/fuzz_targets/resp_diff.rs).
#
#   bash scripts/ci/fuzz.sh                                   # the C API 60 s, the parser 20 s
#   FUZZ_SECONDS=3600 FUZZ_RESP_SECONDS=600 bash scripts/ci/fuzz.sh
#   bash scripts/ci/fuzz.sh resp_diff                         # one target (c_api or resp_diff)
#
# Installs cargo-fuzz (cargo install cargo-fuzz --locked) if missing. Starts no server itself:
# the C API's target starts a private redis-server on a free loopback port through the test kit
# (redislock-testkit), or uses $REDISLOCK_FUZZ_URL; the parser's needs none. Works on stable Rust
# through RUSTC_BOOTSTRAP=1 (cargo-fuzz needs -Zsanitizer and friends). Seeds: fuzz/corpus/<target>;
# the corpus grows in fuzz/corpus-work/<target>. Crashes land in fuzz/artifacts/<target>/;
# reproduce one with
#   RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir fuzz <target> fuzz/artifacts/<target>/crash-...
# Exit status: 0 when every run finished without a crash, non-zero otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$HOME/.cargo/bin:$PATH"
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
if [ $# -gt 0 ]; then TARGETS=("$@"); else TARGETS=(c_api resp_diff); fi

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi

# fuzz TARGET SECONDS: one bounded run, its summary; its exit status.
fuzz() {
    local target=$1 seconds=$2 log rc
    log="$(mktemp -t "redislock-fuzz-$target.XXXXXX.log")"
    # New inputs go to fuzz/corpus-work/<target> (not checked in); fuzz/corpus/<target> holds
    # the seeds.
    mkdir -p "fuzz/corpus-work/$target" "fuzz/artifacts/$target"
    set +e
    cargo fuzz run --fuzz-dir fuzz "$target" "fuzz/corpus-work/$target" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -max_len=4096 \
        -print_final_stats=1 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    set -e

    echo
    echo "==== fuzz summary ($target, ${seconds}s) ===="
    grep -E '^#[0-9]+.*(DONE|pulse)' "$log" | tail -n 1 || true
    grep -E '^stat::' "$log" || true
    if grep -qE 'ERROR: (libFuzzer|AddressSanitizer)|panicked at|==[0-9]+==ERROR|deadly signal|Test unit written' "$log"; then
        echo "CRASH found; see above and fuzz/artifacts/$target/" >&2
        [ "$rc" -eq 0 ] && rc=1
    fi
    echo "log: $log"
    echo "exit: $rc"
    return "$rc"
}

status=0
for target in "${TARGETS[@]}"; do
    case $target in
        c_api)
            command -v redis-server >/dev/null || [ -n "${REDISLOCK_FUZZ_URL:-}" ] || {
                echo "fuzz.sh: redis-server not found (apt-get install redis-server) and REDISLOCK_FUZZ_URL not set" >&2
                exit 2
            }
            fuzz c_api "${FUZZ_SECONDS:-60}" || status=$?
            ;;
        resp_diff) fuzz resp_diff "${FUZZ_RESP_SECONDS:-20}" || status=$? ;;
        *) echo "fuzz.sh: no target $target (c_api, resp_diff)" >&2; exit 2 ;;
    esac
done
exit "$status"
