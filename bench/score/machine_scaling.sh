#!/usr/bin/env bash
# What two busy threads get from this machine, independent of verifine: the
# same CPU-bound job (sha256 over MIB mebibytes held in memory, default
# 1024, in one process) run alone, then as two processes at once. Two cores
# that do not slow each other do 2.00x the work of one in the same time; the
# ratio printed is the most a two-thread pipeline can reach here. ROUNDS
# rounds alternate the two (default 3).
#
#   bench/score/machine_scaling.sh [MIB] [ROUNDS]
set -euo pipefail
mib=${1:-1024}
rounds=${2:-3}
job="import hashlib; b = bytes(1 << 20); h = hashlib.sha256()
for _ in range($mib): h.update(b)"
seconds() { python3 -c "import time; print(time.monotonic())"; }
for round in $(seq "$rounds"); do
    start=$(seconds); python3 -c "$job"; alone=$(python3 -c "print($(seconds) - $start)")
    start=$(seconds); python3 -c "$job" & python3 -c "$job" & wait
    both=$(python3 -c "print($(seconds) - $start)")
    python3 -c "print(f'round $round: one job {$alone:.2f} s, two at once {$both:.2f} s: two threads do {2 * $alone / $both:.2f}x the work of one')"
done
