# shellcheck shell=bash disable=SC2016 # (PHP code in single quotes)
# Sourced by scripts/fpm/fpm.sh after scripts/fpm/base.sh: starts redis-server, php-fpm and nginx on
# free 127.0.0.1 ports; then checks through info.php that the workers can use the library. Sets
# REDIS_PORT, FPM_PORT, HTTP_PORT, BASE, REDIS_PID, FPM_PID, NGINX_PID, INFO; defines rcli.
# Reads ROOT, WORKERS, what base.sh set and the functions log and die of scripts/fpm/fpm.sh.
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
# The test's metrics recipe (tests/fpm/app/metrics.php): a directory every worker may write.
METRICS_POOL_ENV=
if [ "$MODE" = test ]; then
  mkdir -p "$DIR/metrics"
  chmod 1777 "$DIR/metrics"
  METRICS_POOL_ENV="env[FPM_METRICS_DIR] = $DIR/metrics"
fi
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
$METRICS_POOL_ENV
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
