#!/usr/bin/env bash
# One GRPO step, candle vs PyTorch, same model, batch and lengths, run back to
# back on this machine; prints both JSON lines and the candle/PyTorch ratios.
#   bench/grpo_step.sh [default|wide] [threads]
# CI does not run this (it installs torch into bench/.venv on first use).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
model="${1:-default}"
threads="${2:-$(nproc)}"
candle=$(cd "$here/.." && cargo bench -q -p verifine-train --bench grpo_step -- --model "$model" --iters 5 2>/dev/null | tail -1)
torch=$("$here/run_torch.sh" --model "$model" --threads "$threads" --iters 5 | tail -1)
echo "$candle"
echo "$torch"
python3 - "$candle" "$torch" <<'PY'
import json, sys
c, t = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for key in ["rollout_tokens_per_second", "update_tokens_per_second", "step_tokens_per_second"]:
    print(f"{key}: candle {c[key]:.0f}, pytorch {t[key]:.0f}, candle/pytorch {c[key] / t[key]:.2f}x")
PY
