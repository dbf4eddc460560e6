#!/usr/bin/env bash
# The real-model example end to end: fetch SmolLM2-135M-Instruct, evaluate
# the base model on the held-out problems (the example's config with no
# training steps), post-train it (examples/smollm2/train.toml: SFT, then
# GRPO), and report held-out mean reward of base and final with 95%
# intervals (bench/smollm2/report.py).
#   [SEED=N] bench/smollm2/learning.sh [run dir, default runs/smollm2]
set -euo pipefail
cd "$(dirname "$0")/../.."
run="${1:-runs/smollm2}"
models/fetch.sh smollm2 >/dev/null
cargo build -q --release -p verifine
config="$(mktemp --suffix .toml)" base_config="$(mktemp --suffix .toml)"
trap 'rm -f "$config" "$base_config"' EXIT
sed -e "s/^seed = .*/seed = ${SEED:-0}/" examples/smollm2/train.toml >"$config"
sed -e '/^\[sft\]/,/^\[/ s/^steps = .*/steps = 0/' -e '/^\[grpo\]/,/^\[/ s/^steps = .*/steps = 0/' \
    "$config" >"$base_config"
target/release/verifine train --config "$base_config" --run-dir "$run-base" --overwrite >/dev/null
target/release/verifine train --config "$config" --run-dir "$run" --overwrite >/dev/null
python3 bench/smollm2/report.py "$run" --base "$run-base"
