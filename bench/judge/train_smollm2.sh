#!/usr/bin/env bash
# A reference-free verifier trained from the SmolLM2 policy's own
# solutions: each held-out answer of every arm of the given
# bench/smollm2/rl.sh runs (labelled by math-answer against its reference)
# is a labelled row; verifine judge train LoRA-tunes SmolLM2-135M-Instruct
# on them, questions held out, and reports held-out accuracy, balanced
# accuracy and ECE against the untrained model and the base rate.
#
#   bench/judge/train_smollm2.sh OUT_DIR RL_RUN_DIR [RL_RUN_DIR ...]
#
# Extra `verifine judge train` flags go in JUDGE_TRAIN_FLAGS (default: 300
# steps of 8, lr 2e-4, at most 1 800 training seconds).
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:?usage: bench/judge/train_smollm2.sh OUT_DIR RL_RUN_DIR [RL_RUN_DIR ...]}"
shift
[ $# -gt 0 ] || { echo "usage: bench/judge/train_smollm2.sh OUT_DIR RL_RUN_DIR [RL_RUN_DIR ...]" >&2; exit 2; }
models/fetch.sh smollm2 >/dev/null
labels=()
for run in "$@"; do
    # The arms' answers on the ladder (not gsm8k.sh's other problem sets).
    for file in "$run"/{grpo,sft,rft,svr}/heldout_answers.jsonl "$run"/grpo/heldout_answers_sft.jsonl; do
        [ -f "$file" ] && labels+=(--labels "$file")
    done
done
[ ${#labels[@]} -gt 0 ] || { echo "train_smollm2.sh: no heldout_answers*.jsonl under $*" >&2; exit 1; }
cargo build -q --release -p verifine
# shellcheck disable=SC2086
target/release/verifine judge train --model models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
    --format answers "${labels[@]}" --run-dir "$out" --overwrite \
    ${JUDGE_TRAIN_FLAGS:---steps 300 --batch-size 8 --learning-rate 2e-4 --max-seconds 1800}
cat "$out/report.md"
