#!/usr/bin/env bash
# Runs the README's quick starts as a new user would: each fenced block that follows a
# `<!-- quickstart: NAME -->` line of README.md is copied, as it is, into a fresh directory
# outside the tree and run there against a redis-server started here on a free loopback port
# (the only change to the text: its 127.0.0.1:6379 becomes that server's address).
#
#   scripts/ci/quickstarts.sh [rust] [c] [php] [cli]     the ones named, default all four
#   scripts/ci/quickstarts.sh --print NAME               print one block (rust-toml, rust, c,
#                                                     c-build, php, cli)
#
# - rust: `cargo new myapp` beside a `redislock` link to this tree, the block rust-toml as its
#   [dependencies], the block rust as src/main.rs, `cargo run`.
# - c: the block c as app.c, the block c-build run in a directory whose include/ and target/
#   are this tree's (its `cargo build` runs in this tree, the clone the README speaks of).
# - php: the block php as app.php beside a `bindings` link to this tree's, run with php and
#   REDISLOCK_LIB set to target/release/libredislock.so, as the block's comment says.
# - cli: the block cli, its `cargo install` run in this tree and installing into the fresh
#   directory (CARGO_INSTALL_ROOT).
# Cargo works offline (CARGO_NET_OFFLINE), from the crates the tree's build downloaded. The
# builds go to target/quickstart (kept, so that a second run is quick). A quick start that
# fails, or does not run to its end, fails the script.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"
# shellcheck source=lib/redis-server.sh
source scripts/lib/redis-server.sh

block() { # NAME: the fenced block after <!-- quickstart: NAME --> in README.md
    awk -v want="<!-- quickstart: $1 -->" '
        $0 == want { found = 1; next }
        found && !inside && /^```/ { inside = 1; next }
        inside && /^```$/ { exit }
        inside { print }
    ' README.md
}
if [[ "${1:-}" == --print ]]; then
    block "${2:?--print needs a name}"
    exit 0
fi

tmp="$(mktemp -d)"
cleanup() { stop_redis_server; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'echo "quickstarts: failed at line $LINENO" >&2' ERR
start_redis_server

# The block NAME into FILE, pointed at the test server; fails if the block is missing or still
# names port 6379 after the change.
put() { # NAME FILE
    local text
    text="$(block "$1")"
    [[ -n "$text" ]] || { echo "quickstarts: README.md has no quick start '$1'" >&2; exit 1; }
    text="${text//127.0.0.1:6379/127.0.0.1:$REDIS_PORT}"
    if grep -q 6379 <<< "$text"; then
        echo "quickstarts: '$1' names port 6379 other than as 127.0.0.1:6379" >&2
        exit 1
    fi
    printf '%s\n' "$text" > "$2"
}
export CARGO_TARGET_DIR="$root/target/quickstart"
# Nothing is downloaded: the crates come from cargo's cache, which the tree's own build filled.
export CARGO_NET_OFFLINE=true
# The `cargo` of the C and CLI blocks, which a user runs in the clone: run there.
cargo_in_clone="cargo() { (cd '$root' && command cargo \"\$@\"); }"

run_rust() {
    ln -s "$root" "$tmp/redislock"
    (cd "$tmp" && cargo new --quiet --vcs none myapp)
    sed -i '/^\[dependencies\]$/d' "$tmp/myapp/Cargo.toml"
    put rust-toml "$tmp/rust-toml"
    cat "$tmp/rust-toml" >> "$tmp/myapp/Cargo.toml"
    put rust "$tmp/myapp/src/main.rs"
    (cd "$tmp/myapp" && cargo run --quiet) | tee "$tmp/rust.out"
    grep -qE '^sold 1, fencing token [0-9]+$' "$tmp/rust.out"
}

run_c() {
    mkdir "$tmp/c"
    ln -s "$root/include" "$tmp/c/include"
    ln -s "$root/target" "$tmp/c/target"
    put c "$tmp/c/app.c"
    put c-build "$tmp/c/build.sh"
    # The block's `cargo build` runs in the clone, whose include/ and target/ are linked here.
    (cd "$tmp/c" && CARGO_TARGET_DIR="$root/target" bash -euo pipefail -c "$cargo_in_clone; $(cat build.sh)")
}

run_php() {
    mkdir "$tmp/php"
    ln -s "$root/bindings" "$tmp/php/bindings"
    put php "$tmp/php/app.php"
    printf '\necho "quickstart: the end\\n";\n' >> "$tmp/php/app.php"
    (cd "$tmp/php" && REDISLOCK_LIB="$root/target/release/libredislock.so" php app.php) \
        | tee "$tmp/php.out"
    grep -qx 'quickstart: the end' "$tmp/php.out"
}

run_cli() {
    mkdir "$tmp/cli"
    put cli "$tmp/cli/run.sh"
    # `cargo install` runs in the clone, and installs into the fresh directory.
    (cd "$tmp/cli" && CARGO_INSTALL_ROOT="$tmp/cli/root" PATH="$tmp/cli/root/bin:$PATH" \
        bash -euo pipefail -c "$cargo_in_clone; $(cat run.sh)") | tee "$tmp/cli.out"
    grep -qx 'no other host runs this now' "$tmp/cli.out"
    [[ -x "$tmp/cli/root/bin/redislock" ]]
}

names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=(rust c php cli)
for name in "${names[@]}"; do
    case "$name" in
        rust | c | php | cli) ;;
        *) echo "quickstarts: no quick start '$name' (rust, c, php, cli)" >&2; exit 2 ;;
    esac
    echo "quickstarts: $name"
    start=$SECONDS
    "run_$name"
    echo "quickstarts: $name ok ($((SECONDS - start)) s)"
done
