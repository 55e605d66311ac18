#!/usr/bin/env bash
# Builds libredislock for distribution and installs it for C and PHP users:
#
#   scripts/install/install.sh [--prefix DIR] [--destdir DIR] [--libdir DIR] [--includedir DIR]
#                      [--datadir DIR] [--bindir DIR] [--mandir DIR]
#                      [--library-type both|shared|static] [--split-debug] [--no-cli]
#                      [--no-ldconfig]
#
#   sudo scripts/install/install.sh                          # into /usr/local, then runs ldconfig
#   scripts/install/install.sh --prefix "$HOME/.local"
#   scripts/install/install.sh --prefix /usr --libdir /usr/lib/x86_64-linux-gnu --destdir "$PWD/pkgroot"
#
# What it installs (VERSION is the crate's version, SONAME libredislock.so.0.MINOR for 0.x
# versions, libredislock.so.MAJOR from 1.0 on):
#   LIBDIR/libredislock.so.VERSION          the shared library, stripped, SONAME set, -z nodelete
#   LIBDIR/SONAME -> libredislock.so.VERSION   what programs and PHP load
#   LIBDIR/libredislock.so -> SONAME           what `-lredislock` links
#   LIBDIR/libredislock.a                   the static library, debug info stripped
#   LIBDIR/pkgconfig/redislock.pc           `pkg-config --cflags --libs redislock`
#   INCLUDEDIR/redislock.h                  the C/C++ header
#   INCLUDEDIR/redislock_php.h              the PHP FFI header, its FFI_LIB naming SONAME (for
#                                           FFI::load and ffi.preload)
#   DATADIR/redislock/php/                  the PHP package: autoload.php, preload.php, src/,
#                                           composer.json, README.md, docs/, and a copy of
#                                           redislock_php.h that the package reads
#                                           (redislock_php.h and the package: not with
#                                           --library-type static, as PHP needs the .so)
#   LIBDIR/.debug/libredislock.so.VERSION.debug   with --split-debug only: the shared library's
#                                           debug info, linked with .gnu_debuglink (gdb finds it)
#   BINDIR/redislock                        the command-line tool (docs/cli.md), stripped;
#                                           not with --no-cli
#   MANDIR/man1/redislock.1, redislock-COMMAND.1   its man pages
#   DATADIR/bash-completion/completions/redislock, DATADIR/zsh/site-functions/_redislock,
#   DATADIR/fish/vendor_completions.d/redislock.fish   its shell completions
#
# Defaults: --prefix /usr/local, --libdir PREFIX/lib, --includedir PREFIX/include, --datadir
# PREFIX/share, --bindir PREFIX/bin, --mandir DATADIR/man, --library-type both. DESTDIR (option or environment) is put in front of every
# installed path but not of the paths written into redislock.pc (staged installs, packaging).
# --library-type static installs no shared library: `pkg-config --static` then links
# libredislock.a (with both installed, the linker prefers the .so).
# When nothing is staged (no DESTDIR), the script runs as root and LIBDIR is one of the dynamic
# loader's directories, it runs ldconfig (unless --no-ldconfig); otherwise it says what to do.
#
# The build is `cargo build --profile dist -p redislock-sync -p redislock-cli` (the release
# profile in target/dist, so target/release is never relinked) with REDISLOCK_SONAME=1, which
# makes build.rs link the SONAME (the tool's man pages and completions are printed by the built
# tool itself). Needs cargo,
# binutils (strip, objcopy, readelf) and coreutils. CARGO_TARGET_DIR is honoured.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"

usage() { sed -n '2,/^set -euo pipefail$/{/^set /d;s/^# \{0,1\}//;p}' "$0"; }
die() { echo "install.sh: $*" >&2; exit 1; }

prefix=/usr/local
destdir="${DESTDIR:-}"
libdir=""
includedir=""
datadir=""
bindir=""
mandir=""
cli=1
library_type=both
split_debug=0
ldconfig=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --prefix | --destdir | --libdir | --includedir | --datadir | --bindir | --mandir \
            | --library-type)
            [[ $# -ge 2 ]] || die "$1 needs a value"
            opt="${1#--}"
            val="$2"
            shift 2
            ;;
        --prefix=* | --destdir=* | --libdir=* | --includedir=* | --datadir=* | --bindir=* \
            | --mandir=* | --library-type=*)
            opt="${1%%=*}"
            opt="${opt#--}"
            val="${1#*=}"
            shift
            ;;
        --split-debug) split_debug=1; shift; continue ;;
        --no-ldconfig) ldconfig=0; shift; continue ;;
        --no-cli) cli=0; shift; continue ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
    case "$opt" in
        prefix) prefix="$val" ;;
        destdir) destdir="$val" ;;
        libdir) libdir="$val" ;;
        includedir) includedir="$val" ;;
        datadir) datadir="$val" ;;
        bindir) bindir="$val" ;;
        mandir) mandir="$val" ;;
        library-type) library_type="$val" ;;
    esac
done
case "$library_type" in
    both | shared | static) ;;
    *) die "--library-type must be both, shared or static, not '$library_type'" ;;
esac
for var in prefix libdir includedir datadir bindir mandir; do
    val="${!var}"
    [[ -z "$val" || "$val" == /* ]] || die "--$var must be an absolute path, not '$val'"
done
[[ -z "$destdir" || "$destdir" == /* ]] || destdir="$PWD/$destdir"
prefix="${prefix%/}"
[[ -n "$prefix" ]] || prefix=/
libdir="${libdir:-${prefix%/}/lib}"
includedir="${includedir:-${prefix%/}/include}"
datadir="${datadir:-${prefix%/}/share}"
bindir="${bindir:-${prefix%/}/bin}"
mandir="${mandir:-${datadir%/}/man}"
phpdir="$datadir/redislock/php"

for tool in cargo strip objcopy readelf install; do
    command -v "$tool" >/dev/null 2>&1 \
        || die "$tool not found (binutils has strip, objcopy and readelf; Rust has cargo)"
done

# --- build -------------------------------------------------------------------------------------
target_dir="$(cargo metadata --format-version 1 --no-deps \
    | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
[[ -n "$target_dir" ]] || die "cannot find cargo's target directory (cargo metadata)"
build_dir="$target_dir/dist"
log="$(mktemp)"
stage="$(mktemp -d)"
trap 'rm -rf "$log" "$stage"' EXIT

# Run from a cargo test (tests/install.rs), the environment holds what cargo sets for a crate;
# build scripts that watch such a variable (ring's watches CARGO_MANIFEST_DIR) would make every
# such run rebuild them and all that depends on them.
while IFS= read -r var; do
    case "$var" in
        CARGO_MANIFEST_* | CARGO_PKG_* | CARGO_CRATE_NAME | CARGO_BIN_* | CARGO_PRIMARY_PACKAGE \
            | CARGO_TARGET_TMPDIR | OUT_DIR) unset "$var" ;;
    esac
done < <(compgen -e)
# One cargo build for the library and the tool: a `cargo rustc` of the library with its own
# arguments and a build of the tool (which has the library as a dependency) would each find the
# other's library out of date and build it again, every time. `--print native-static-libs`
# (what a program linking libredislock.a must also link) goes through RUSTFLAGS, so that it is
# part of every unit's fingerprint alike; rustc prints it for the staticlib alone, and cargo
# shows the note again when the build is already up to date. Only this script builds in
# target/dist, always with the same flags, so an up-to-date build is not redone.
# (The tool is built with --no-cli too: a build of the library alone could unify its
# dependencies' features differently, and then the two would rebuild each other.)
packages=(-p redislock-sync -p redislock-cli)
echo "install.sh: building (cargo build --profile dist ${packages[*]}, target $build_dir)"
if ! REDISLOCK_SONAME=1 RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }--print=native-static-libs" \
    cargo build --profile dist "${packages[@]}" 2> "$log"; then
    cat "$log" >&2
    die "cargo build failed"
fi
libs_private="$(sed -n 's/^note: native-static-libs: //p' "$log" | tail -n 1)"
[[ -n "$libs_private" ]] || { cat "$log" >&2; die "rustc printed no native-static-libs note"; }

if [[ $cli -eq 1 ]]; then
    tool="$build_dir/redislock"
    [[ -x "$tool" ]] || die "$tool missing after the build"
    strip --strip-unneeded --remove-section=.comment -o "$stage/redislock" "$tool"
    mkdir -p "$stage/man1"
    "$stage/redislock" man > "$stage/man1/redislock.1"
    for command in run acquire extend release status elect leader fenced; do
        "$stage/redislock" man "$command" > "$stage/man1/redislock-$command.1"
    done
    "$stage/redislock" completions bash > "$stage/redislock.bash"
    "$stage/redislock" completions zsh > "$stage/_redislock"
    "$stage/redislock" completions fish > "$stage/redislock.fish"
fi

so="$build_dir/libredislock.so"
ar="$build_dir/libredislock.a"
[[ -f "$so" && -f "$ar" ]] || die "$so or $ar missing after the build"

version="$(cargo pkgid -p redislock-sync | sed 's/.*[#@]//')"
[[ "$version" =~ ^([0-9]+)\.([0-9]+)\.[0-9]+ ]] \
    || die "cannot read the crate's version ('$version')"
if [[ "${BASH_REMATCH[1]}" == 0 ]]; then
    expected_soname="libredislock.so.0.${BASH_REMATCH[2]}"
else
    expected_soname="libredislock.so.${BASH_REMATCH[1]}"
fi
soname="$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
[[ "$soname" == "$expected_soname" ]] \
    || die "$so has SONAME '$soname', expected $expected_soname (see build.rs, REDISLOCK_SONAME)"
readelf -d "$so" | grep -q NODELETE || die "$so is not linked with -z nodelete (see build.rs)"
real="libredislock.so.$version"

# --- stage: strip copies -----------------------------------------------------------------------
# As Debian's dh_strip does: shared library --strip-unneeded (the dynamic symbols stay), static
# library --strip-debug (its symbol table is needed for linking).
cp "$so" "$stage/$real"
if [[ $split_debug -eq 1 ]]; then
    objcopy --only-keep-debug "$stage/$real" "$stage/$real.debug"
    chmod 0644 "$stage/$real.debug"
fi
strip --strip-unneeded --remove-section=.comment "$stage/$real"
if [[ $split_debug -eq 1 ]]; then
    (cd "$stage" && objcopy --add-gnu-debuglink="$real.debug" "$real")
fi
strip --strip-debug --enable-deterministic-archives -o "$stage/libredislock.a" "$ar"

# Paths under the prefix are written relative to ${prefix}, so that `pkg-config
# --define-prefix` can relocate an unpacked tree.
under_prefix() {
    if [[ "$1" == "$prefix" ]]; then
        printf '%s' '${prefix}'
    elif [[ "$prefix" != / && "$1" == "$prefix"/* ]]; then
        printf '%s' "\${prefix}${1#"$prefix"}"
    else
        printf '%s' "$1"
    fi
}
sed -e "s|@prefix@|$prefix|" \
    -e "s|@libdir@|$(under_prefix "$libdir")|" \
    -e "s|@includedir@|$(under_prefix "$includedir")|" \
    -e "s|@phpdir@|$(under_prefix "$phpdir")|" \
    -e "s|@soname@|$soname|" \
    -e "s|@version@|$version|" \
    -e "s|@libs_private@|$libs_private|" \
    packaging/redislock.pc.in > "$stage/redislock.pc"
! grep -n '@[a-z_]*@' "$stage/redislock.pc" >&2 \
    || die "packaging/redislock.pc.in: unknown placeholder (above)"

# The PHP header with FFI_LIB naming the SONAME: FFI::load() and ffi.preload then find the
# installed library through the dynamic loader, and never an incompatible libredislock.so.
[[ "$(sed -n 2p include/redislock_php.h)" == '#define FFI_LIB '* ]] \
    || die "include/redislock_php.h: line 2 is not the FFI_LIB directive"
sed "2s|.*|#define FFI_LIB \"$soname\"|" include/redislock_php.h > "$stage/redislock_php.h"

# --- install -----------------------------------------------------------------------------------
D="${destdir%/}"
installed=()
put() { # mode source destination
    install -D -m "$1" "$2" "$D$3"
    installed+=("$3")
}
if [[ $library_type != static ]]; then
    put 0755 "$stage/$real" "$libdir/$real"
    ln -sfn "$real" "$D$libdir/$soname"
    ln -sfn "$soname" "$D$libdir/libredislock.so"
    installed+=("$libdir/$soname -> $real" "$libdir/libredislock.so -> $soname")
    if [[ $split_debug -eq 1 ]]; then
        put 0644 "$stage/$real.debug" "$libdir/.debug/$real.debug"
    fi
fi
if [[ $library_type != shared ]]; then
    put 0644 "$stage/libredislock.a" "$libdir/libredislock.a"
fi
put 0644 "$stage/redislock.pc" "$libdir/pkgconfig/redislock.pc"
put 0644 include/redislock.h "$includedir/redislock.h"

# PHP loads the shared library: nothing for PHP in a static-only installation.
if [[ $library_type != static ]]; then
    put 0644 "$stage/redislock_php.h" "$includedir/redislock_php.h"
    # The PHP package without its tests; Library.php reads the header copy next to autoload.php.
    rm -rf "$D$phpdir/src" "$D$phpdir/docs"
    for f in autoload.php preload.php composer.json README.md; do
        put 0644 "bindings/php/$f" "$phpdir/$f"
    done
    for f in bindings/php/docs/*.md; do   # the README's reference pages
        put 0644 "$f" "$phpdir/${f#bindings/php/}"
    done
    put 0644 "$stage/redislock_php.h" "$phpdir/redislock_php.h"
    while IFS= read -r -d '' f; do
        install -D -m 0644 "$f" "$D$phpdir/${f#bindings/php/}"
    done < <(find bindings/php/src -type f -name '*.php' -print0)
    installed+=("$phpdir/src/ ($(find bindings/php/src -type f -name '*.php' | wc -l) files)")
fi

if [[ $cli -eq 1 ]]; then
    put 0755 "$stage/redislock" "$bindir/redislock"
    for page in "$stage"/man1/*.1; do
        put 0644 "$page" "$mandir/man1/$(basename "$page")"
    done
    put 0644 "$stage/redislock.bash" "$datadir/bash-completion/completions/redislock"
    put 0644 "$stage/_redislock" "$datadir/zsh/site-functions/_redislock"
    put 0644 "$stage/redislock.fish" "$datadir/fish/vendor_completions.d/redislock.fish"
fi

echo "install.sh: installed redislock $version${D:+ into DESTDIR $D}:"
for path in "${installed[@]}"; do
    file="$D${path%% ->*}"
    if [[ "$path" != *" -> "* && -f "$file" ]]; then
        printf '  %-60s %s\n' "$path" "$(du -h "$file" | cut -f1)"
    else
        printf '  %s\n' "$path"
    fi
done

# --- the dynamic loader ------------------------------------------------------------------------
if [[ $library_type == static ]]; then
    exit 0
fi
loader_dirs="$( (ldconfig -N -v 2>/dev/null || true) | sed -n 's|^\(/[^:]*\):.*|\1|p')"
if grep -qxF "$libdir" <<< "$loader_dirs"; then
    if [[ -z "$D" && $ldconfig -eq 1 && "$(id -u)" -eq 0 ]]; then
        ldconfig
        echo "install.sh: ran ldconfig: programs and PHP now find $soname"
    elif [[ -z "$D" ]]; then
        echo "install.sh: run ldconfig (as root) so that programs and PHP find $soname"
    fi
elif [[ -z "$D" ]]; then
    echo "install.sh: $libdir is not a directory of the dynamic loader; programs and PHP"
    echo "  find $soname there with LD_LIBRARY_PATH=$libdir, or a program linked with"
    echo "  -Wl,-rpath,$libdir, or after adding $libdir to /etc/ld.so.conf.d/ and running ldconfig"
fi
