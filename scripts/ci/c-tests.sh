#!/usr/bin/env bash
# Builds libredislock and the C tests (ffi-tests/c), and runs the tests three times: plain,
# under AddressSanitizer + UndefinedBehaviorSanitizer, and under valgrind (memcheck, failing on
# any error and on definite leaks). Also checks that include/redislock.h compiles as C99 and C++
# and that the C examples (examples/c) build, all with -Wall -Wextra -Wpedantic -Werror.
#
# Usage: scripts/ci/c-tests.sh [--release] [--no-asan] [--no-valgrind] [TEST-NAME-FILTER...]
#
# Environment:
#   REDISLOCK_TEST_URL     run against this server; otherwise the test kit's program
#                          (`redislock-testkit single`, see scripts/lib/testkit.sh) starts a private
#                          redis-server on a free loopback port (never 6379) and removes it at the end
#   REDISLOCK_TESTKIT      that program, instead of building it with cargo
#   REDISLOCK_LIB_DIR      use the libredislock.so in this directory instead of building it with
#                          cargo (tests/ffi_c.rs passes the one `cargo test` built)
#   REDISLOCK_C_BUILD_DIR  where the test programs go (default: <cargo target dir>/ffi-tests-c)
#   CC, CXX                compilers (default cc, c++); CARGO_TARGET_DIR is honoured
#
# Missing tools (a C compiler, valgrind, redis-server): run scripts/setup.sh.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
# shellcheck source=scripts/lib/testkit.sh
source scripts/lib/testkit.sh

profile=debug
asan=1
valgrind=1
filters=()
for arg in "$@"; do
    case "$arg" in
        --release) profile=release ;;
        --no-asan) asan=0 ;;
        --no-valgrind) valgrind=0 ;;
        -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
        -*) echo "unknown option $arg (see --help)" >&2; exit 2 ;;
        *) filters+=("$arg") ;;
    esac
done

CC="${CC:-cc}"
CXX="${CXX:-c++}"
missing=()
command -v "$CC" >/dev/null 2>&1 || missing+=("C compiler ($CC)")
command -v "$CXX" >/dev/null 2>&1 || missing+=("C++ compiler ($CXX)")
[[ $valgrind -eq 0 ]] || command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
[[ -n "${REDISLOCK_TEST_URL:-}" ]] || command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
[[ -n "${REDISLOCK_TEST_URL:-}" || -n "${REDISLOCK_TESTKIT:-}" ]] || command -v cargo >/dev/null 2>&1 \
    || missing+=(cargo)
if [[ ${#missing[@]} -gt 0 ]]; then
    printf 'c-tests: missing %s; install them with scripts/setup.sh\n' "${missing[*]}" >&2
    exit 1
fi

step() { printf '\n== c-tests: %s\n' "$*"; }

# --- the library -------------------------------------------------------------------------------
target_dir="${CARGO_TARGET_DIR:-$root/target}"
if [[ -n "${REDISLOCK_LIB_DIR:-}" ]]; then
    libdir="$REDISLOCK_LIB_DIR"
else
    step "cargo build --lib ($profile)"
    cargo_flags=(--lib)
    [[ $profile == release ]] && cargo_flags+=(--release)
    cargo build "${cargo_flags[@]}"
    libdir="$target_dir/$profile"
fi
if [[ -z "${REDISLOCK_TEST_URL:-}" ]]; then
    step "the test kit's program (redislock-testkit)"
    testkit_build
fi
if [[ ! -f "$libdir/libredislock.so" ]]; then
    echo "c-tests: $libdir/libredislock.so not found" >&2
    exit 1
fi
if ! readelf -d "$libdir/libredislock.so" 2>/dev/null | grep -q NODELETE; then
    echo "c-tests: $libdir/libredislock.so is not linked with -z nodelete (see build.rs)" >&2
    exit 1
fi

# Every function the library exports is declared in the header and called by the C tests.
missing_fns=()
for fn in $(nm -D --defined-only "$libdir/libredislock.so" | awk '$2 == "T" && $3 ~ /^redislock_/ {print $3}'); do
    grep -q "\b$fn(" include/redislock.h || missing_fns+=("$fn (not in include/redislock.h)")
    grep -q "\b$fn(" ffi-tests/c/test_*.c || missing_fns+=("$fn (not called by ffi-tests/c)")
done
if [[ ${#missing_fns[@]} -gt 0 ]]; then
    printf 'c-tests: exported but not covered: %s\n' "${missing_fns[@]}" >&2
    exit 1
fi

# --- compile -----------------------------------------------------------------------------------
build="${REDISLOCK_C_BUILD_DIR:-$target_dir/ffi-tests-c}"
mkdir -p "$build"
warn=(-Wall -Wextra -Wpedantic -Werror)
link=(-L"$libdir" -Wl,-rpath,"$libdir" -lredislock -lpthread -lm)
sources=(ffi-tests/c/*.c)
# valgrind.h lets forked test children turn off valgrind's exit-time leak check (harness.c).
if [[ $valgrind -eq 1 ]] && echo '#include <valgrind/valgrind.h>' | "$CC" -E - >/dev/null 2>&1; then
    sources+=(-DHAVE_VALGRIND_H)
fi

step "compile: header as C99 and C++, the example, the tests (plain and ASan+UBSan)"
printf '#include "redislock.h"\nint main(void) { return (int)redislock_result_message(REDISLOCK_OK, 0, 0) * 0; }\n' \
    > "$build/header_check.c"
cp "$build/header_check.c" "$build/header_check.cpp"
"$CC" -std=c99 "${warn[@]}" -Iinclude -c "$build/header_check.c" -o "$build/header_check_c.o"
"$CXX" -std=c++11 "${warn[@]}" -Iinclude -c "$build/header_check.cpp" -o "$build/header_check_cpp.o"
"$CC" -std=c99 "${warn[@]}" -O2 -Iinclude examples/c/oversell.c "${link[@]}" -o "$build/oversell"
"$CC" -std=c99 "${warn[@]}" -O2 -Iinclude examples/c/rwlock.c "${link[@]}" -o "$build/rwlock"
"$CC" -std=c99 "${warn[@]}" -O1 -g -Iinclude -Iffi-tests/c "${sources[@]}" "${link[@]}" \
    -o "$build/c-tests"
if [[ $asan -eq 1 ]]; then
    "$CC" -std=c99 "${warn[@]}" -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
        -fno-sanitize-recover=all -Iinclude -Iffi-tests/c "${sources[@]}" "${link[@]}" \
        -o "$build/c-tests-asan"
fi

# --- the server --------------------------------------------------------------------------------
# The test kit's program (scripts/lib/testkit.sh) starts it and removes it at the end.
trap testkit_stop EXIT
if [[ -z "${REDISLOCK_TEST_URL:-}" ]]; then
    step "start redis-server (redislock-testkit single)"
    if ! testkit_start single; then
        echo "c-tests: could not start redis-server" >&2
        exit 1
    fi
    export REDISLOCK_TEST_URL="$TESTKIT_URL"
    testkit_cmd pid node 0
    echo "redis-server (pid ${TESTKIT_REPLY#PID }) at $REDISLOCK_TEST_URL"
fi

# --- run ---------------------------------------------------------------------------------------
failed=()
run() {
    local mode="$1" binary="$2"
    step "run $mode"
    if ! testkit_detached ffi-tests/c/run.sh "$mode" "$binary" "$libdir" "${filters[@]+"${filters[@]}"}"; then
        failed+=("$mode")
    fi
}
run plain "$build/c-tests"
[[ $asan -eq 0 ]] || run asan "$build/c-tests-asan"
[[ $valgrind -eq 0 ]] || run valgrind "$build/c-tests"

echo
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "c-tests: FAILED: ${failed[*]}"
    exit 1
fi
echo "c-tests: all runs passed ($([[ $asan -eq 1 ]] && echo "plain, ASan+UBSan" || echo plain)$([[ $valgrind -eq 1 ]] && echo ", valgrind"))"
