#!/usr/bin/env bash
# Runs one built C test binary in one mode. Normally called by scripts/ci/c-tests.sh, which builds
# the library and the binaries and provides the server.
#
# Usage: ffi-tests/c/run.sh plain|asan|valgrind BINARY LIBDIR [TEST-NAME-FILTER...]
#   BINARY   the test program (built plain for plain and valgrind, instrumented for asan)
#   LIBDIR   the directory holding libredislock.so
# Needs REDISLOCK_TEST_URL (redis://127.0.0.1:PORT/ of a test server) in the environment; the
# fenced SQL program (sql/fenced_sql.c, built apart by tests/ffi_c.rs) also needs
# REDISLOCK_TEST_PG_URL (postgres://user@127.0.0.1:PORT/db of a test PostgreSQL).
set -euo pipefail

mode="${1:?usage: $0 plain|asan|valgrind BINARY LIBDIR [FILTER...]}"
binary="${2:?missing BINARY}"
libdir="${3:?missing LIBDIR}"
shift 3

: "${REDISLOCK_TEST_URL:?REDISLOCK_TEST_URL must name the test server}"
export REDISLOCK_TEST_URL
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

case "$mode" in
    plain)
        exec "$binary" "$@"
        ;;
    asan)
        # The test program is instrumented; the Rust library is not, but ASan intercepts its
        # malloc/free and LeakSanitizer scans its memory at exit. UBSan stops at the first error.
        export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:exitcode=1:detect_stack_use_after_return=1:strict_string_checks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
        export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
        # GCC 12's libasan takes no lock around fork() for its allocator: a child forked while
        # another thread of the parent (a renewal or pool thread) was inside ASan's malloc
        # inherits that size class's mutex locked and hangs on its next allocation of that size
        # (seen with gdb: every thread of the child waits in
        # SizeClassAllocator64::GetFromAllocator). glibc's malloc has fork handlers, so the
        # test that forks a process with live library threads runs in the plain and valgrind
        # runs only. lock_inherited_across_fork (the child makes no allocation-heavy calls) stays.
        export REDISLOCK_TEST_SKIP="forked_processes_oversell${REDISLOCK_TEST_SKIP:+ $REDISLOCK_TEST_SKIP}"
        exec "$binary" "$@"
        ;;
    valgrind)
        # Valgrind runs everything ~20-50x slower: give the program more time.
        export REDISLOCK_TEST_TIMEOUT_S="${REDISLOCK_TEST_TIMEOUT_S:-1200}"
        # Default leak kinds (definite and possible): a thread of the library still running at
        # exit would show as a "possibly lost" stack; none may be left.
        exec valgrind --error-exitcode=1 --leak-check=full "$binary" "$@"
        ;;
    *)
        echo "unknown mode $mode (plain, asan or valgrind)" >&2
        exit 2
        ;;
esac
