# shellcheck shell=bash disable=SC2016 # (PHP code in single quotes)
# Sourced by scripts/fpm/fpm.sh first, in every mode: checks the tools (those of the whole stack unless
# FPM_STACK=0), gets the library, makes the temporary directory (removed, and every process
# started here killed, when the script exits) with the tree the workers read, and defines the
# helpers start, free_port and wait_for. Sets FPM_BIN, DIR, TREE, APP, REDISLOCK_LIB, BUILT_LIB,
# ROOT_USER and PIDS. Reads ROOT, PACKAGE (the bindings/php directory to serve), OUT,
# FPM_STACK and the functions log and die of scripts/fpm/fpm.sh.
FPM_BIN=$(command -v php-fpm8.2 || command -v php-fpm || true)
missing=()
[ -n "$FPM_BIN" ] || missing+=("php-fpm (php8.2-fpm)")
tools=(php setpriv)
[ "${FPM_STACK:-1}" = 1 ] && tools+=(nginx wrk curl redis-server redis-cli)
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if command -v php >/dev/null; then
  if [ "${FPM_STACK:-1}" = 1 ]; then
    php -r 'exit(extension_loaded("ffi") && extension_loaded("redis") ? 0 : 1);' \
      || missing+=("php extensions ffi and redis (php-redis)")
    [ -f /usr/share/php/Symfony/Component/Lock/autoload.php ] || missing+=("Symfony Lock (php-symfony-lock)")
    for component in Cache Config Container; do
      [ -f "/usr/share/php/Illuminate/$component/autoload.php" ] \
        || missing+=("Laravel 8's $component (php-illuminate-${component,,})")
    done
  else
    php -r 'exit(extension_loaded("ffi") ? 0 : 1);' || missing+=("php extension ffi")
  fi
fi
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
cp -r "$PACKAGE/autoload.php" "$PACKAGE/preload.php" "$PACKAGE/src" "$TREE/bindings/php/"
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
