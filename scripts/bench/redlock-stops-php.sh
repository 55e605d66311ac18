#!/usr/bin/env bash
# PHP workers on three Redlock masters while each master is stopped in turn (BENCHMARKS.md,
# "Redlock with a master stopped"): starts the masters with the test kit, runs
# bench/php/redlock_stops.php against them, stops them.
#   bash scripts/bench/redlock-stops-php.sh [ARGS for redlock_stops.php: --workers=8 --stop=4 --gap=4]
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --quiet --lib
cargo build --quiet -p redislock-testkit --bin redislock-testkit
export REDISLOCK_LIB=${REDISLOCK_LIB:-$PWD/target/release/libredislock.so}
coproc KIT { target/debug/redislock-testkit redlock 3; }
url= pids=()
while read -r line <&"${KIT[0]}"; do
  case $line in
    URL*) url=${line#URL } ;;
    READY) break ;;
  esac
done
for i in 0 1 2; do
  echo "pid node $i" >&"${KIT[1]}"
  read -r line <&"${KIT[0]}"
  pids+=("${line#PID }")
done
php -d ffi.enable=1 bench/php/redlock_stops.php --url="$url" --pids="$(IFS=,; echo "${pids[*]}")" "$@"
exec {KIT[1]}>&-
wait
