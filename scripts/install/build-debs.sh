#!/usr/bin/env bash
# Builds the Debian packages of redislock from this tree (no debhelper, no debian/ directory):
#
#   scripts/install/build-debs.sh --out DIR [--maintainer 'Name <address>']
#
#   libredislock0.4     the shared library, named after its SONAME (libredislock.so.0.4), and
#                       the PHP FFI header its PHP package reads
#                       (/usr/share/libredislock0.4/redislock_php.h); ldconfig trigger, shlibs
#   libredislock-dev    redislock.h, the static library, the libredislock.so link and
#                       redislock.pc (`pkg-config --cflags --libs redislock`)
#   redislock-cli       /usr/bin/redislock, its man pages and its bash, zsh and fish completions
#
# The files come from `scripts/install/install.sh --prefix /usr --libdir /usr/lib/<multiarch>` into a
# staging directory (the `dist` build, stripped as dh_strip does); each package gets a
# machine-readable copyright file, changelog.Debian.gz, md5sums and Depends computed by
# dpkg-shlibdeps. The Maintainer field is --maintainer, else "$DEBFULLNAME <$DEBEMAIL>", else a
# placeholder with an address under .invalid (RFC 2606): set one to publish the packages.
# SOURCE_DATE_EPOCH (default: the last commit's date) dates the changelog and every file.
# Needs cargo, binutils, dpkg-dev (dpkg-deb, dpkg-shlibdeps, dpkg-architecture) and gzip.
# packaging/debian/ holds the copyright file's text, the packages' descriptions and the lintian
# overrides (each with its reason).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"

usage() { sed -n '2,/^set -euo pipefail$/{/^set /d;s/^# \{0,1\}//;p}' "$0"; }
die() { echo "build-debs.sh: $*" >&2; exit 1; }

out=""
maintainer=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --out) [[ $# -ge 2 ]] || die "--out needs a directory"; out="$2"; shift 2 ;;
        --out=*) out="${1#*=}"; shift ;;
        --maintainer) [[ $# -ge 2 ]] || die "--maintainer needs a value"; maintainer="$2"; shift 2 ;;
        --maintainer=*) maintainer="${1#*=}"; shift ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done
[[ -n "$out" ]] || { usage >&2; die "--out DIR is needed"; }
if [[ -z "$maintainer" && -n "${DEBEMAIL:-}" ]]; then
    maintainer="${DEBFULLNAME:-redislock developers} <$DEBEMAIL>"
fi
maintainer="${maintainer:-The redislock developers <redislock@maintainer.invalid>}"
for tool in dpkg-deb dpkg-shlibdeps dpkg-architecture gzip install; do
    command -v "$tool" >/dev/null || die "$tool not found (Debian: apt-get install dpkg-dev gzip)"
done

mkdir -p "$out"
out="$(cd "$out" && pwd)"
arch="$(dpkg-architecture -qDEB_HOST_ARCH)"
multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH)"
libdir="/usr/lib/$multiarch"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
stage="$work/stage"
# The build without SOURCE_DATE_EPOCH: nothing it makes holds a date, and the cc crate's build
# scripts watch the variable, so a value that changes with every commit would rebuild ring and
# everything above it each time (and unlike the builds of tests/install.rs).
env -u SOURCE_DATE_EPOCH bash scripts/install/install.sh --prefix /usr --libdir "$libdir" --destdir "$stage" --no-ldconfig \
    > "$work/install.log" || { cat "$work/install.log" >&2; die "scripts/install/install.sh failed"; }

version="$(cargo pkgid -p redislock-sync | sed 's/.*[#@]//')"
debversion="$version-1"
soname="$(readelf -d "$stage$libdir/libredislock.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
[[ "$soname" =~ ^libredislock\.so\.([0-9.]+)$ ]] || die "unexpected SONAME '$soname'"
sover="${BASH_REMATCH[1]}"
libpkg="libredislock$sover"   # Debian policy 8.1: the SONAME's name and version, no ".so"

# --- per-package trees -------------------------------------------------------------------------
mv_into() { # package path-under-stage...
    local pkg=$1
    shift
    for path in "$@"; do
        mkdir -p "$(dirname "$work/$pkg$path")"
        mv "$stage$path" "$work/$pkg$path"
    done
}
mv_into "$libpkg" "$libdir/libredislock.so.$version" "$libdir/$soname"
chmod 0644 "$work/$libpkg$libdir/libredislock.so.$version"   # policy 8.1: not executable
mkdir -p "$work/$libpkg/usr/share/$libpkg"
mv "$stage/usr/include/redislock_php.h" "$work/$libpkg/usr/share/$libpkg/redislock_php.h"
mv_into libredislock-dev /usr/include/redislock.h "$libdir/libredislock.so" \
    "$libdir/libredislock.a" "$libdir/pkgconfig/redislock.pc"
# The archive's members without their .comment sections, as dh_strip leaves a static library.
strip --strip-debug --remove-section=.comment --remove-section=.note --enable-deterministic-archives \
    "$work/libredislock-dev$libdir/libredislock.a"
mv_into redislock-cli /usr/bin/redislock /usr/share/man/man1 \
    /usr/share/bash-completion/completions/redislock \
    /usr/share/fish/vendor_completions.d/redislock.fish
# Debian's zsh reads vendor completions from vendor-completions, not site-functions.
mkdir -p "$work/redislock-cli/usr/share/zsh/vendor-completions"
mv "$stage/usr/share/zsh/site-functions/_redislock" "$work/redislock-cli/usr/share/zsh/vendor-completions/"
gzip -9n "$work"/redislock-cli/usr/share/man/man1/*.1
# The PHP package (share/redislock/php) is not packaged: PHP users install it with Composer. So
# redislock.pc names no phpdir.
pc="$work/libredislock-dev$libdir/pkgconfig/redislock.pc"
sed -i -e '/^phpdir=/d' \
    -e "s|^# The PHP package (autoload.php, preload.php) and the shared library's SONAME, for PHP set-ups.|# The shared library's SONAME, for PHP set-ups (the PHP package comes with Composer).|" "$pc"
! grep -q -e phpdir -e 'The PHP package' "$pc" || die "packaging/redislock.pc.in changed: adapt the edit of its phpdir"

# --- metadata ----------------------------------------------------------------------------------
date_r="$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
crates_of() { # cargo package: "crate version: license" of what is linked into it
    cargo tree --offline -p "$1" -e normal,no-proc-macro --prefix none --format '{p}: {l}' \
        | sed -e 's/ (\*)$//' -e 's| ([^)]*)||' -e 's/^/  /' | LC_ALL=C sort -u
}
docs() { # package cargo-package
    local doc="$work/$1/usr/share/doc/$1"
    mkdir -p "$doc"
    {
        while IFS= read -r line; do
            if [[ "$line" == @crates@ ]]; then
                crates_of "$2" | grep -v -E '^ *redislock(-sync|-cli)? '
            else
                printf '%s\n' "$line"
            fi
        done < packaging/debian/copyright
        printf '\nLicense: MIT\n'
        sed -e '1,/^$/d' -e 's/^$/./' -e 's/^/ /' LICENSE-MIT
    } > "$doc/copyright"
    printf '%s (%s) unstable; urgency=medium\n\n  * Built from commit %s by scripts/install/build-debs.sh;\n    the changes of each release are in the source'"'"'s CHANGELOG.md.\n\n -- %s  %s\n' \
        "$1" "$debversion" "$commit" "$maintainer" "$date_r" | gzip -9n > "$doc/changelog.Debian.gz"
}

depends_of() { # file...: the shlibs:Depends that dpkg-shlibdeps computes for them
    mkdir -p "$work/shlibdeps/debian"
    printf 'Source: redislock\n\nPackage: x\nArchitecture: any\n' > "$work/shlibdeps/debian/control"
    local files=()
    for f in "$@"; do files+=("$(realpath "$f")"); done
    (cd "$work/shlibdeps" && dpkg-shlibdeps -O "${files[@]}" 2>/dev/null) \
        | sed -n 's/^shlibs:Depends=//p'
}

control() { # package section depends description
    local pkg=$1 section=$2 depends=$3 description=$4 size
    size="$(du -k -s --apparent-size --exclude=DEBIAN "$work/$pkg" | cut -f1)"
    mkdir -p "$work/$pkg/DEBIAN"
    {
        printf 'Package: %s\nSource: redislock\nVersion: %s\nArchitecture: %s\n' "$pkg" "$debversion" "$arch"
        printf 'Maintainer: %s\nInstalled-Size: %s\nSection: %s\nPriority: optional\n' "$maintainer" "$size" "$section"
        [[ "$pkg" == redislock-cli ]] || printf 'Multi-Arch: same\n'
        printf 'Depends: %s\n' "$depends"
        cat "packaging/debian/$description.description"
    } > "$work/$pkg/DEBIAN/control"
}

finish() { # package: overrides, md5sums, file dates, then the .deb
    local pkg=$1 overrides="packaging/debian/${1/$libpkg/libredislock}.lintian-overrides"
    if [[ -f "$overrides" ]]; then
        install -D -m 0644 "$overrides" "$work/$pkg/usr/share/lintian/overrides/$pkg"
    fi
    (cd "$work/$pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z \
        | xargs -0 md5sum) > "$work/$pkg/DEBIAN/md5sums"
    find "$work/$pkg" -type d -exec chmod 0755 {} +
    find "$work/$pkg/DEBIAN" -type f -exec chmod 0644 {} +
    find "$work/$pkg" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
    dpkg-deb --root-owner-group -Zxz --build "$work/$pkg" "$out/${pkg}_${debversion}_$arch.deb" >/dev/null
    echo "build-debs.sh: $out/${pkg}_${debversion}_$arch.deb"
}

docs "$libpkg" redislock-sync
docs libredislock-dev redislock-sync
docs redislock-cli redislock-cli
control "$libpkg" libs "$(depends_of "$work/$libpkg$libdir/libredislock.so.$version")" libredislock
printf 'libredislock %s %s (>= %s)\n' "$sover" "$libpkg" "$version" > "$work/$libpkg/DEBIAN/shlibs"
printf 'activate-noawait ldconfig\n' > "$work/$libpkg/DEBIAN/triggers"
control libredislock-dev libdevel "$libpkg (= $debversion)" libredislock-dev
control redislock-cli utils "$(depends_of "$work/redislock-cli/usr/bin/redislock")" redislock-cli
for pkg in "$libpkg" libredislock-dev redislock-cli; do
    finish "$pkg"
done
