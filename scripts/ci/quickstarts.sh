#!/usr/bin/env bash
# Runs the snippets the documentation tells a reader to run, as a new user would: each fenced
# block that follows a `<!-- quickstart: NAME -->` line of README.md, bindings/php/README.md,
# docs/cli.md or docs/c-api.md is copied, as it is, into a fresh directory outside the tree and
# run there against a redis-server on a free loopback port. The only change to a block's text:
# its 127.0.0.1:6379 becomes that server's address. A marked block that no runner below uses
# fails the script, so a new snippet cannot go unchecked.
#
#   scripts/ci/quickstarts.sh DIST [GROUP...]    run them (GROUP: rust c php cli; default all)
#   scripts/ci/quickstarts.sh --print NAME [FILE]   print one block (FILE default README.md)
#   scripts/ci/quickstarts.sh --list                every marked block, as FILE NAME
#
# It installs from the release DIST (scripts/release.sh), as the snippets say, so it runs as root
# with the release's Debian packages installed already: scripts/ci/dist-check.sh runs it between
# its install and its purge, and gives it its redis-server (REDIS_PORT); alone, it starts one.
# The snippets refer to a release as `./dist` (C, the command line: beside the user's files) or
# `../redislock/dist` (Rust, Composer: the clone beside the user's project); both are links to
# DIST here. `sudo` runs the command itself when the script is root and there is no sudo.
#
# - rust: `cargo new myapp`, README's rust-toml as its [dependencies], rust-dist run in it
#   (unpacks the .crate, adds the [patch.crates-io]), rust as src/main.rs, `cargo run`, offline
#   (the dependencies come from ~/.cargo/registry), built in target/quickstart (kept).
# - c: README's c as app.c and c-build run beside it (the installed packages, pkg-config, no
#   LD_LIBRARY_PATH; the program must load the installed SONAME); docs/c-api.md's build from the
#   clone (its `cargo` runs in this tree), and its fragments `request` and `kinds` compiled
#   inside a main() that declares `client` (connected) and `lock`.
# - php: README's php-composer and bindings/php/README.md's composer as composer.json of fresh
#   projects, `composer install` offline, README's php and the package's quick-start and kinds
#   run there; then scripts/ci/composer-check.php in the package README's project (Symfony Lock
#   and Laravel through the package, the library the Debian package's).
# - cli: README's cli, and docs/cli.md's install (its `cargo install` runs in this tree and
#   installs into the fresh directory), first-run (terminal 1 in the background), cron and
#   script blocks, with stand-ins for ./report.sh, ./migrate-step-1 and ./migrate-step-2.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"
# shellcheck source=lib/redis-server.sh
source scripts/lib/redis-server.sh

docs=(README.md bindings/php/README.md docs/cli.md docs/c-api.md)
block() { # NAME [FILE]: the fenced block after <!-- quickstart: NAME --> in FILE
    awk -v want="<!-- quickstart: $1 -->" '
        $0 == want { found = 1; next }
        found && !inside && /^```/ { inside = 1; next }
        inside && /^```$/ { exit }
        inside { print }
    ' "${2:-README.md}"
}
markers() { # FILE NAME of every marked block
    local f
    for f in "${docs[@]}"; do
        sed -n 's/^<!-- quickstart: \(.*\) -->$/\1/p' "$f" | sed "s|^|$f |"
    done
}
case "${1:-}" in
    --print) block "${2:?--print needs a name}" "${3:-README.md}"; exit 0 ;;
    --list) markers; exit 0 ;;
    "" | -*) sed -n '2,/^set -euo pipefail$/{/^set /d;s/^# \{0,1\}//;p}' "$0" >&2; exit 2 ;;
esac
dist="$(cd "$1" && pwd)"
shift
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)"

tmp="$(mktemp -d)"
own_server=0
cleanup() { [[ $own_server -eq 0 ]] || stop_redis_server; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'echo "quickstarts: failed at line $LINENO" >&2' ERR
if [[ -z "${REDIS_PORT:-}" ]]; then
    start_redis_server
    own_server=1
fi
mkdir "$tmp/redislock" "$tmp/bin"
ln -s "$dist" "$tmp/redislock/dist"
if [[ "$(id -u)" -eq 0 ]] && ! command -v sudo >/dev/null; then
    printf '#!/bin/sh\nexec "$@"\n' > "$tmp/bin/sudo"
    chmod +x "$tmp/bin/sudo"
fi
export PATH="$tmp/bin:$PATH"

used=()
# The block NAME of FILE into OUT, pointed at the test server; fails if the block is missing or
# still names port 6379 after the change.
put() { # NAME FILE OUT
    local text
    text="$(block "$1" "$2")"
    [[ -n "$text" ]] || { echo "quickstarts: $2 has no quick start '$1'" >&2; exit 1; }
    text="${text//127.0.0.1:6379/127.0.0.1:$REDIS_PORT}"
    if grep -q 6379 <<< "$text"; then
        echo "quickstarts: $2 '$1' names port 6379 other than as 127.0.0.1:6379" >&2
        exit 1
    fi
    printf '%s\n' "$text" > "$3"
    used+=("$2 $1")
}
export CARGO_TARGET_DIR="$root/target"
# Nothing is downloaded: the crates come from cargo's cache, which the tree's own build filled.
export CARGO_NET_OFFLINE=true
export COMPOSER_ALLOW_SUPERUSER=1 COMPOSER_DISABLE_NETWORK=1 COMPOSER_NO_INTERACTION=1
export COMPOSER_HOME="$tmp/composer-home" COMPOSER_CACHE_DIR="$tmp/composer-cache"
# The `cargo` of a block that a user runs in the clone: run there.
cargo_in_clone="cargo() { (cd '$root' && command cargo \"\$@\"); }"
multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH)"
if [[ "$version" =~ ^0\.([0-9]+)\. ]]; then soname="libredislock.so.0.${BASH_REMATCH[1]}"; else soname="libredislock.so.${version%%.*}"; fi

run_rust() {
    (cd "$tmp" && command cargo new --quiet --vcs none myapp)
    sed -i '/^\[dependencies\]$/d' "$tmp/myapp/Cargo.toml"
    put rust-toml README.md "$tmp/rust-toml"
    cat "$tmp/rust-toml" >> "$tmp/myapp/Cargo.toml"
    put rust-dist README.md "$tmp/rust-dist.sh"
    (cd "$tmp/myapp" && bash -euo pipefail "$tmp/rust-dist.sh")
    put rust README.md "$tmp/myapp/src/main.rs"
    # The crate's own Cargo.lock as the start: the versions it was verified with, offline.
    cp "$tmp/redislock-sync-$version/Cargo.lock" "$tmp/myapp/Cargo.lock"
    (cd "$tmp/myapp" && cargo run --quiet) | tee "$tmp/rust.out"
    grep -qE '^sold 1, fencing token [0-9]+$' "$tmp/rust.out"
    # Built from the packaged crate, not from this tree.
    [[ "$(cd "$tmp/myapp" && cargo pkgid -p redislock-sync)" == "path+file://$tmp/redislock-sync-$version#"* ]]
}

# A C fragment of docs/c-api.md, inside a main() with a connected client and a lock variable.
c_fragment() { # NAME
    put "$1" docs/c-api.md "$tmp/c/$1.inc"
    cat > "$tmp/c/$1.c" <<C
#include <stdbool.h>
#include <stdio.h>
#include "redislock.h"
int main(void) {
    redislock_client *client;
    redislock_lock *lock;
    if (redislock_client_new("redis://127.0.0.1:$REDIS_PORT/", &client) != REDISLOCK_OK) return 2;
#include "$1.inc"
    (void)lock;
    redislock_client_free(client);
    puts("fragment $1: the end");
    return 0;
}
C
    # shellcheck disable=SC2046 # pkg-config's words are the compiler's arguments
    (cd "$tmp/c" && cc -std=c99 -Wall -Wextra -Wno-unused-variable "$1.c" $(pkg-config --cflags --libs redislock) -o "$1" \
        && ./"$1") | tee "$tmp/$1.out"
    grep -qx "fragment $1: the end" "$tmp/$1.out"
}

run_c() {
    mkdir "$tmp/c"
    ln -s "$dist" "$tmp/c/dist"
    put c README.md "$tmp/c/app.c"
    put c-build README.md "$tmp/c/build.sh"
    (cd "$tmp/c" && env -u LD_LIBRARY_PATH bash -euo pipefail build.sh)
    linked="$(ldd "$tmp/c/app")"
    # (/lib is /usr/lib on Debian 12: the loader's cache may name either.)
    grep -Eq "${soname//./\\.} => (/usr)?/lib/$multiarch/${soname//./\\.} " <<< "$linked" \
        || { echo "quickstarts: the C program does not load the installed library: $linked" >&2; exit 1; }
    redis-cli -p "$REDIS_PORT" exists stock:42 | grep -qx 0   # released
    c_fragment request
    c_fragment kinds
    # docs/c-api.md: the build from the clone, with the README's program.
    mkdir "$tmp/c-clone"
    ln -s "$root/include" "$tmp/c-clone/include"
    ln -s "$root/target" "$tmp/c-clone/target"
    cp "$tmp/c/app.c" "$tmp/c-clone/app.c"
    put build docs/c-api.md "$tmp/c-clone/build.sh"
    (cd "$tmp/c-clone" && CARGO_TARGET_DIR="$root/target" \
        bash -euo pipefail -c "$cargo_in_clone; $(cat build.sh)")
}

composer_project() { # DIR NAME FILE: a fresh project whose composer.json is that block
    mkdir "$1"
    put "$2" "$3" "$1/composer.json"
    (cd "$1" && composer install --no-progress --quiet)
    [[ -f "$1/vendor/redislock/redislock/src/Library.php" ]] \
        || { echo "quickstarts: $3's Composer snippet did not install the package" >&2; exit 1; }
}

run_php() {
    composer_project "$tmp/php-readme" php-composer README.md
    put php README.md "$tmp/php-readme/app.php"
    (cd "$tmp/php-readme" && env -u REDISLOCK_LIB -u REDISLOCK_HEADER php app.php) | tee "$tmp/php.out"
    grep -qx "redislock $version: sold 1" "$tmp/php.out"

    composer_project "$tmp/php-package" composer bindings/php/README.md
    put quick-start bindings/php/README.md "$tmp/php-package/quick-start.php"
    put kinds bindings/php/README.md "$tmp/php-package/kinds.php"
    for script in quick-start kinds; do
        (cd "$tmp/php-package" && env -u REDISLOCK_LIB -u REDISLOCK_HEADER php "$script.php")
    done
    [[ "$(redis-cli -p "$REDIS_PORT" get stock:42:count)" == 9 ]]
    redis-cli -p "$REDIS_PORT" del stock:42:count invoice:7 > /dev/null
    # Symfony Lock and Laravel through the installed package, the library the Debian package's.
    cp scripts/ci/composer-check.php "$tmp/php-package/check.php"
    (cd "$tmp/php-package" && env -u REDISLOCK_LIB -u REDISLOCK_HEADER -u LD_LIBRARY_PATH \
        REDIS_URL="redis://127.0.0.1:$REDIS_PORT/" SONAME="$soname" php check.php)
}

run_cli() {
    mkdir -p "$tmp/cli"
    ln -s "$dist" "$tmp/cli/dist"
    put cli README.md "$tmp/cli/readme.sh"
    (cd "$tmp/cli" && bash -euo pipefail readme.sh) | tee "$tmp/cli.out"
    grep -qx 'no other host runs this now' "$tmp/cli.out"
    [[ "$(command -v redislock)" == /usr/bin/redislock ]]

    # docs/cli.md: install (the .deb again, and cargo install from the clone into the fresh
    # directory), then the rest with the installed tool.
    put install docs/cli.md "$tmp/cli/install.sh"
    (cd "$tmp/cli" && CARGO_INSTALL_ROOT="$tmp/cli/root" \
        bash -euo pipefail -c "$cargo_in_clone; $(cat install.sh)")
    [[ "$("$tmp/cli/root/bin/redislock" --version)" == "redislock $version" ]]
    put man docs/cli.md "$tmp/cli/man.sh"
    (cd "$tmp/cli" && bash -euo pipefail man.sh)
    [[ -s "$tmp/cli/redislock.1" && -s /etc/bash_completion.d/redislock ]]
    rm -f /etc/bash_completion.d/redislock
    # A first run: the first line in one terminal, the other lines in a second one.
    put first-run docs/cli.md "$tmp/cli/first-run.sh"
    (
        cd "$tmp/cli"
        eval "$(sed -n 1p first-run.sh)"          # export REDIS_URL=...
        bash -c "$(sed -n 2p first-run.sh)" > terminal1.out &
        t1=$!
        for _ in $(seq 1 100); do
            grep -q 'got it' terminal1.out && break
            sleep 0.05
        done
        # (`redislock status` exits 1 when the lock is free, as it is by then.)
        rc=0
        bash -uo pipefail -c "$(sed -n '3,$p' first-run.sh)" > terminal2.out || rc=$?
        [[ $rc -le 1 ]] || { echo "quickstarts: docs/cli.md first-run: exit $rc" >&2; exit 1; }
        wait "$t1"
        grep -qx 'got it' terminal1.out
        grep -qx 'my turn' terminal2.out
    )
    # The cron line, and the script that cannot wrap a command, with stand-ins for its steps.
    for f in report.sh migrate-step-1 migrate-step-2; do
        printf '#!/bin/sh\necho "%s ran"\n' "$f" > "$tmp/cli/$f"
        chmod +x "$tmp/cli/$f"
    done
    put cron docs/cli.md "$tmp/cli/cron.sh"
    put script docs/cli.md "$tmp/cli/script.sh"
    (cd "$tmp/cli" && REDIS_URL="redis://127.0.0.1:$REDIS_PORT/" bash -euo pipefail cron.sh) | tee "$tmp/cron.out"
    grep -qx 'report.sh ran' "$tmp/cron.out"
    (cd "$tmp/cli" && REDIS_URL="redis://127.0.0.1:$REDIS_PORT/" bash -euo pipefail script.sh) | tee "$tmp/script.out"
    grep -qx 'migrate-step-2 ran' "$tmp/script.out"
    redis-cli -p "$REDIS_PORT" exists migrate | grep -qx 0   # released
}

groups=("$@")
[[ ${#groups[@]} -gt 0 ]] || groups=(rust c php cli)
for group in "${groups[@]}"; do
    case "$group" in
        rust | c | php | cli) ;;
        *) echo "quickstarts: no group '$group' (rust, c, php, cli)" >&2; exit 2 ;;
    esac
    echo "quickstarts: $group"
    start=$SECONDS
    "run_$group"
    echo "quickstarts: $group ok ($((SECONDS - start)) s)"
done
if [[ $# -eq 0 ]]; then
    unused="$(markers | LC_ALL=C sort | comm -23 - <(printf '%s\n' "${used[@]}" | LC_ALL=C sort -u))"
    if [[ -n "$unused" ]]; then
        echo "quickstarts: marked blocks that nothing runs (add them to a runner):" >&2
        sed 's/^/    /' <<< "$unused" >&2
        exit 1
    fi
fi
