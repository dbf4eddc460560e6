#!/usr/bin/env bash
# `verifine score` of several builds at one and two threads, alternately,
# in rounds, each round beside the machine's own two-process ceiling
# (machine_scaling.sh), so drift on a noisy machine lands on every build
# alike (BENCHMARKS.md, "Issue 41, items 2 and 3").
#
#   bash bench/score/alternate_builds.sh ROWS ROUNDS NAME=BINARY ...
#
# The input is the one scale.sh generates (runs/score-scale/rows-ROWS.jsonl,
# made first by `bench/score/scale.sh ROWS 1`). Each run's previous output
# is removed first, untimed (renaming over it would time a deletion).
set -euo pipefail
cd "$(dirname "$0")/../.."
rows=${1:?rows}
rounds=${2:?rounds}
shift 2
input=runs/score-scale/rows-$rows.jsonl
[ -s "$input" ] || { echo "no $input: run bench/score/scale.sh $rows 1 first" >&2; exit 1; }
out=runs/score-scale/out.jsonl
for round in $(seq "$rounds"); do
    bash bench/score/machine_scaling.sh 1024 1 | sed "s/^round 1/round $round: machine/"
    for build in "$@"; do
        name=${build%%=*}
        binary=${build#*=}
        declare -A wall
        for threads in 1 2; do
            rm -f "$out"; sync
            log=$(mktemp)
            /usr/bin/time -f "%e %M" -o "$log" "$binary" score --rubric math-answer \
                --input "$input" --output "$out" --threads "$threads" >/dev/null
            read -r seconds peak_kib < "$log"
            rm -f "$log"
            wall[$threads]=$seconds
            python3 -c "print(f'round $round: $name, {$threads} thread(s): {$rows / $seconds:,.0f} rows/s, {$seconds:.2f} s, peak RSS {$peak_kib / 1024:.0f} MiB')"
        done
        python3 -c "print(f'round $round: $name, 2 threads / 1 = {${wall[1]} / ${wall[2]}:.2f}x')"
    done
done
