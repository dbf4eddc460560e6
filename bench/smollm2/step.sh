#!/usr/bin/env bash
# One GRPO step on SmolLM2-135M-Instruct, verifine (candle) against TRL's
# GRPOTrainer (PyTorch), same model, batch, lengths and LoRA, run back to
# back on this machine; prints both JSON lines and the verifine/TRL ratios.
#   bench/smollm2/step.sh [threads] [lora rank, 0 = full fine-tune]
# Needs a Python with torch, transformers, trl, peft, gguf (VERIFINE_PYTHON).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/../.."
threads="${1:-$(nproc)}"
lora="${2:-16}"
python="${VERIFINE_PYTHON:-python3}"
gguf=$("$root/models/fetch.sh" smollm2)
hf="$root/target/smollm2-hf"
[ -f "$hf/model.safetensors" ] || "$python" "$here/convert.py" "$gguf" "$hf" >/dev/null
shape=(--batch 32 --prompt 40 --completion 64 --iters 3 --warmup 1)
lora_flag=(); [ "$lora" != 0 ] && lora_flag=(--lora "$lora")
candle=$(cd "$root" && RAYON_NUM_THREADS="$threads" cargo bench -q -p verifine-train --bench grpo_step -- \
    --from "$gguf" "${lora_flag[@]}" "${shape[@]}" 2>/dev/null | tail -1)
trl=$("$python" "$here/trl_step.py" --model "$hf" --lora "$lora" --threads "$threads" --generations 8 "${shape[@]}" 2>/dev/null | tail -1)
echo "$candle"
echo "$trl"
python3 - "$candle" "$trl" <<'PY'
import json, sys
c, t = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for key in ["rollout_seconds", "update_seconds"]:
    print(f"{key}: verifine {c[key]:.2f}, trl {t[key]:.2f}")
for key in ["rollout_tokens_per_second", "update_tokens_per_second", "step_tokens_per_second"]:
    print(f"{key}: verifine {c[key]:.1f}, trl {t[key]:.1f}, verifine/trl {c[key] / t[key]:.2f}x")
PY
