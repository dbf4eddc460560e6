#!/usr/bin/env bash
# `verifine agree` on generated files of ROWS rows each (default 1 000 000:
# predictions with a nested score and a response of GSM8K's length, gold
# labels, joined in the opposite order), on one core and on two (taskset:
# parsing and the bootstrap use the cores the process may run on),
# alternating for ROUNDS rounds (default 2). Prints seconds, peak RSS and
# the two-core speed-up of each round. For BENCHMARKS.md.
#
#   bench/score/agree.sh [ROWS] [ROUNDS] [RESAMPLES]
set -euo pipefail
cd "$(dirname "$0")/../.."
rows=${1:-1000000}
rounds=${2:-2}
resamples=${3:-200}
work=runs/agree-scale
mkdir -p "$work"
cargo build --quiet --release -p verifine
pred="$work/pred-$rows.jsonl"
gold="$work/gold-$rows.jsonl"
if [ ! -s "$pred" ] || [ ! -s "$gold" ]; then
    python3 - "$rows" "$pred" "$gold" <<'PY'
import json, random, sys
rows, pred_path, gold_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
solutions = [json.loads(l)["answer"] for l in open("../shared/data/gsm8k/train.jsonl")]
rng = random.Random(0)
labels = [rng.random() < 0.6 for _ in range(rows)]
with open(gold_path, "w") as gold:
    for i, label in enumerate(labels):
        gold.write(json.dumps({"id": f"r{i}", "label": label}) + "\n")
with open(pred_path, "w") as pred:
    for i in reversed(range(rows)):
        score = min(1.0, max(0.0, rng.gauss(0.7 if labels[i] else 0.35, 0.2)))
        pred.write(json.dumps({"id": f"r{i}", "response": solutions[i % len(solutions)],
                               "judge": {"score": round(score, 4)}}) + "\n")
PY
fi
echo "input: $rows rows each, $(du -h "$pred" | cut -f1) + $(du -h "$gold" | cut -f1), $resamples resamples"
for round in $(seq "$rounds"); do
    declare -A wall
    for cores in 0 0,1; do
        log=$(mktemp)
        /usr/bin/time -f "%e %M" -o "$log" taskset -c "$cores" target/release/verifine agree \
            --pred "$pred" --gold "$gold" --pred-field judge.score --threshold 0.5 \
            --resamples "$resamples" --json >/dev/null
        read -r seconds peak_kib < "$log"
        rm -f "$log"
        wall[$cores]=$seconds
        echo "cores $cores: $seconds s wall, peak RSS $((peak_kib / 1024)) MiB"
    done
    python3 -c "print(f'round $round: two cores / one core = {${wall[0]} / ${wall[0,1]}:.2f}x')"
done
