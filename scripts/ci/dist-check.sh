#!/usr/bin/env bash
# A release as its users get it: installs from DIST alone (scripts/release.sh wrote it) and uses
# what it installed, then removes it all.
#
#   scripts/ci/dist-check.sh [DIST]          DIST default dist/
#
# 1. `sha256sum -c SHA256SUMS`; `apt-get install` of the three .debs (library, -dev, CLI); the
#    library is where its package says and in the dynamic loader's cache; `man redislock` works.
# 2. Every snippet of the documentation that a reader is told to run, run as written against a
#    redis-server started here on a free loopback port (scripts/ci/quickstarts.sh): a new Cargo
#    project builds against the packaged crate (offline, [patch.crates-io] of the unpacked
#    .crate) and takes a lock; the C quick start builds with `pkg-config` alone and runs without
#    LD_LIBRARY_PATH; new Composer projects require redislock/redislock:VERSION from the artifact
#    repository (packagist.org off, COMPOSER_DISABLE_NETWORK=1) and take locks with the
#    library from the .deb, through Symfony Lock and Laravel too; the `redislock` tool runs
#    commands under locks. Then `composer require redislock/redislock:VERSION` in a new project
#    that knows only the artifact repository takes a lock.
# 3. `apt-get remove --purge`: dpkg must not know the packages any more, none of their files
#    may be left, and the loader's cache must not name the library.
#
# Needs root (it installs and purges packages); otherwise it says SKIPPED and exits 0. It also
# skips when one of the packages is installed already, rather than purge someone's installation.
# Prints the seconds each part took.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"
# shellcheck source=lib/redis-server.sh
source scripts/lib/redis-server.sh

dist="${1:-dist}"
[[ -f "$dist/SHA256SUMS" ]] || { echo "dist-check: $dist/SHA256SUMS missing: run scripts/release.sh first" >&2; exit 1; }
dist="$(cd "$dist" && pwd)"
if [[ "$(id -u)" -ne 0 ]]; then
    echo "dist-check: SKIPPED: not root (it installs and purges the packages with apt-get)" >&2
    exit 0
fi
start=$SECONDS
# Composer reads an artifact repository with PHP's zip extension (php-zip: scripts/setup.sh).
(cd "$dist" && sha256sum --quiet -c SHA256SUMS)
debs=("$dist"/debian/*.deb)
packages=()
for deb in "${debs[@]}"; do
    packages+=("$(dpkg-deb -f "$deb" Package)")
done
libpkg="$(printf '%s\n' "${packages[@]}" | grep -x 'libredislock[0-9.]*')"
sover="${libpkg#libredislock}"
soname="libredislock.so.$sover"
for p in "${packages[@]}"; do
    if dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep 'ok installed' >/dev/null; then
        echo "dist-check: SKIPPED: $p is installed already (this check would purge it)" >&2
        exit 0
    fi
done

installed=0
purge() { apt-get remove --purge -y -q "${packages[@]}" >/dev/null; }
cleanup() {
    stop_redis_server
    if [[ $installed -eq 1 ]]; then purge 2>&1 || true; fi
}
trap cleanup EXIT
trap 'echo "dist-check: failed at line $LINENO" >&2' ERR

t=$SECONDS
env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${debs[@]}" >/dev/null
installed=1
multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH)"
files="$(dpkg -L "${packages[@]}" | sort -u)"
grep -qx "/usr/lib/$multiarch/$soname" <<< "$files"
# (Outputs are read whole before grep -q: with pipefail, a writer cut off by grep's early exit
# would fail the pipeline.)
cache="$(ldconfig -p)"
grep -q "$soname " <<< "$cache" \
    || { echo "dist-check: the dynamic loader's cache lacks $soname" >&2; exit 1; }
page="$(man -w redislock)" || {
    echo "dist-check: man finds no page redislock (a dpkg path-exclude of /usr/share/man in" \
        "/etc/dpkg/dpkg.cfg.d/, as slim images have, drops man pages)" >&2
    exit 1
}
[[ "$page" == /usr/share/man/man1/redislock.1.gz ]]
man redislock > /dev/null
man -w redislock-run > /dev/null
echo "dist-check: installed ${packages[*]}; man redislock: $page ($((SECONDS - t)) s)"

t=$SECONDS
start_redis_server
REDIS_PORT="$REDIS_PORT" bash scripts/ci/quickstarts.sh "$dist"
echo "dist-check: the documentation's snippets ran against the release ($((SECONDS - t)) s)"

# `composer require` in a new project that knows only the artifact repository.
t=$SECONDS
version="$(dpkg-deb -f "$dist/debian/redislock-cli_"*.deb Version | sed 's/-[^-]*$//')"
app="$(mktemp -d)"
trap 'rm -rf "$app"; cleanup' EXIT
cat > "$app/composer.json" <<JSON
{
    "repositories": [{"type": "artifact", "url": "$dist/composer"}, {"packagist.org": false}]
}
JSON
(
    cd "$app"
    export COMPOSER_ALLOW_SUPERUSER=1 COMPOSER_DISABLE_NETWORK=1 COMPOSER_NO_INTERACTION=1
    export COMPOSER_HOME="$app/.composer-home" COMPOSER_CACHE_DIR="$app/.composer-cache"
    composer require --no-progress --quiet "redislock/redislock:$version"
    env -u REDISLOCK_LIB -u REDISLOCK_HEADER -u LD_LIBRARY_PATH php -r '
        require "vendor/autoload.php";
        $lock = Redislock\Client::fromUrl($argv[1])->tryAcquire("dist-check:composer-require");
        $lock->release();
        echo "dist-check: composer require redislock/redislock:", Redislock\Library::VERSION,
            ": a lock taken and released with libredislock ", Redislock\Library::version(), "\n";
    ' "redis://127.0.0.1:$REDIS_PORT/"
)
echo "dist-check: ($((SECONDS - t)) s)"

t=$SECONDS
purge
installed=0
for p in "${packages[@]}"; do
    if dpkg -L "$p" >/dev/null 2>&1; then
        echo "dist-check: dpkg still knows $p after the purge" >&2
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
for p in "${packages[@]}"; do
    for d in "/usr/share/$p" "/usr/share/doc/$p"; do
        [[ ! -e "$d" ]] || left+=("$d")
    done
done
if [[ ${#left[@]} -gt 0 ]]; then
    printf 'dist-check: left after the purge: %s\n' "${left[@]}" >&2
    exit 1
fi
cache="$(ldconfig -p)"
grep -q "$soname " <<< "$cache" \
    && { echo "dist-check: $soname still in the loader's cache after the purge" >&2; exit 1; }
echo "dist-check: purged, nothing left ($((SECONDS - t)) s)"
echo "dist-check: ok ($((SECONDS - start)) s)"
