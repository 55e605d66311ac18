#!/usr/bin/env bash
# The whole test suite, as CI runs it: set-up of missing tools, formatting, lints, the header
# drift check, the Rust unit and integration tests (which also drive the C tests under
# AddressSanitizer and valgrind, and the PHP tests), the doc tests, a dry-run publish of the
# two crates, a build with the declared minimum Rust version, the README's quick starts run as
# written, the Debian packages built, checked by lintian, installed, used (C, man, Composer) and
# purged (as root), and bounded fuzz runs: the C API (FUZZ_SECONDS, default 60), and the RESP
# parser against redis-rs' (FUZZ_RESP_SECONDS, default 20).
# Every test starts its own redis-server on a free loopback port; none uses 127.0.0.1:6379.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

bash scripts/setup.sh
step() { printf '\n== %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy --all-targets --workspace -- -D warnings"
cargo clippy --all-targets --workspace -- -D warnings
step "cargo clippy with the metrics facade (--features metrics)"
cargo clippy --lib --tests --features metrics -- -D warnings
step "cargo clippy with the spans (--features tracing)"
cargo clippy --lib --tests --features tracing -- -D warnings
step "luacheck (src/base/scripts/, and each Lua script as Redis receives it: .luacheckrc)"
rm -rf target/luacheck
LUACHECK_DIR="$PWD/target/luacheck" cargo test --quiet --lib base::scripts::tests::write_for_luacheck \
  -- --ignored --exact
luacheck --no-color src/base/scripts target/luacheck
if [ -x scripts/ci/gen-headers.sh ] || [ -f scripts/ci/gen-headers.sh ]; then
  step "header drift check"
  bash scripts/ci/gen-headers.sh --check
fi
step "tests"
if cargo nextest --version >/dev/null 2>&1; then
  # One retry: on a 2-core machine shared with builds, a timing-bound test can miss its bound
  # once; nextest reports every test that passed only on its retry as FLAKY, so none is hidden.
  cargo nextest run --workspace --no-fail-fast --retries 1
  # The metrics through the `metrics` crate's facade: a test that needs the feature.
  cargo nextest run --features metrics --test metrics_facade
  # The spans through the `tracing` crate: a test that needs the feature.
  cargo nextest run --features tracing --test tracing_spans
else
  cargo test --workspace --no-fail-fast
  cargo test --features metrics --test metrics_facade
  cargo test --features tracing --test tracing_spans
fi
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
