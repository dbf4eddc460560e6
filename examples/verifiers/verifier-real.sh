#!/usr/bin/env bash
# The trained verifier of screen-verifier.toml: SmolLM2-135M-Instruct
# LoRA-tuned by `verifine judge train` into a reference-free YES/NO judge of
# GSM8K solutions, on the labelled model solutions *outside* the screen's
# slice (questions 31-300, four solutions each; a quarter of those
# questions held out for its own report). It lands in
# models/verifier-smollm2, where judges-verifier.toml (screen-verifier.toml)
# looks for it.
#
#   examples/verifiers/verifier-real.sh [extra `verifine judge train` flags]
#
# Default: lr 1e-3, batches of 8, the first 22 of 30 blocks frozen, at most
# 1 200 training seconds (300 steps); the longest solutions need 2 048
# tokens of context.
set -euo pipefail
cd "$(dirname "$0")/../.."
models/fetch.sh smollm2 >/dev/null
cargo build --quiet --release -p verifine
out=runs/verifier-real
mkdir -p "$out"
# The screen reads the first 30 questions (120 tasks): never train on them.
tail -n +31 ../shared/data/gsm8k/model_solutions.jsonl > "$out/labels.jsonl"
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--steps 300 --batch-size 8 --learning-rate 1e-3 \
    --freeze-layers 22 --max-seconds 1200 --max-seq-len 2048)
target/release/verifine judge train \
    --model models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
    --format gsm8k-solutions --labels "$out/labels.jsonl" \
    --run-dir models/verifier-smollm2 --overwrite "${flags[@]}"
cat models/verifier-smollm2/report.md
