# shellcheck shell=bash
# Sourced by scripts/fpm/fpm.sh (mode preload) after scripts/fpm/base.sh: php-fpm started with
# opcache.preload=preload.php and the library not where the dynamic loader finds it, one php-fpm
# per case, as a plain user (nobody when this runs as root) with the minimal environment of a
# service. Prints per case
#   preload case=NAME started=0|1 status=N
# (started: it listened on its port; status: its exit status, or "running" for one that started
# and was stopped here), then its log, each line prefixed "preload-log case=NAME ". php-fpm's
# default log_limit (1024 bytes) applies: a message cut there is what a user would see.

# Whether a libredislock.so is installed where the dynamic loader finds it: then preload.php
# loads that one and the pool-env case cannot fail.
preload_installed() {
  ldconfig -p 2>/dev/null | grep -q 'libredislock\.so ' && return 0
  local d
  for d in /lib /usr/lib /lib64 /usr/lib64 /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu; do
    [ -e "$d/libredislock.so" ] && return 0
  done
  return 1
}

# preload_case NAME AS(user|root) MASTER_ENV... [-- INI...]: MASTER_ENV is what the master's
# environment has beyond PATH (NAME=VALUE words); the pool's env[] always has REDISLOCK_LIB.
preload_case() {
  local name=$1 as=$2 case_dir port status started pid
  shift 2
  local master_env=() ini=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do master_env+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift
  ini=("$@")
  case_dir="$DIR/preload-$name"
  mkdir -p "$case_dir"
  chmod 1777 "$case_dir"
  port=$(free_port)
  local pool_user=
  [ "$as" = root ] && pool_user=$'user = nobody\ngroup = nogroup'
  cat > "$case_dir/php-fpm.conf" <<EOF
[global]
pid = $case_dir/php-fpm.pid
error_log = $case_dir/php-fpm.log
daemonize = no

[app]
$pool_user
listen = 127.0.0.1:$port
pm = static
pm.max_children = 1
clear_env = yes
; where the library is, for the workers only: the preload script never sees it
env[REDISLOCK_LIB] = $REDISLOCK_LIB
EOF
  chmod 644 "$case_dir/php-fpm.conf"
  local as_user=()
  if [ "$as" = user ] && [ "$ROOT_USER" = 1 ]; then
    as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
  fi
  # setpriv --pdeathsig after the change of user, which clears the parent-death signal.
  "${as_user[@]}" setpriv --pdeathsig KILL -- env -i PATH=/usr/bin:/bin:/usr/sbin:/sbin "${master_env[@]}" \
    "$FPM_BIN" --nodaemonize --force-stderr --fpm-config "$case_dir/php-fpm.conf" \
    -d opcache.enable=1 -d ffi.enable=preload -d "opcache.preload=$TREE/bindings/php/preload.php" "${ini[@]}" \
    > "$case_dir/out.log" 2>&1 < /dev/null &
  pid=$!
  PIDS+=("$pid")
  started=0
  local deadline=$((SECONDS + 20))
  while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do
    if php -r 'exit(@fsockopen("127.0.0.1", (int) $argv[1]) ? 0 : 1);' "$port"; then
      started=1
      break
    fi
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    status=running
  else
    status=0
    wait "$pid" || status=$?
  fi
  echo "preload case=$name started=$started status=$status"
  local f
  for f in "$case_dir/out.log" "$case_dir/php-fpm.log"; do
    [ -f "$f" ] && sed "s/^/preload-log case=$name /" "$f"
  done
  return 0
}

log "preload: php-fpm with the library out of the dynamic loader's reach"
if preload_installed; then
  log "a libredislock.so is installed where the dynamic loader finds it: case pool-env skipped"
  echo "preload case=pool-env skipped=installed"
else
  # REDISLOCK_LIB only in the pool's env[]: the preloading master does not see it.
  preload_case pool-env user
fi
# The control: the same with REDISLOCK_LIB in the master's environment starts.
preload_case master-env user "REDISLOCK_LIB=$REDISLOCK_LIB"
preload_case missing-file user "REDISLOCK_LIB=$DIR/no-such-dir/libredislock.so"
if [ "$ROOT_USER" = 1 ]; then
  # A root master needs opcache.preload_user, and PHP then refuses FFI::load() in the preload
  # script: the library must be bound with ffi.preload.
  preload_case preload-user root "REDISLOCK_LIB=$REDISLOCK_LIB" -- -d opcache.preload_user=nobody
fi
