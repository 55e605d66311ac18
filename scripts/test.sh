#!/usr/bin/env bash
# The whole test suite, as CI runs it: set-up of missing tools, formatting, lints, the header
# drift check, the Rust unit and integration tests (which also drive the C tests under
# AddressSanitizer and valgrind, and the PHP tests), the doc tests, a release written to dist/
# (scripts/release.sh: the crates packaged and verified, the Debian packages checked by lintian,
# the Composer artifact), a build with the declared minimum Rust version, the release installed
# from dist/ alone and every snippet of the docs run against it (scripts/ci/dist-check.sh, as
# root), and bounded fuzz runs: the C API (FUZZ_SECONDS, default 60), and the RESP parser against
# redis-rs' (FUZZ_RESP_SECONDS, default 20). Each step's time is printed at the end.
#
#   bash scripts/test.sh            the whole suite
#   bash scripts/test.sh --quick    the inner loop (CONTRIBUTING.md): fmt, clippy of the library,
#                                   the unit tests, the behaviour suite on one server
#
# Every test starts its own redis-server on a free loopback port; none uses 127.0.0.1:6379.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  -h | --help) sed -n '2,/^set -euo pipefail$/{/^set /d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
  *) echo "test.sh: unknown argument $1 (--quick, or nothing for the whole suite)" >&2; exit 2 ;;
esac

# Each step's time, printed as a table at the end (and when a step fails).
steps=()
step_name=""
step_start=$SECONDS
suite_start=$SECONDS
step_end() {
  [ -n "$step_name" ] && steps+=("$(printf '%5d s  %s' $((SECONDS - step_start)) "$step_name")")
  step_name=""
}
step() {
  step_end
  step_name="$*"
  step_start=$SECONDS
  printf '\n== %s\n' "$*"
}
summary() {
  local rc=$?
  step_end
  printf '\n== time per step\n'
  printf '%s\n' "${steps[@]}"
  printf '%5d s  in all (exit %d)\n' $((SECONDS - suite_start)) "$rc"
}
trap summary EXIT

step "set-up (scripts/setup.sh: what is missing)"
bash scripts/setup.sh

step "cargo fmt --check"
cargo fmt --all -- --check
if [ $quick -eq 1 ]; then
  # The inner loop (CONTRIBUTING.md): the library's lints, its unit tests, and the behaviour
  # suite on one server (Redis; the rows whose name starts with single::).
  step "cargo clippy --lib -- -D warnings"
  cargo clippy --lib -- -D warnings
  step "unit tests and the behaviour suite on one server (cargo nextest run --lib --test topologies 'single::')"
  cargo nextest run --lib --test topologies -E 'kind(lib) | (binary(topologies) & test(/^single::/))'
  exit 0
fi
step "cargo clippy --all-targets --workspace -- -D warnings"
cargo clippy --all-targets --workspace -- -D warnings
step "cargo clippy with the metrics facade, the spans and the recipe kind (--features metrics,tracing,recipe-kind)"
cargo clippy --lib --tests --features metrics,tracing,recipe-kind -- -D warnings
step "luacheck (src/base/scripts/, and each Lua script as Redis receives it: .luacheckrc)"
rm -rf target/luacheck
LUACHECK_DIR="$PWD/target/luacheck" cargo test --quiet --lib base::scripts::tests::write_for_luacheck \
  -- --ignored --exact
luacheck --no-color src/base/scripts target/luacheck
if [ -x scripts/ci/gen-headers.sh ] || [ -f scripts/ci/gen-headers.sh ]; then
  step "header drift check"
  bash scripts/ci/gen-headers.sh --check
fi
step "tests (cargo nextest run --workspace: .config/nextest.toml sets how many at once)"
# One retry: on a 2-core machine shared with builds, a timing-bound test can miss its bound
# once; nextest reports every test that passed only on its retry as FLAKY, so none is hidden.
cargo nextest run --workspace --no-fail-fast --retries 1
# One build for the three features: the recipe kind (ARCHITECTURE.md, "Adding a kind") through
# the Rust API and the C ABI rides on it.
step "the tests that need the features: the metrics facade, the spans, the recipe kind (--features metrics,tracing,recipe-kind)"
cargo nextest run --profile features --features metrics,tracing,recipe-kind \
  --test metrics_facade --test tracing_spans --test recipe_kind
step "doc tests"
cargo test --doc
step "a release in dist/: both crates packaged together and verified, the Debian packages (lintian), the Composer artifact, SHA256SUMS; one version everywhere (scripts/release.sh)"
bash scripts/release.sh
step "the minimum Rust version the manifests declare (rust-version) builds both crates"
msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)
command -v rustup >/dev/null \
  || { echo "test.sh: rustup is needed to build with Rust $msrv (https://rustup.rs)" >&2; exit 1; }
# A machine whose network serves only the package registries may not reach rustup's toolchain
# server: then the step says so and is skipped, rather than failing the suite.
if rustup toolchain install "$msrv" --profile minimal --no-self-update; then
  cargo "+$msrv" check --locked --target-dir target/msrv -p redislock-sync -p redislock-cli \
    --features redislock-sync/metrics
else
  echo "test.sh: SKIPPED: Rust $msrv could not be installed here (rustup's server unreachable)" >&2
fi
step "composer validate --strict (bindings/php/composer.json)"
(cd bindings/php && COMPOSER_ALLOW_SUPERUSER=1 COMPOSER_DISABLE_NETWORK=1 composer validate --strict)
step "the release installed from dist/ alone and used: every snippet of the docs (Rust on the .crate, C with pkg-config, Composer with Symfony and Laravel, the CLI), man, purge (scripts/ci/dist-check.sh)"
# Root only (it installs and purges packages): otherwise it says SKIPPED.
bash scripts/ci/dist-check.sh
step "fuzz the C API for ${FUZZ_SECONDS:-60} s, the RESP parser against redis-rs' for ${FUZZ_RESP_SECONDS:-20} s (libFuzzer + AddressSanitizer; scripts/ci/fuzz.sh)"
FUZZ_SECONDS="${FUZZ_SECONDS:-60}" FUZZ_RESP_SECONDS="${FUZZ_RESP_SECONDS:-20}" bash scripts/ci/fuzz.sh
