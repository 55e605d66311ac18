# Sourced by the scripts that need a throwaway Redis: start_redis_server starts a redis-server
# on a free loopback port below 32768 (never 6379), without persistence, in a directory of its
# own, and sets REDIS_PORT, REDIS_PID and REDIS_DIR; stop_redis_server stops it and removes the
# directory. The caller sets an EXIT trap that calls stop_redis_server.

start_redis_server() {
    local port tries
    REDIS_DIR="$(mktemp -d)"
    for tries in $(seq 1 20); do
        port=$((20000 + RANDOM % 12000))
        [[ $port -ne 6379 ]] || continue
        redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
            --dir "$REDIS_DIR" --logfile "$REDIS_DIR/log" &
        REDIS_PID=$!
        for _ in $(seq 1 100); do
            # Ours, not another server that had the port: its process_id is the one started.
            if redis-cli -p "$port" info server 2>/dev/null | tr -d '\r' \
                | grep -x "process_id:$REDIS_PID" >/dev/null; then
                REDIS_PORT=$port
                return 0
            fi
            kill -0 "$REDIS_PID" 2>/dev/null || break   # the port was taken: try another
            sleep 0.05
        done
        kill "$REDIS_PID" 2>/dev/null || true
        wait "$REDIS_PID" 2>/dev/null || true
    done
    echo "cannot start redis-server on a free port (log: $REDIS_DIR/log)" >&2
    return 1
}

stop_redis_server() {
    if [[ -n "${REDIS_PID:-}" ]]; then
        kill "$REDIS_PID" 2>/dev/null || true
        wait "$REDIS_PID" 2>/dev/null || true
        REDIS_PID=""
    fi
    [[ -z "${REDIS_DIR:-}" ]] || rm -rf "$REDIS_DIR"
}
