# Sourced by the runners (scripts/ci/c-tests.sh, scripts/ci/php-tests.sh, scripts/bench/soak.sh): builds the
# test kit's command-line program and drives it. testkit/src/bin/redislock-testkit.rs describes
# its protocol: it prints the URL and the ports, `READY`, then answers one line per command.
#
#   testkit_build               sets TESTKIT to the program: $REDISLOCK_TESTKIT if set, otherwise
#                               built with `cargo build -p redislock-testkit --bin redislock-testkit`
#   testkit_start single [ARG...] | sentinel | cluster
#                               starts it and reads its banner: sets TESTKIT_URL, TESTKIT_NODES
#                               and TESTKIT_SENTINELS (ports, by index) and TESTKIT_PID
#   testkit_cmd kill node 0     sends one command; fails unless the answer is OK or a value
#                               (`PID 1234`, ...); the answer is in TESTKIT_REPLY
#   testkit_stop                `quit`: it stops and removes everything, answers and exits;
#                               then its pipes are closed and it is reaped (no-op if not started)
#
# Commands run while the kit is up inherit its pipes; run them with `testkit_detached CMD...`,
# or, in the background, with `CMD {TESTKIT_IN}>&- {TESTKIT_OUT}<&- &`, so that only this shell
# (and its subshells) hold them.

TESTKIT="${TESTKIT:-}"
TESTKIT_PID=""
TESTKIT_URL=""
TESTKIT_NODES=()
TESTKIT_SENTINELS=()
TESTKIT_REPLY=""
TESTKIT_FIFOS=""
TESTKIT_IN=""
TESTKIT_OUT=""

testkit_build() {
    if [[ -n "${REDISLOCK_TESTKIT:-}" ]]; then
        TESTKIT="$REDISLOCK_TESTKIT"
    else
        local json
        json="$(cargo build --quiet -p redislock-testkit --bin redislock-testkit \
            --message-format=json-render-diagnostics)" || return 1
        TESTKIT="$(printf '%s\n' "$json" | grep -o '"executable":"[^"]*"' | tail -n 1 \
            | sed 's/^"executable":"//; s/"$//')"
    fi
    if [[ ! -x "$TESTKIT" ]]; then
        echo "testkit: no redislock-testkit program at '$TESTKIT'" >&2
        return 1
    fi
}

testkit_start() {
    [[ -n "$TESTKIT" ]] || testkit_build || return 1
    TESTKIT_FIFOS="$(mktemp -d -t redislock-testkit.XXXXXX)"
    mkfifo "$TESTKIT_FIFOS/in" "$TESTKIT_FIFOS/out"
    # Opening a FIFO waits for the other end: the program opens its input, then its output, in
    # the same order as this shell below.
    "$TESTKIT" "$@" <"$TESTKIT_FIFOS/in" >"$TESTKIT_FIFOS/out" &
    TESTKIT_PID=$!
    exec {TESTKIT_IN}>"$TESTKIT_FIFOS/in" {TESTKIT_OUT}<"$TESTKIT_FIFOS/out"
    local line words
    while :; do
        # A Sentinel group or a Cluster takes several seconds to form.
        if ! read -r -t 120 -u "$TESTKIT_OUT" line; then
            echo "testkit: redislock-testkit $* did not start (its errors are above)" >&2
            testkit_stop
            return 1
        fi
        read -r -a words <<<"$line"
        case "${words[0]:-}" in
            URL) TESTKIT_URL="${words[1]}" ;;
            NODE) TESTKIT_NODES[${words[1]}]="${words[2]}" ;;
            SENTINEL) TESTKIT_SENTINELS[${words[1]}]="${words[2]}" ;;
            READY) return 0 ;;
            *)
                echo "testkit: unexpected line from redislock-testkit: $line" >&2
                testkit_stop
                return 1
                ;;
        esac
    done
}

testkit_cmd() {
    TESTKIT_REPLY=""
    if [[ -z "$TESTKIT_IN" ]]; then
        echo "testkit: not started" >&2
        return 1
    fi
    if ! testkit_send "$*"; then
        echo "testkit: redislock-testkit is gone; cannot send '$*'" >&2
        return 1
    fi
    if ! read -r -t 60 -u "$TESTKIT_OUT" TESTKIT_REPLY; then
        echo "testkit: no answer to '$*'" >&2
        return 1
    fi
    if [[ "$TESTKIT_REPLY" == ERR* ]]; then
        echo "testkit: $* -> $TESTKIT_REPLY" >&2
        return 1
    fi
}

# Runs CMD without the kit's pipes (for programs started in the background while it is up).
testkit_detached() {
    if [[ -n "$TESTKIT_IN" ]]; then
        "$@" {TESTKIT_IN}>&- {TESTKIT_OUT}<&-
    else
        "$@"
    fi
}

testkit_stop() {
    local reply=""
    if [[ -n "$TESTKIT_IN" ]]; then
        # `quit` answers once everything is stopped and removed. Closing its input would do the
        # same, but only once every process that inherited the pipe has closed it too.
        if ! { testkit_send quit && read -r -t 30 -u "$TESTKIT_OUT" reply && [[ "$reply" == OK ]]; }; then
            [[ -z "$TESTKIT_PID" ]] || kill -9 "$TESTKIT_PID" 2>/dev/null || true
        fi
        exec {TESTKIT_IN}>&- {TESTKIT_OUT}<&-
        TESTKIT_IN=""
        TESTKIT_OUT=""
    fi
    if [[ -n "$TESTKIT_PID" ]]; then
        wait "$TESTKIT_PID" 2>/dev/null || true
        TESTKIT_PID=""
    fi
    if [[ -n "$TESTKIT_FIFOS" ]]; then
        rm -rf "$TESTKIT_FIFOS"
        TESTKIT_FIFOS=""
    fi
}

# Writes one line to the kit; fails (instead of dying of SIGPIPE) if it has exited.
testkit_send() {
    (
        trap '' PIPE
        printf '%s\n' "$1" >&"$TESTKIT_IN"
    ) 2>/dev/null
}
