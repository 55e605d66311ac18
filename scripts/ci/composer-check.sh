#!/usr/bin/env bash
# The PHP package as a Composer user gets it: `composer validate --strict` of
# bindings/php/composer.json, then a fresh project in a temporary directory that requires
# redislock/redislock from a path repository (a copy of bindings/php; packagist.org switched off
# and COMPOSER_DISABLE_NETWORK=1: nothing is downloaded) is installed with Debian's composer,
# and a script of that project takes and releases a lock through the Symfony Lock store and
# through the Laravel lock provider, with REDISLOCK_LIB and REDISLOCK_HEADER unset: the
# package must find the library through the dynamic loader and the header where the Debian
# package libredislock0.3 puts it. Symfony Lock and Laravel's cache come from Debian's
# php-symfony-lock and php-illuminate-cache, as in the package's own tests.
#
#   REDIS_URL=redis://127.0.0.1:PORT/ scripts/ci/composer-check.sh
#
# Needs the library installed (scripts/ci/deb-check.sh runs this between install and purge).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
: "${REDIS_URL:?set REDIS_URL to a test server}"

command -v composer >/dev/null || { echo "composer-check: composer missing (scripts/setup.sh)" >&2; exit 1; }
export COMPOSER_ALLOW_SUPERUSER=1 COMPOSER_DISABLE_NETWORK=1 COMPOSER_NO_INTERACTION=1
(cd bindings/php && composer validate --strict)

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export COMPOSER_HOME="$tmp/composer-home"
mkdir "$tmp/app"
cat > "$tmp/app/composer.json" <<JSON
{
    "require": {
        "redislock/redislock": "*@dev"
    },
    "repositories": [
        {"type": "path", "url": "$root/bindings/php", "options": {"symlink": false}},
        {"packagist.org": false}
    ]
}
JSON
(cd "$tmp/app" && composer install --no-progress)
[[ -f "$tmp/app/vendor/redislock/redislock/src/Library.php" && ! -L "$tmp/app/vendor/redislock/redislock" ]] \
    || { echo "composer-check: the package was not copied into vendor/" >&2; exit 1; }

cp scripts/ci/composer-check.php "$tmp/app/check.php"
(cd "$tmp/app" && env -u REDISLOCK_LIB -u REDISLOCK_HEADER -u LD_LIBRARY_PATH php check.php)
echo "composer-check: ok"
