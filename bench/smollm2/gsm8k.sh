#!/usr/bin/env bash
# The arms of a bench/smollm2/rl.sh run on problems of another kind: GSM8K's
# test split (default) or fresh GSM-Symbolic variants (`--set symbolic`:
# variants of 97 templates, drawn with the run's seed; no arm has seen any).
# Greedy answers to the first N problems (default all 1 319 of GSM8K test,
# 400 variants), judged by the same math-answer plugin (correctness only),
# through the chat template with the ladder's instruction.
#
#   bench/smollm2/gsm8k.sh [--set gsm8k|symbolic] [--problems N] RL_RUN_DIR [ARM ...]
#
# Arms: base (the recipe's pretrained model, untouched), start (replays the
# run's SFT: same seed, same steps), grpo, sft, rft, svr (the checkpoint the
# arm's run wrote, ARM/hf). Each arm's answers and summary go to
# RL_RUN_DIR/SET-ARM/; a table is printed. A run directory holding only a
# grpo.toml evaluates any model that way: write one with
# bench/rl/arm_config.py and model.from="...", then ask for the base arm.
set -euo pipefail
cd "$(dirname "$0")/../.."
usage="usage: bench/smollm2/gsm8k.sh [--set gsm8k|symbolic] [--problems N] RL_RUN_DIR [ARM ...]"
set_name=gsm8k problems=""
while [ $# -gt 0 ]; do
    case "$1" in
    --set) set_name="$2"; shift 2 ;;
    --problems) problems="$2"; shift 2 ;;
    -*) echo "$usage" >&2; exit 2 ;;
    *) break ;;
    esac
done
run="${1:?$usage}"
shift
arms=("$@")
[ ${#arms[@]} -gt 0 ] || arms=(start grpo)
instruction='instruction="Solve it step by step. End with the final answer on its own line as: #### <number>"'
case "$set_name" in
gsm8k)
    data=../shared/data/gsm8k
    [ -f "$data/test.jsonl" ] || { echo "gsm8k.sh: $data/test.jsonl is missing" >&2; exit 1; }
    problems="${problems:-1319}"
    task="task={dataset={train=\"$data/train.jsonl\", test=\"$data/test.jsonl\"}, $instruction}"
    ;;
symbolic)
    models/fetch.sh gsm-symbolic >/dev/null
    problems="${problems:-400}"
    task="task={symbolic={dir=\"models/gsm-symbolic/eng\", heldout_templates=97}, $instruction}"
    ;;
*) echo "$usage" >&2; exit 2 ;;
esac
[ -f "$run/grpo.toml" ] || { echo "gsm8k.sh: $run/grpo.toml is missing (run bench/smollm2/rl.sh first)" >&2; exit 1; }
cargo build -q --release -p verifine
common=("heldout_problems=$problems" train_problems=64 "$task" grpo.steps=0 grpo.max_new_tokens=320
    model.max_seq_len=640 eval_every=0 pass_at_k=0 checkpoints.every=0)
for arm in "${arms[@]}"; do
    out="$run/$set_name-$arm"
    [ -f "$out/summary.json" ] && continue
    case "$arm" in
    base) python3 bench/rl/arm_config.py "$run/grpo.toml" "$out.toml" "${common[@]}" sft.steps=0 ;;
    start) python3 bench/rl/arm_config.py "$run/grpo.toml" "$out.toml" "${common[@]}" ;;
    grpo | sft | rft | svr)
        [ -f "$run/$arm/hf/config.json" ] || { echo "gsm8k.sh: $run/$arm/hf is missing (run rl.sh with --arms ...,$arm)" >&2; exit 1; }
        python3 bench/rl/arm_config.py "$run/$arm.toml" "$out.toml" "${common[@]}" sft.steps=0 \
            self_verification.enabled=false "model.from=\"$run/$arm/hf\"" ;;
    *) echo "gsm8k.sh: unknown arm $arm (base, start, grpo, sft, rft, svr)" >&2; exit 2 ;;
    esac
    target/release/verifine train --config "$out.toml" --run-dir "$out" --overwrite >"$out.log" 2>&1 \
        || { echo "gsm8k.sh: the $arm arm failed; see $out.log" >&2; tail -5 "$out.log" >&2; exit 1; }
done
echo "| arm | $set_name accuracy (greedy) | 95% CI | problems | wall s |"
echo "|---|---|---|---|---|"
for arm in "${arms[@]}"; do
    python3 - "$run/$set_name-$arm" "$arm" <<'PY'
import json, math, sys
out, arm = sys.argv[1], sys.argv[2]
s = json.load(open(out + "/summary.json"))
rows = [json.loads(l) for l in open(out + "/heldout_answers.jsonl") if l.strip()]
n, k = len(rows), sum(1 for r in rows if r["correct"])
z = 1.959964
c = (k / n + z * z / (2 * n)) / (1 + z * z / n)
h = z * math.sqrt(k / n * (1 - k / n) / n + z * z / (4 * n * n)) / (1 + z * z / n)
print(f"| {arm} | {k / n:.3f} | [{c - h:.3f}, {c + h:.3f}] | {n} | {s['wall_seconds']:.0f} |")
PY
done
