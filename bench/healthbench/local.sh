#!/usr/bin/env bash
# HealthBench's 30 shared examples graded by a real judge model in this
# process (SmolLM2-135M-Instruct by default), every rubric item a
# YES/NO query and then the default JSON lists of three, for BENCHMARKS.md:
# rows scored, rows failed, calls, device seconds.
#
#   bench/healthbench/local.sh [smollm2|gemma3]
set -euo pipefail
cd "$(dirname "$0")/../.."
model=$(models/fetch.sh "${1:-smollm2}")
out=runs/healthbench-local
mkdir -p "$out"
python3 - "$out/rows.jsonl" <<'PY'
import json, sys
with open("../shared/data/healthbench/examples.jsonl") as f, open(sys.argv[1], "w") as out:
    for line in f:
        row = json.loads(line)
        prompt = "\n".join(f"{t['role']}: {t['content']}" for t in row["prompt"])
        out.write(json.dumps({
            "id": row["prompt_id"], "prompt": prompt,
            "response": "I'm sorry you're dealing with this. Rest, drink water, and see a doctor if it gets worse or you notice anything alarming.",
            "context": {"rubrics": row["rubrics"]},
        }) + "\n")
PY
printf '[judges.judge]\nbackend = { kind = "local-gguf", path = "%s" }\n' "$model" > "$out/judges.toml"
cargo build --release -p verifine
for answer in yes-no json; do
    printf '[rubric]\nplugin = "healthbench"\n[rubric.config]\nanswer = "%s"\n' "$answer" > "$out/$answer.toml"
    /usr/bin/time -f "$answer: %e s wall, %M KiB peak" target/release/verifine score \
        --config "$out/$answer.toml" --judges "$out/judges.toml" \
        --input "$out/rows.jsonl" --output "$out/$answer.jsonl" --summary "$out/$answer-summary.json"
done
