# shellcheck shell=bash disable=SC2016 # (PHP code in single quotes)
# Sourced by scripts/fpm.sh: checks what the stack needs, gets the library, makes the temporary
# directory (removed, and every process started here killed, when the script exits) and starts
# redis-server, php-fpm and nginx on free 127.0.0.1 ports; then checks through info.php that the
# workers can use the library. Sets DIR, TREE, APP, REDISLOCK_LIB, REDIS_PORT, FPM_PORT,
# HTTP_PORT, BASE, REDIS_PID, FPM_PID, NGINX_PID, INFO; defines start, rcli and wait_for.
# Reads ROOT, WORKERS, OUT and the functions log and die of scripts/fpm.sh.
# ---- what the stack needs
FPM_BIN=$(command -v php-fpm8.2 || command -v php-fpm || true)
missing=()
[ -n "$FPM_BIN" ] || missing+=("php-fpm (php8.2-fpm)")
for tool in nginx wrk curl php redis-server redis-cli setpriv; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if command -v php >/dev/null; then
  php -r 'exit(extension_loaded("ffi") && extension_loaded("redis") ? 0 : 1);' \
    || missing+=("php extensions ffi and redis (php-redis)")
fi
[ -f /usr/share/php/Symfony/Component/Lock/autoload.php ] || missing+=("Symfony Lock (php-symfony-lock)")
if [ ${#missing[@]} -gt 0 ]; then
  die "missing: ${missing[*]}; run scripts/setup.sh to install them"
fi

if [ -z "${REDISLOCK_LIB:-}" ]; then
  log "building the library (cargo build --release --lib)"
  (cd "$ROOT" && cargo build --release --lib --quiet)
  target_dir=$(cd "$ROOT" && cargo metadata --format-version 1 --no-deps \
    | php -r 'echo json_decode(stream_get_contents(STDIN), false, 512, JSON_THROW_ON_ERROR)->target_directory;')
  REDISLOCK_LIB="$target_dir/release/libredislock.so"
fi
[ -f "$REDISLOCK_LIB" ] || die "REDISLOCK_LIB=$REDISLOCK_LIB does not exist"
BUILT_LIB=$(realpath "$REDISLOCK_LIB")

ROOT_USER=0
[ "$(id -u)" -eq 0 ] && ROOT_USER=1

# ---- the temporary directory and the clean-up
DIR=$(mktemp -d /tmp/redislock-fpm.XXXXXX)
chmod 755 "$DIR"
# A copy of the library: a build that replaces the original meanwhile cannot change this run.
REDISLOCK_LIB="$DIR/libredislock.so"
cp "$BUILT_LIB" "$REDISLOCK_LIB"
chmod 755 "$REDISLOCK_LIB"
# What the workers read, copied into a tree of the same shape readable by every user: as root
# they (and the preloading) run as nobody, who may not be able to read the checkout.
TREE="$DIR/tree"
mkdir -p "$TREE/tests/fpm" "$TREE/bindings/php" "$TREE/include"
cp -r "$ROOT/tests/fpm/app" "$TREE/tests/fpm/"
cp -r "$ROOT/bindings/php/autoload.php" "$ROOT/bindings/php/preload.php" "$ROOT/bindings/php/src" \
  "$TREE/bindings/php/"
cp "$ROOT/include/redislock_php.h" "$TREE/include/"
chmod -R a+rX "$TREE"
APP="$TREE/tests/fpm/app"
PIDS=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  local i
  for (( i=${#PIDS[@]}-1; i>=0; i-- )); do
    kill "${PIDS[$i]}" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [ -n "$OUT" ]; then
    mkdir -p "$OUT"
    cp -r "$DIR"/. "$OUT"/ 2>/dev/null || true
    log "configs, logs and results kept in $OUT"
  fi
  rm -rf "$DIR"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Starts "$@" in the background, killed with SIGKILL if this script dies; its pid goes to PIDS.
start() {
  local logfile=$1
  shift
  setpriv --pdeathsig KILL -- "$@" >"$logfile" 2>&1 < /dev/null &
  PIDS+=($!)
  LAST_PID=$!
}

free_port() {
  php -r '$s = stream_socket_server("tcp://127.0.0.1:0", $e, $m) or exit(1);
          $n = stream_socket_get_name($s, false); echo substr($n, strrpos($n, ":") + 1);'
}

wait_for() { # wait_for SECONDS DESCRIPTION PID COMMAND...
  local secs=$1 what=$2 pid=$3
  shift 3
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || die "$what exited at start"
    [ $SECONDS -lt $deadline ] || die "$what did not answer within $secs s"
    sleep 0.1
  done
}

REDIS_PORT=$(free_port)
FPM_PORT=$(free_port)
HTTP_PORT=$(free_port)
while [ "$FPM_PORT" = "$REDIS_PORT" ]; do FPM_PORT=$(free_port); done
while [ "$HTTP_PORT" = "$REDIS_PORT" ] || [ "$HTTP_PORT" = "$FPM_PORT" ]; do HTTP_PORT=$(free_port); done
BASE="http://127.0.0.1:$HTTP_PORT"

# ---- redis-server
mkdir "$DIR/redis"
start "$DIR/redis.log" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$DIR/redis"
REDIS_PID=$LAST_PID
rcli() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }
wait_for 10 redis-server "$REDIS_PID" rcli ping

# ---- php-fpm
FPM_INI=(-d opcache.enable=1 -d ffi.enable=preload -d "opcache.preload=$TREE/bindings/php/preload.php")
FPM_ENV=()
POOL_USER=
if [ "$ROOT_USER" = 1 ]; then
  sed "s|^#define FFI_LIB .*|#define FFI_LIB \"$REDISLOCK_LIB\"|" "$TREE/include/redislock_php.h" \
    > "$DIR/redislock_php.h"
  chmod 644 "$DIR/redislock_php.h"
  FPM_INI+=(-d "ffi.preload=$DIR/redislock_php.h" -d opcache.preload_user=nobody)
  POOL_USER=$'user = nobody\ngroup = nogroup'
else
  FPM_ENV=(env "REDISLOCK_LIB=$REDISLOCK_LIB")
fi
touch "$DIR/php-errors.log"
[ "$ROOT_USER" = 1 ] && chown nobody:nogroup "$DIR/php-errors.log"
cat > "$DIR/php-fpm.conf" <<EOF
[global]
pid = $DIR/php-fpm.pid
error_log = $DIR/php-fpm.log
daemonize = no

[app]
$POOL_USER
listen = 127.0.0.1:$FPM_PORT
listen.backlog = 511
pm = static
pm.max_children = $WORKERS
; workers live for the whole run, as in production: threads and connections must stay bounded
pm.max_requests = 0
pm.status_path = /fpm-status
request_terminate_timeout = 60s
clear_env = yes
env[FPM_REDIS_PORT] = $REDIS_PORT
php_admin_value[error_log] = $DIR/php-errors.log
php_admin_flag[log_errors] = on
php_admin_flag[display_errors] = off
; php_value, not php_admin_value: die.php lowers it with set_time_limit()
php_value[max_execution_time] = 30
EOF
start "$DIR/php-fpm.out" "${FPM_ENV[@]}" "$FPM_BIN" --nodaemonize --force-stderr --fpm-config "$DIR/php-fpm.conf" \
  "${FPM_INI[@]}"
FPM_PID=$LAST_PID
fpm_listens() { php -r 'exit(@fsockopen("127.0.0.1", (int) $argv[1]) ? 0 : 1);' "$FPM_PORT"; }
if ! (wait_for 20 php-fpm "$FPM_PID" fpm_listens); then
  die "php-fpm did not start: $(cat "$DIR/php-fpm.out" "$DIR/php-fpm.log" 2>/dev/null | tail -20)"
fi

# ---- nginx
mkdir -p "$DIR/nginx"
NGINX_USER=
if [ "$ROOT_USER" = 1 ]; then
  NGINX_USER="user nobody nogroup;"
  chown nobody:nogroup "$DIR/nginx"
fi
cat > "$DIR/nginx.conf" <<EOF
$NGINX_USER
worker_processes 1;
pid $DIR/nginx.pid;
error_log $DIR/nginx-error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $DIR/nginx/body;
    fastcgi_temp_path $DIR/nginx/fastcgi;
    proxy_temp_path $DIR/nginx/proxy;
    uwsgi_temp_path $DIR/nginx/uwsgi;
    scgi_temp_path $DIR/nginx/scgi;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$HTTP_PORT;
        root $APP;
        location = /fpm-status {
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_NAME /fpm-status;
            fastcgi_param SCRIPT_FILENAME /fpm-status;
            fastcgi_pass 127.0.0.1:$FPM_PORT;
        }
        location ~ \.php\$ {
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
            fastcgi_pass 127.0.0.1:$FPM_PORT;
        }
    }
}
EOF
start "$DIR/nginx.out" nginx -p "$DIR" -e "$DIR/nginx-error.log" -c "$DIR/nginx.conf" -g 'daemon off;'
NGINX_PID=$LAST_PID
status_ok() { curl -sf -o /dev/null --max-time 2 "$BASE/fpm-status"; }
wait_for 20 nginx "$NGINX_PID" status_ok
kill -0 "$FPM_PID" 2>/dev/null || die "php-fpm exited at start: $(cat "$DIR/php-fpm.out" "$DIR/php-fpm.log" 2>/dev/null)"

INFO=$(curl -s --max-time 10 "$BASE/info.php" || true)
log "stack up: redis 127.0.0.1:$REDIS_PORT, php-fpm 127.0.0.1:$FPM_PORT ($WORKERS workers), nginx $BASE; library $REDISLOCK_LIB"
log "info.php: $INFO"
echo "info $INFO"
case "$INFO" in
  *'"preloaded":true'*'"library":true'*) ;;
  *) die "the workers cannot use the library: $INFO
$(cat "$DIR/php-fpm.log" "$DIR/php-errors.log" 2>/dev/null | tail -20)" ;;
esac
