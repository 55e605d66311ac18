#!/usr/bin/env bash
# The redislock command-line tool beside flock(1) and `etcdctl lock`: the time from start to the
# command running (median of interleaved rounds) and the order in which 20 queued invocations ran
# (BENCHMARKS.md, "The command-line tool"). What it measures and how: scripts/bench/cli_bench.py.
#
#   scripts/bench/cli-bench.sh [--rounds N] [--queue-runs N]
#
# Builds the tool (cargo build --release -p redislock-cli), starts a private redis-server (and an
# etcd, when etcd and etcdctl are installed: scripts/setup.sh installs them) on free loopback
# ports, and prints the figures as Markdown tables.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release -p redislock-cli >&2
target_dir="$(cargo metadata --format-version 1 --no-deps \
    | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
exec python3 scripts/bench/cli_bench.py --redislock "$target_dir/release/redislock" "$@"
