#!/usr/bin/env bash
# The arms of a bench/smollm2/rl.sh run on GSM8K's test split: greedy
# answers to the first N problems (default all 1 319), judged by the same
# math-answer plugin (correctness only), through the chat template with the
# ladder's instruction.
#
#   bench/smollm2/gsm8k.sh [--problems N] RL_RUN_DIR [ARM ...]   (arms: start grpo sft rft)
#
# start replays the run's SFT (same seed, same steps) and evaluates it; the
# other arms evaluate the checkpoint their run wrote (ARM/hf). Each arm's
# answers and summary go to RL_RUN_DIR/gsm8k-ARM/; a table is printed.
set -euo pipefail
cd "$(dirname "$0")/../.."
problems=1319
if [ "${1:-}" = --problems ]; then problems="$2"; shift 2; fi
run="${1:?usage: bench/smollm2/gsm8k.sh [--problems N] RL_RUN_DIR [ARM ...]}"
shift
arms=("$@")
[ ${#arms[@]} -gt 0 ] || arms=(start grpo)
data=../shared/data/gsm8k
[ -f "$data/test.jsonl" ] || { echo "gsm8k.sh: $data/test.jsonl is missing" >&2; exit 1; }
cargo build -q --release -p verifine
common=("heldout_problems=$problems" "task={dataset={train=\"$data/train.jsonl\", test=\"$data/test.jsonl\"}, instruction=\"Solve it step by step. End with the final answer on its own line as: #### <number>\"}"
    grpo.steps=0 grpo.max_new_tokens=320 model.max_seq_len=640 eval_every=0 pass_at_k=0 checkpoints.every=0)
for arm in "${arms[@]}"; do
    out="$run/gsm8k-$arm"
    [ -f "$out/summary.json" ] && continue
    case "$arm" in
    start) python3 bench/rl/arm_config.py "$run/grpo.toml" "$out.toml" "${common[@]}" ;;
    grpo | sft | rft)
        [ -f "$run/$arm/hf/config.json" ] || { echo "gsm8k.sh: $run/$arm/hf is missing (run rl.sh with --arms ...,$arm)" >&2; exit 1; }
        python3 bench/rl/arm_config.py "$run/$arm.toml" "$out.toml" "${common[@]}" sft.steps=0 "model.from=\"$run/$arm/hf\"" ;;
    *) echo "gsm8k.sh: unknown arm $arm" >&2; exit 2 ;;
    esac
    target/release/verifine train --config "$out.toml" --run-dir "$out" --overwrite >"$out.log" 2>&1
done
echo "| arm | GSM8K test accuracy (greedy) | problems | wall s |"
echo "|---|---|---|---|"
for arm in "${arms[@]}"; do
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1]+"/summary.json")); print(f"| {sys.argv[2]} | {s[\"heldout_accuracy_final\"]:.3f} | {sys.argv[3]} | {s[\"wall_seconds\"]:.0f} |")' "$run/gsm8k-$arm" "$arm" "$problems"
done
