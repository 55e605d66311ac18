#!/usr/bin/env bash
# One version everywhere: checks that every place that states the release's version agrees
# with the library crate's (Cargo.toml, [package] version), and says which does not.
#
#   scripts/ci/version-check.sh            the tree: both crates' versions and the CLI's
#                                          dependency on the library, Cargo.lock, CHANGELOG.md's
#                                          top release heading (`## VERSION — YYYY-MM-DD`), the
#                                          README's dependency line (`redislock-sync = "MAJOR.MINOR"`),
#                                          the PHP package's Redislock\Library::VERSION, its
#                                          ABI_VERSION and DEFAULT_LIB (the SONAME), the C
#                                          library's redislock_version() (the crate's version)
#   scripts/ci/version-check.sh DIST       the same, then what scripts/release.sh wrote in DIST:
#                                          the .crate files, the Debian packages' versions,
#                                          changelogs and SONAME, the version redislock_version()
#                                          returns in the packaged library, `redislock --version`
#                                          of the packaged tool, the Composer artifact's
#                                          composer.json and Library::VERSION, and SHA256SUMS
#
# Needs python3, and for DIST dpkg-deb. Builds nothing; quick.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
dist="${1:-}"
[[ -z "$dist" || -d "$dist" ]] || { echo "version-check: $dist: no such directory" >&2; exit 2; }

failed=0
fail() { echo "version-check: $*" >&2; failed=1; }
same() { # WHAT FOUND
    if [[ "$2" == "$version" ]]; then
        echo "version-check: $1: $2"
    else
        fail "$1 is '$2', not $version"
    fi
}

toml() { # FILE DOTTED-KEY
    python3 -c 'import sys, tomllib
v = tomllib.load(open(sys.argv[1], "rb"))
for k in sys.argv[2].split("."):
    v = v[k]
print(v)' "$1" "$2"
}
version="$(toml Cargo.toml package.version)"
[[ "$version" =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] || { echo "version-check: Cargo.toml: version '$version'?" >&2; exit 1; }
major="${BASH_REMATCH[1]}" minor="${BASH_REMATCH[2]}"
if [[ "$major" == 0 ]]; then abi="0.$minor"; else abi="$major"; fi
soname="libredislock.so.$abi"
echo "version-check: the version is $version (Cargo.toml), the ABI $abi ($soname)"

[[ "$(toml Cargo.toml package.name)" == redislock-sync ]] || fail "Cargo.toml: the package is not redislock-sync"
same "cli/Cargo.toml version" "$(toml cli/Cargo.toml package.version)"
same "cli/Cargo.toml dependency on redislock-sync" "$(toml cli/Cargo.toml dependencies.redislock.version | sed 's/^[=^]//')"
lock_versions="$(python3 -c 'import tomllib
for p in tomllib.load(open("Cargo.lock", "rb"))["package"]:
    if p["name"] in ("redislock-sync", "redislock-cli"):
        print(p["name"], p["version"])')"
for crate in redislock-sync redislock-cli; do
    same "Cargo.lock $crate" "$(awk -v c="$crate" '$1 == c { print $2 }' <<< "$lock_versions")"
done

# CHANGELOG.md: the first second-level heading is the release, with its date.
heading="$(grep -m1 '^## ' CHANGELOG.md)"
if [[ "$heading" =~ ^##\ ([0-9.]+)\ —\ [0-9]{4}-[0-9]{2}-[0-9]{2}$ ]]; then
    same "CHANGELOG.md's top release heading" "${BASH_REMATCH[1]}"
else
    fail "CHANGELOG.md's first heading is '$heading', not '## $version — YYYY-MM-DD'"
fi

# README.md: the dependency line a Rust user copies.
dep="$(sed -n 's/^redislock-sync = "\([0-9.]*\)"$/\1/p' README.md | sort -u)"
if [[ "$dep" == "$major.$minor" || ( "$major" != 0 && "$dep" == "$major" ) ]]; then
    echo "version-check: README.md: redislock-sync = \"$dep\""
else
    fail "README.md's dependency line is 'redislock-sync = \"$dep\"', not \"$major.$minor\""
fi

# The PHP package.
php_const() { sed -n "s/^    public const $1 = '\\(.*\\)';\$/\\1/p" bindings/php/src/Library.php; }
same "bindings/php Redislock\\Library::VERSION" "$(php_const VERSION)"
[[ "$(php_const ABI_VERSION)" == "$abi" ]] || fail "Redislock\\Library::ABI_VERSION is '$(php_const ABI_VERSION)', not $abi"
[[ "$(php_const DEFAULT_LIB)" == "$soname" ]] || fail "Redislock\\Library::DEFAULT_LIB is '$(php_const DEFAULT_LIB)', not $soname"
grep -q '"version"' bindings/php/composer.json \
    && fail "bindings/php/composer.json has a \"version\" (composer validate --strict wants none: the artifact gets it)"

# The C library's version function returns the crate's version.
grep -A4 'pub extern "C" fn redislock_version()' src/ffi/mod.rs | grep -q 'env!("CARGO_PKG_VERSION")' \
    || fail "src/ffi/mod.rs: redislock_version() does not return CARGO_PKG_VERSION"

if [[ -n "$dist" ]]; then
    dist="$(cd "$dist" && pwd)"
    (cd "$dist" && sha256sum --quiet -c SHA256SUMS) || fail "$dist/SHA256SUMS does not match the files"
    for crate in redislock-sync redislock-cli; do
        f="$dist/crates/$crate-$version.crate"
        if [[ -f "$f" ]]; then
            same "$crate's .crate (its Cargo.toml)" "$(tar -xzOf "$f" "$crate-$version/Cargo.toml" \
                | sed -n '/^\[package\]/,/^\[/s/^version = "\(.*\)"$/\1/p')"
        else
            fail "$f is missing"
        fi
    done
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    shopt -s nullglob
    debs=("$dist"/debian/*.deb)
    [[ ${#debs[@]} -eq 3 ]] || fail "$dist/debian holds ${#debs[@]} packages, not 3"
    for deb in "${debs[@]}"; do
        pkg="$(dpkg-deb -f "$deb" Package)"
        same "$pkg's Version (upstream part)" "$(dpkg-deb -f "$deb" Version | sed 's/-[^-]*$//')"
        mkdir "$tmp/$pkg"
        dpkg-deb -x "$deb" "$tmp/$pkg"
        same "$pkg's changelog.Debian.gz" "$(gzip -dc "$tmp/$pkg/usr/share/doc/$pkg/changelog.Debian.gz" \
            | sed -n '1s/^[^ ]* (\(.*\)-[^-]*).*/\1/p')"
    done
    lib="$(find "$tmp/libredislock$abi" -name "libredislock.so.$version" 2>/dev/null | head -1)"
    if [[ -n "$lib" ]]; then
        got="$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
        [[ "$got" == "$soname" ]] && echo "version-check: the packaged library's SONAME: $got" \
            || fail "the packaged library's SONAME is '$got', not $soname"
        same "redislock_version() of the packaged library" "$(python3 -c 'import ctypes, sys
f = ctypes.CDLL(sys.argv[1]).redislock_version
f.restype = ctypes.c_char_p
print(f().decode())' "$lib")"
    else
        fail "no package libredislock$abi with libredislock.so.$version in $dist/debian"
    fi
    if [[ -x "$tmp/redislock-cli/usr/bin/redislock" ]]; then
        same "redislock --version (the packaged tool)" "$("$tmp/redislock-cli/usr/bin/redislock" --version | sed 's/^redislock //')"
    else
        fail "no package redislock-cli with /usr/bin/redislock in $dist/debian"
    fi
    zip="$dist/composer/redislock-redislock-$version.zip"
    if [[ -f "$zip" ]]; then
        read -r name zversion pversion < <(python3 -c 'import json, re, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
meta = json.loads(z.read("composer.json"))
lib = z.read("src/Library.php").decode()
print(meta["name"], meta.get("version"), re.search(r"public const VERSION = .(.*?).;", lib).group(1))' "$zip")
        [[ "$name" == redislock/redislock ]] || fail "the Composer artifact is '$name', not redislock/redislock"
        same "the Composer artifact's composer.json" "$zversion"
        same "the Composer artifact's Redislock\\Library::VERSION" "$pversion"
    else
        fail "$zip is missing"
    fi
fi

if [[ $failed -ne 0 ]]; then
    echo "version-check: FAILED: the places above do not all say $version" >&2
    exit 1
fi
echo "version-check: ok ($version everywhere${dist:+, $dist included})"
