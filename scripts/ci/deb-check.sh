#!/usr/bin/env bash
# The Debian packages as a C user gets them (scripts/install/build-debs.sh): built into a temporary
# directory, checked by lintian (errors and warnings fail; packaging/debian/*.lintian-overrides
# hold the allowed ones with their reasons), installed with `apt-get install ./*.deb`; then the
# README's C quick start is built with `pkg-config --cflags --libs redislock` alone and run
# without LD_LIBRARY_PATH against a redis-server started here, `man -w redislock` must find the
# man page, the Composer installation of the PHP package is checked against the installed
# library (scripts/ci/composer-check.sh), and the packages are purged: dpkg must not know them
# any more and none of their files may be left.
#
#   scripts/ci/deb-check.sh
#
# Needs root (it installs and purges packages); otherwise it says SKIPPED and exits 0. It also
# skips when the packages are installed already, rather than purge someone's installation.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"
# shellcheck source=lib/redis-server.sh
source scripts/lib/redis-server.sh

if [[ "$(id -u)" -ne 0 ]]; then
    echo "deb-check: SKIPPED: not root (it installs and purges the packages with apt-get)" >&2
    exit 0
fi
packages=(libredislock0.3 libredislock-dev redislock-cli)
for p in "${packages[@]}"; do
    if dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep 'ok installed' >/dev/null; then
        echo "deb-check: SKIPPED: $p is installed already (this check would purge it)" >&2
        exit 0
    fi
done

tmp="$(mktemp -d)"
installed=0
cleanup() {
    stop_redis_server
    if [[ $installed -eq 1 ]]; then
        apt-get remove --purge -y -q "${packages[@]}" >/dev/null 2>&1 || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "deb-check: failed at line $LINENO" >&2' ERR

t=$SECONDS
bash scripts/install/build-debs.sh --out "$tmp/debs"
echo "deb-check: built in $((SECONDS - t)) s"

t=$SECONDS
lintian --fail-on error,warning "$tmp"/debs/*.deb
echo "deb-check: lintian: no errors, no warnings ($((SECONDS - t)) s)"

env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$tmp"/debs/*.deb
installed=1
multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH)"
files="$(dpkg -L "${packages[@]}" | sort -u)"
grep -qx "/usr/lib/$multiarch/libredislock.so.0.3" <<< "$files"
# (Outputs are read whole before grep -q: with pipefail, a writer cut off by grep's early exit
# would fail the pipeline.)
cache="$(ldconfig -p)"
grep -q 'libredislock.so.0.3 ' <<< "$cache" \
    || { echo "deb-check: the dynamic loader's cache lacks libredislock.so.0.3" >&2; exit 1; }

# The README's C quick start, with pkg-config alone and no LD_LIBRARY_PATH.
start_redis_server
mkdir "$tmp/c"
bash scripts/ci/quickstarts.sh --print c | sed "s/127\.0\.0\.1:6379/127.0.0.1:$REDIS_PORT/g" > "$tmp/c/app.c"
grep -q "127.0.0.1:$REDIS_PORT" "$tmp/c/app.c"
# shellcheck disable=SC2046 # pkg-config's words are the compiler's arguments
(cd "$tmp/c" && cc -std=c99 -Wall -Wextra -Werror app.c $(pkg-config --cflags --libs redislock) -o app)
linked="$(ldd "$tmp/c/app")"
# (/lib is /usr/lib on Debian 12: the loader's cache may name either.)
grep -Eq "libredislock\.so\.0\.3 => (/usr)?/lib/$multiarch/libredislock\.so\.0\.3 " <<< "$linked" \
    || { echo "deb-check: the program does not load the installed library: $linked" >&2; exit 1; }
(unset LD_LIBRARY_PATH; "$tmp/c/app")
redis-cli -p "$REDIS_PORT" exists stock:42 | grep -qx 0   # released
echo "deb-check: the README's C quick start ran against the installed library"

page="$(man -w redislock)" || {
    echo "deb-check: man finds no page redislock (a dpkg path-exclude of /usr/share/man in" \
        "/etc/dpkg/dpkg.cfg.d/, as slim images have, drops man pages)" >&2
    exit 1
}
[[ "$page" == /usr/share/man/man1/redislock.1.gz ]]
man redislock > /dev/null
man -w redislock-run > /dev/null
echo "deb-check: man redislock: $(man -w redislock)"

REDIS_URL="redis://127.0.0.1:$REDIS_PORT/" bash scripts/ci/composer-check.sh

apt-get remove --purge -y -q "${packages[@]}"
installed=0
for p in "${packages[@]}"; do
    if dpkg -L "$p" >/dev/null 2>&1; then
        echo "deb-check: dpkg still knows $p after the purge" >&2
        exit 1
    fi
done
left=()
while IFS= read -r f; do
    # Directories the packages share with others (/usr, /usr/share/man/man1...) stay.
    if [[ -e "$f" || -L "$f" ]] && ! [[ -d "$f" && ! -L "$f" ]]; then
        left+=("$f")
    fi
done <<< "$files"
for d in /usr/share/libredislock0.3 /usr/share/doc/libredislock0.3 /usr/share/doc/libredislock-dev \
    /usr/share/doc/redislock-cli; do
    [[ ! -e "$d" ]] || left+=("$d")
done
if [[ ${#left[@]} -gt 0 ]]; then
    printf 'deb-check: left after the purge: %s\n' "${left[@]}" >&2
    exit 1
fi
cache="$(ldconfig -p)"
grep -q 'libredislock.so.0.3 ' <<< "$cache" \
    && { echo "deb-check: libredislock.so.0.3 still in the loader's cache after the purge" >&2; exit 1; }
echo "deb-check: ok (installed, used, purged: nothing left)"
