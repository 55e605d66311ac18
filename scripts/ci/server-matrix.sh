#!/usr/bin/env bash
# The server matrix of docs/servers.md: the behaviour suites on one Redis binary in place of
# Debian's redis-server. CI runs the behaviour suite (tests/topologies.rs) and the Redisson suite
# on Redis 6.2, 7.0 and 7.4 and Valkey 9.1 (and the behaviour suite on Valkey 9.0) already (their
# `redis62::`, `redis74::`, `valkey::` and `valkey90::`
# modules); this runs the suites that test Redis only (Redisson, waiting, fencing, read-write
# locks, semaphores, sets, Cluster, Sentinel) on another version, through
# REDISLOCK_TEST_REDIS_SERVER.
#
#   bash scripts/ci/server-matrix.sh redis-server-6.2     # or redis-server-7.4, or any path
#
# Needs the binaries scripts/setup.sh links (redis-server-6.2, redis-server-7.4).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$HOME/.cargo/bin:$PATH"
bin=${1:?usage: scripts/ci/server-matrix.sh REDIS-SERVER-BINARY}
command -v "$bin" >/dev/null || { echo "server-matrix: no $bin (run bash scripts/setup.sh)" >&2; exit 1; }
echo "server-matrix: $("$bin" --version)"
export REDISLOCK_TEST_REDIS_SERVER
REDISLOCK_TEST_REDIS_SERVER=$(command -v "$bin")
# The suites' Redis rows (the other servers' modules run their own binaries: left out).
exec nice cargo nextest run --no-fail-fast \
  --test topologies --test redisson --test waiting --test fencing --test rwlock \
  --test semaphore --test multi --test cluster --test sentinel --test servers \
  -E 'not test(/^(valkey|valkey90|redis62|redis74)::/)'
