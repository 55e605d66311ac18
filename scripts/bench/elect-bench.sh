#!/usr/bin/env bash
# `redislock elect` beside `etcdctl elect`: the time to a new leader after kill -9 of the old
# one and after a resign, and how soon an observer sees it (BENCHMARKS.md, "Leader election").
# What it measures and how: scripts/bench/elect_bench.py.
#
#   scripts/bench/elect-bench.sh [--rounds N] [--kill-rounds N] [--lease D]
#
# Builds the tool (cargo build --release -p redislock-cli), starts a private redis-server (and an
# etcd, when etcd and etcdctl are installed) on free loopback ports, and prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release -p redislock-cli >&2
target_dir="$(cargo metadata --format-version 1 --no-deps \
    | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
exec python3 scripts/bench/elect_bench.py --redislock "$target_dir/release/redislock" "$@"
