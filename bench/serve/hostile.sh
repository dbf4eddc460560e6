#!/usr/bin/env bash
# Good clients' p99 with and without hostile ones (oversized batches, slow
# request heads, abandoned full-size batches, a connection flood), and the
# reward server's peak memory (VmHWM) against a stated bound.
#
#   bench/serve/hostile.sh [SECONDS_PER_PHASE] [GOOD_CLIENTS] [RUNS]
#
# The server runs with its default limits in a child process of the load
# generator (host/serve/examples/hostile_load.rs); the anchor is the same
# good clients alone, in the same run. Exits non-zero if a run's server
# peak passes the bound.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-10}"
clients="${2:-4}"
runs="${3:-3}"
cargo build --release -q -p verifine-serve --example hostile_load
for run in $(seq 1 "$runs"); do
  echo "== run $run"
  target/release/examples/hostile_load "$seconds" "$clients"
done
