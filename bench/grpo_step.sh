#!/usr/bin/env bash
# One GRPO step, candle vs PyTorch, same model, batch and lengths, run back to
# back on this machine at the same thread count; prints both JSON lines and
# the candle/PyTorch ratios.
#   bench/grpo_step.sh [default|wide|smollm2] [threads] [--layers N] [--batch N] [--iters N]
# Extra flags go to both sides (`smollm2` with `--layers 4 --batch 16` fits
# this 2-core machine's patience). CI does not run this (it installs torch
# into bench/.venv on first use; VERIFINE_TORCH_PYTHON names another Python).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
model="${1:-default}"
threads="${2:-$(nproc)}"
shift $(( $# < 2 ? $# : 2 ))
extra=("$@")
[[ " ${extra[*]} " == *" --iters "* ]] || extra+=(--iters 5)
candle=$(cd "$here/.." && RAYON_NUM_THREADS="$threads" cargo bench -q -p verifine-train --bench grpo_step -- \
    --model "$model" "${extra[@]}" 2>/dev/null | tail -1)
if [ -n "${VERIFINE_TORCH_PYTHON:-}" ]; then
    torch=$("$VERIFINE_TORCH_PYTHON" "$here/grpo_step_torch.py" --model "$model" --threads "$threads" "${extra[@]}" | tail -1)
else
    torch=$("$here/run_torch.sh" --model "$model" --threads "$threads" "${extra[@]}" | tail -1)
fi
echo "$candle"
echo "$torch"
python3 - "$candle" "$torch" <<'PY'
import json, sys
c, t = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for key in ["rollout_tokens_per_second", "update_tokens_per_second", "step_tokens_per_second"]:
    print(f"{key}: candle {c[key]:.0f}, pytorch {t[key]:.0f}, candle/pytorch {c[key] / t[key]:.2f}x")
PY
