#!/usr/bin/env bash
# Runs the PHP package's PHPUnit suite (bindings/php/tests) against libredislock:
#   scripts/ci/php-tests.sh [phpunit arguments...]     e.g. --filter SymfonyStoreTest
# Builds the library with `cargo build --release` first (a no-op when it is up to date) and
# points REDISLOCK_LIB at the .so, unless REDISLOCK_LIB is already set. The tests start their own
# redis-server processes on free loopback ports (none uses 127.0.0.1:6379) through the test kit's
# program, `redislock-testkit single`: this script builds it (scripts/lib/testkit.sh) and points
# REDISLOCK_TESTKIT at it, unless REDISLOCK_TESTKIT is already set.
# Needs php (with FFI, pcntl, posix, phpredis), Symfony Lock 5.4, phpunit 9 and redis-server:
# scripts/setup.sh installs them on Debian. cargo test runs this script from tests/php.rs.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$HOME/.cargo/bin:$PATH"

missing=()
for tool in php phpunit redis-server; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ -z "${REDISLOCK_LIB:-}" ] || [ -z "${REDISLOCK_TESTKIT:-}" ]; then
  command -v cargo >/dev/null || missing+=(cargo)
fi
if [ ${#missing[@]} -eq 0 ]; then
  for ext in ffi pcntl posix redis; do
    php -r "exit(extension_loaded('$ext') ? 0 : 1);" || missing+=("php extension $ext")
  done
  [ -f /usr/share/php/Symfony/Component/Lock/autoload.php ] || [ -f bindings/php/vendor/autoload.php ] \
    || missing+=("Symfony Lock (php-symfony-lock)")
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "php-tests: missing: ${missing[*]}; run scripts/setup.sh to install them" >&2
  exit 1
fi

if [ -z "${REDISLOCK_LIB:-}" ]; then
  cargo build --release --lib --quiet
  target_dir=$(cargo metadata --format-version 1 --no-deps \
    | php -r 'echo json_decode(stream_get_contents(STDIN), false, 512, JSON_THROW_ON_ERROR)->target_directory;')
  export REDISLOCK_LIB="$target_dir/release/libredislock.so"
fi
if [ ! -f "$REDISLOCK_LIB" ]; then
  echo "php-tests: REDISLOCK_LIB=$REDISLOCK_LIB does not exist" >&2
  exit 1
fi
echo "php-tests: REDISLOCK_LIB=$REDISLOCK_LIB"

# shellcheck source=scripts/lib/testkit.sh
source scripts/lib/testkit.sh
testkit_build
export REDISLOCK_TESTKIT="$TESTKIT"
echo "php-tests: REDISLOCK_TESTKIT=$REDISLOCK_TESTKIT"
exec phpunit -c bindings/php/phpunit.xml "$@"
