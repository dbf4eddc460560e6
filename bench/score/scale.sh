#!/usr/bin/env bash
# `verifine score` on a generated input of ROWS rows (default 1 000 000:
# GSM8K training problems and answers repeated under fresh ids, the
# reference the answer's number) with `math-answer`, at 1 and 2 threads,
# alternating for ROUNDS rounds (default 2). Prints rows/s, peak RSS, the
# 2-thread speed-up of each round, and each run's thread seconds per stage
# (from the summary). For BENCHMARKS.md.
#
#   bench/score/scale.sh [ROWS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
rows=${1:-1000000}
rounds=${2:-2}
work=runs/score-scale
mkdir -p "$work"
cargo build --quiet --release -p verifine
input="$work/rows-$rows.jsonl"
if [ ! -s "$input" ]; then
    python3 - "$rows" "$input" <<'PY'
import json, sys
rows, path = int(sys.argv[1]), sys.argv[2]
problems = [json.loads(l) for l in open("../shared/data/gsm8k/train.jsonl")]
with open(path, "w") as out:
    for i in range(rows):
        p = problems[i % len(problems)]
        answer = p["answer"].rsplit("####", 1)[-1].strip()
        out.write(json.dumps({"id": i, "prompt": p["question"], "response": p["answer"],
                              "reference": answer}) + "\n")
PY
fi
echo "input: $rows rows, $(du -h "$input" | cut -f1)"
for round in $(seq "$rounds"); do
    declare -A wall
    for threads in 1 2; do
        log=$(mktemp)
        # The previous run's output goes first, untimed: renaming over it
        # would make each run pay for deleting hundreds of MB (50 ms here).
        rm -f "$work/out.jsonl"; sync
        /usr/bin/time -f "%e %M" -o "$log" target/release/verifine score --rubric math-answer \
            --input "$input" --output "$work/out.jsonl" --threads "$threads" \
            --summary "$work/summary.json" >/dev/null
        read -r seconds peak_kib < "$log"
        rm -f "$log"
        wall[$threads]=$seconds
        python3 - "$work/summary.json" "$threads" "$seconds" "$peak_kib" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
threads, seconds, peak = int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
stages = s["stage_seconds"]
total = sum(stages.values())
shares = "  ".join(f"{k} {v / total:.0%}" for k, v in stages.items())
print(f"threads {threads}: {s['n'] / seconds:,.0f} rows/s, {seconds:.2f} s wall, "
      f"peak RSS {peak / 1024:.0f} MiB; thread seconds {total:.2f}: {shares}")
PY
    done
    python3 -c "print(f'round $round: 2 threads / 1 thread = {${wall[1]} / ${wall[2]}:.2f}x')"
done
