#!/usr/bin/env bash
# The real-model example end to end: fetch SmolLM2-135M-Instruct, post-train
# it by GRPO (examples/smollm2/train.toml), and report held-out mean reward
# before and after with 95% intervals (bench/smollm2/report.py).
#   bench/smollm2/learning.sh [run dir, default runs/smollm2]
set -euo pipefail
cd "$(dirname "$0")/../.."
run="${1:-runs/smollm2}"
models/fetch.sh smollm2 >/dev/null
cargo run -q --release -- train --config examples/smollm2/train.toml --run-dir "$run" --overwrite >/dev/null
python3 bench/smollm2/report.py "$run"
