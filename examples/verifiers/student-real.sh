#!/usr/bin/env bash
# The student judge of screen-real.toml: Gemma 3 270M (the larger of the
# two real judges; in the screen the two agree with the labels equally)
# grades GSM8K model solutions outside the screen's slice with the screen's
# item, and `verifine judge distill` learns its verdicts. The student lands
# in models/student-gemma3, where judges-real.toml looks for it.
#
#   examples/verifiers/student-real.sh [QUESTIONS]
#
# QUESTIONS (default 100): how many questions after the screen's first 30
# the teacher grades (four solutions each).
set -euo pipefail
cd "$(dirname "$0")/../.."
questions=${1:-100}
models/fetch.sh gemma3 >/dev/null
cargo build --quiet --release -p verifine
verifine=target/release/verifine
out=runs/student-real
mkdir -p "$out"
item=$(sed -n 's/^pub const GSM8K_ITEM: &str = "\(.*\)";$/\1/p' host/cli/src/commands/verifiers/run.rs)
[ -n "$item" ] || { echo "the screen's item text was not found" >&2; exit 1; }
python3 - "$item" "$questions" "$out/rows.jsonl" <<'PY'
import json, sys
item, questions, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open("../shared/data/gsm8k/model_solutions.jsonl") as f, open(path, "w") as out:
    for line, text in enumerate(f, start=1):
        if not 30 < line <= 30 + questions:
            continue
        row = json.loads(text)
        for model, s in sorted(row.items()):
            if not isinstance(s, dict) or "solution" not in s:
                continue
            out.write(json.dumps({
                "id": f"{line}-{model}", "prompt": row["question"], "response": s["solution"],
                "context": {"rubrics": [{"criterion": item, "points": 1.0}]},
            }) + "\n")
PY
cat > "$out/judges.toml" <<TOML
[judges.gemma3]
backend = { kind = "local-gguf", path = "$PWD/models/gemma3/gemma-3-270m-q4_k_m.gguf" }
TOML
printf '[rubric]\nplugin = "healthbench"\n[rubric.config]\njudge = "gemma3"\nanswer = "yes-no"\n' > "$out/teacher.toml"
"$verifine" score --config "$out/teacher.toml" --judges "$out/judges.toml" \
    --input "$out/rows.jsonl" --output "$out/teacher.jsonl" --summary "$out/teacher-summary.json"
"$verifine" judge distill --rows "$out/rows.jsonl" --teacher "$out/teacher.jsonl" \
    --teacher-summary "$out/teacher-summary.json" --rubric healthbench \
    --run-dir models/student-gemma3
