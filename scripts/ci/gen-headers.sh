#!/usr/bin/env bash
# Regenerates the committed C headers from src/ffi/ with the cbindgen CLI:
#   include/redislock.h      C and C++ (cbindgen.toml)
#   include/redislock_php.h  PHP FFI   (cbindgen-php.toml)
#
# Usage: scripts/ci/gen-headers.sh            write both headers
#        scripts/ci/gen-headers.sh --check    fail (exit 1, with a diff) if a committed header
#                                          differs from what src/ffi/ generates now (for CI)
#
# cbindgen: $CBINDGEN, else `cbindgen` on PATH, else ~/.cargo/bin/cbindgen; version 0.29.x
# (0.28+ reads edition-2024 `#[unsafe(no_mangle)]`; other versions format differently, which
# the drift check would report). Install: cargo install --locked cbindgen@0.29.4
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

check=0
case "${1:-}" in
    --check) check=1 ;;
    "") ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

cbindgen="${CBINDGEN:-}"
if [[ -z "$cbindgen" ]]; then
    if command -v cbindgen >/dev/null 2>&1; then
        cbindgen="$(command -v cbindgen)"
    elif [[ -x "$HOME/.cargo/bin/cbindgen" ]]; then
        cbindgen="$HOME/.cargo/bin/cbindgen"
    else
        echo "error: cbindgen not found; install it with: cargo install --locked cbindgen@0.29.4" >&2
        echo "       (or run scripts/setup.sh, or set CBINDGEN=/path/to/cbindgen)" >&2
        exit 1
    fi
fi
version="$("$cbindgen" --version | awk '{print $2}')"
if [[ "$version" != 0.29.* ]]; then
    echo "error: $cbindgen is version $version; the committed headers are made by cbindgen 0.29.x" >&2
    echo "       install it with: cargo install --locked cbindgen@0.29.4" >&2
    exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# Runs cbindgen on the C boundary only (src/ffi/mod.rs and the modules it declares), so no
# other part of the crate, and no `cargo metadata`, is involved. cbindgen warns "Can't find"
# for the types the configs deliberately show under another name (see cbindgen.toml); every
# other message is shown.
generate() {
    local config="$1" out="$2"
    "$cbindgen" --config "$config" --output "$out" src/ffi/mod.rs 2> "$tmp/log" || {
        cat "$tmp/log" >&2
        echo "error: cbindgen failed with $config" >&2
        exit 1
    }
    grep -v -E "^WARN: Can't find (ResultCode|KindCode|InspectKindCode)\. " "$tmp/log" >&2 || true
}

generate cbindgen.toml "$tmp/redislock.h"
generate cbindgen-php.toml "$tmp/redislock_php.raw.h"

# PHP FFI has no preprocessor, but cbindgen 0.29 always writes C23 `#if` blocks around enums
# with a fixed size (`enum E : uint32_t` for C23, `typedef uint32_t E` before). Keep the
# pre-C23 branch, which is what a C99 compiler sees too. The items of the hidden cargo feature
# `recipe-kind` (`#if defined(REDISLOCK_RECIPE_KIND)`, cbindgen.toml) are left out: the PHP
# package has no use for them.
awk '
    $0 == "#if defined(REDISLOCK_RECIPE_KIND)" { hidden = 1; next }
    hidden && $0 == "#endif" { hidden = 0; next }
    hidden { next }
    $0 == "#if __STDC_VERSION__ >= 202311L" { skip = 1; inside = 1; next }
    $0 == "#else" && inside                  { skip = 0; next }
    $0 == "#endif // __STDC_VERSION__ >= 202311L" { skip = 0; inside = 0; next }
    !skip { print }
' "$tmp/redislock_php.raw.h" > "$tmp/redislock_php.h"

# PHP FFI passes a PHP string directly (no copy) only to a `char *` parameter; a `uint8_t *`
# needs a CData buffer the string is first copied into. So in the PHP header, and only there, the
# byte-string parameters `name`, `prefix`, `owner` and `identity` (each followed by an explicit
# length, binary-safe) are declared `const char *` instead of `const uint8_t *`: ABI-identical (same size, alignment
# and passing of a pointer), and include/redislock.h keeps `const uint8_t *` for C callers.
sed -i -E 's/const uint8_t \*(name|prefix|owner|identity|key|value)([,)])/const char *\1\2/' "$tmp/redislock_php.h"
# Likewise the arrays of byte strings (the names of a set; a fenced script's keys and args):
# `const char *const *names`, so that PHP can store its strings' pointers in the array it passes.
sed -i -E 's/const uint8_t \*const \*(names|keys|args)([,)])/const char *const *\1\2/' "$tmp/redislock_php.h"
if grep -n 'uint8_t \*' "$tmp/redislock_php.h" >&2; then
    echo "error: redislock_php.h has a uint8_t pointer parameter left (above): decide whether it" >&2
    echo "       is a byte string PHP should pass directly and extend the rewrite above" >&2
    exit 1
fi

# The PHP header must start with the two FFI directives and hold no other preprocessor line.
expected_start=$'#define FFI_SCOPE "REDISLOCK"\n#define FFI_LIB "libredislock.so"'
if [[ "$(head -n 2 "$tmp/redislock_php.h")" != "$expected_start" ]]; then
    echo "error: redislock_php.h must start with the FFI_SCOPE and FFI_LIB directives" >&2
    exit 1
fi
if tail -n +3 "$tmp/redislock_php.h" | grep -n -E '^[[:space:]]*#' >&2; then
    echo "error: redislock_php.h has a preprocessor line PHP FFI cannot parse (above)" >&2
    exit 1
fi

status=0
for h in redislock.h redislock_php.h; do
    if [[ $check -eq 1 ]]; then
        if ! diff -u "include/$h" "$tmp/$h" >&2; then
            echo "error: include/$h is out of date; run scripts/ci/gen-headers.sh" >&2
            status=1
        fi
    else
        mkdir -p include
        if ! cmp -s "$tmp/$h" "include/$h"; then
            cp "$tmp/$h" "include/$h"
            echo "wrote include/$h"
        else
            echo "include/$h is up to date"
        fi
    fi
done
if [[ $check -eq 1 && $status -eq 0 ]]; then
    echo "headers are up to date (cbindgen $version)"
fi
exit $status
