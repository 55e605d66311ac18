#!/usr/bin/env bash
# Makes a release of redislock: everything a user installs, for the one version of Cargo.toml,
# in dist/ (its crates/, debian/, composer/ and SHA256SUMS are replaced):
#
#   bash scripts/release.sh [--out DIR] [--maintainer 'Name <address>'] [--offline]
#
#   dist/crates/redislock-sync-VERSION.crate    the library crate, as `cargo package` makes it
#   dist/crates/redislock-cli-VERSION.crate     the command-line tool's crate
#   dist/debian/libredislockSOVER_VERSION-1_ARCH.deb, libredislock-dev_..., redislock-cli_...
#                                               the Debian packages (scripts/install/build-debs.sh),
#                                               lintian clean
#   dist/composer/redislock-redislock-VERSION.zip   the PHP package redislock/redislock as a
#                                               Composer artifact (its composer.json with
#                                               "version", the PHP FFI header included)
#   dist/SHA256SUMS                             `sha256sum -c SHA256SUMS` in dist/ checks them
#
# The two crates are packaged together: redislock-cli depends on redislock-sync VERSION, which
# crates.io does not have until it is published, and `cargo package` of both in one command
# verifies the CLI against the library packaged beside it (publish redislock-sync first, then
# redislock-cli). Each crate is verified (built from its .crate) as `cargo publish` does.
#
# The Maintainer field of the Debian packages is --maintainer, else "$DEBFULLNAME <$DEBEMAIL>",
# else a placeholder under .invalid: set one before publishing the packages (packaging/README.md).
# --offline: cargo resolves without the network (what is in ~/.cargo/registry).
# SOURCE_DATE_EPOCH (default: the last commit's date) dates the files of the packages and of the
# zip. scripts/ci/version-check.sh runs first (every version in the tree agrees) and last (every
# version in dist/ agrees). scripts/ci/dist-check.sh installs from dist/ and uses what it got.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"

usage() { sed -n '2,/^set -euo pipefail$/{/^set /d;s/^# \{0,1\}//;p}' "$0"; }
die() { echo "release.sh: $*" >&2; exit 1; }

out="$root/dist"
maintainer_args=()
offline=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --out) [[ $# -ge 2 ]] || die "--out needs a directory"; out="$2"; shift 2 ;;
        --out=*) out="${1#*=}"; shift ;;
        --maintainer) [[ $# -ge 2 ]] || die "--maintainer needs a value"; maintainer_args=(--maintainer "$2"); shift 2 ;;
        --maintainer=*) maintainer_args=(--maintainer "${1#*=}"); shift ;;
        --offline) offline=(--offline); shift ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done
for tool in cargo python3 sha256sum lintian; do
    command -v "$tool" >/dev/null || die "$tool not found (scripts/setup.sh installs what is missing)"
done
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"

step() { printf 'release.sh: %s\n' "$*"; }
start=$SECONDS
bash scripts/ci/version-check.sh
version="$(cargo pkgid -p redislock-sync | sed 's/.*[#@]//')"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
[[ "$out" != "$root" ]] || die "--out must not be the source tree itself"
rm -rf "$out"/crates "$out"/debian "$out"/composer "$out"/SHA256SUMS
mkdir -p "$out"/crates "$out"/debian "$out"/composer

# --- the crates ------------------------------------------------------------------------------
t=$SECONDS
# --allow-dirty: the tree as it is (CI checks a developer's uncommitted work); a release from a
# clean checkout packages the same files.
# (Without SOURCE_DATE_EPOCH: the cc crate's build scripts watch it, and a value that changes with
# every commit would rebuild ring and all above it each time.)
# cargo unpacks the crates it verifies into its registry cache (~/.cargo/registry/src/-<hash>/, a
# local registry of its own) and reuses an earlier unpacking of the same name and version: the
# CLI would then be verified against the library as it was then. Those unpackings go first.
for crate in redislock-sync redislock-cli; do
    rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/"$crate-$version"
done
env -u SOURCE_DATE_EPOCH cargo package --quiet --locked --allow-dirty "${offline[@]}" \
    -p redislock-sync -p redislock-cli
target_dir="$(cargo metadata --format-version 1 --no-deps "${offline[@]}" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
for crate in redislock-sync redislock-cli; do
    cp "$target_dir/package/$crate-$version.crate" "$out/crates/"
done
step "crates packaged and verified ($((SECONDS - t)) s)"

# --- the Debian packages (the `dist` build, which C users and the CLI get) --------------------
t=$SECONDS
bash scripts/install/build-debs.sh --out "$out/debian" "${maintainer_args[@]}" >/dev/null
lintian --fail-on error,warning "$out"/debian/*.deb
step "Debian packages built, lintian: no errors, no warnings ($((SECONDS - t)) s)"

# --- the Composer artifact -------------------------------------------------------------------
t=$SECONDS
sover="$(sed -n 's/^\([0-9]*\)\.\([0-9]*\)\..*/\1 \2/p' <<< "$version")"
read -r major minor <<< "$sover"
if [[ "$major" == 0 ]]; then soname="libredislock.so.0.$minor"; else soname="libredislock.so.$major"; fi
zip="$out/composer/redislock-redislock-$version.zip"
# The package's files as git tracks them (no tests: a user's vendor/ does not run them), the
# license files, and the PHP header with FFI_LIB naming the SONAME (as scripts/install/install.sh
# installs it), which the package reads next to autoload.php.
files="$(git ls-files -- bindings/php | grep -v -e '^bindings/php/tests/' -e '^bindings/php/phpunit.xml$')"
FILES="$files" python3 - "$zip" "$version" "$soname" <<'PY'
import json, os, sys, time, zipfile
zip_path, version, soname = sys.argv[1:4]
epoch = int(os.environ["SOURCE_DATE_EPOCH"])
stamp = time.gmtime(max(epoch, 315532800))[:6]   # zip dates start in 1980
entries = {}
for path in os.environ["FILES"].split():
    rel = path[len("bindings/php/"):]
    with open(path, "rb") as f:
        entries[rel] = f.read()
meta = json.loads(entries["composer.json"])
out = {}
for k, v in meta.items():          # "version" right after "description", the rest as it was
    out[k] = v
    if k == "description":
        out["version"] = version
meta = out
entries["composer.json"] = (json.dumps(meta, indent=4, ensure_ascii=False)
                            .replace("\\/", "/") + "\n").encode()
for lic in ("LICENSE-MIT", "LICENSE-APACHE"):
    with open(lic, "rb") as f:
        entries[lic] = f.read()
with open("include/redislock_php.h", "rb") as f:
    lines = f.read().split(b"\n")
assert lines[1].startswith(b"#define FFI_LIB "), "include/redislock_php.h: line 2 is not FFI_LIB"
lines[1] = b'#define FFI_LIB "' + soname.encode() + b'"'
entries["redislock_php.h"] = b"\n".join(lines)
with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as z:
    for name in sorted(entries):
        info = zipfile.ZipInfo(name, date_time=stamp)
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, entries[name])
PY
step "Composer artifact written ($((SECONDS - t)) s)"

(cd "$out" && find crates debian composer -type f | LC_ALL=C sort | xargs sha256sum > SHA256SUMS)
bash scripts/ci/version-check.sh "$out"
step "dist for $version in $out ($((SECONDS - start)) s):"
sed 's/^/    /' "$out/SHA256SUMS"
