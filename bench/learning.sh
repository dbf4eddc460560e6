#!/usr/bin/env bash
# The default run at seeds 0, 1 and 2, and the control that spends the same
# training seconds on SFT alone; prints one line per run.
#   bench/learning.sh [OUT_DIR]
# About a minute per run on a 2-core CPU (release build); CI does not run it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/.."
out="${1:-$root/runs/learning}"
mkdir -p "$out"
cargo build --release -q -p verifine --manifest-path "$root/Cargo.toml"
verifine="$root/target/release/verifine"
default="$root/examples/arithmetic/train.toml"
# The control spends the GRPO run's training seconds (SFT and GRPO steps,
# no evaluation) on SFT alone: `[sft] max_seconds` ends it there.
seconds() { python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['phase_seconds']; print(s['sft'] + s['grpo'])" "$1/summary.json"; }
for seed in 0 1 2; do
    python3 "$root/bench/rl/arm_config.py" "$default" "$out/grpo-$seed.toml" "seed=$seed"
    "$verifine" train --config "$out/grpo-$seed.toml" --run-dir "$out/grpo-$seed" --overwrite > "$out/grpo-$seed.log" 2>&1
    python3 "$root/bench/rl/arm_config.py" "$default" "$out/sft-only-$seed.toml" "seed=$seed" \
        grpo.steps=0 sft.steps=1000000 "sft.max_seconds=$(seconds "$out/grpo-$seed")"
    "$verifine" train --config "$out/sft-only-$seed.toml" --run-dir "$out/sft-only-$seed" --overwrite > "$out/sft-only-$seed.log" 2>&1
done
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
print("seed  run       steps  after SFT  pass@k  final  gain    train s  wall s")
for seed in (0, 1, 2):
    for kind in ("grpo", "sft-only"):
        s = json.load(open(f"{out}/{kind}-{seed}/summary.json"))
        gain = s["heldout_accuracy_final"] - s["heldout_accuracy_sft"]
        print(f"{seed:<5} {kind:<9} {s['steps']:<6} {s['heldout_accuracy_sft']:<10.3f} "
              f"{s.get('heldout_pass_at_k_sft') or float('nan'):<7.3f} "
              f"{s['heldout_accuracy_final']:<6.3f} {gain:+.3f} "
              f"{s['phase_seconds']['sft'] + s['phase_seconds']['grpo']:7.1f}  {s['wall_seconds']:6.1f}")
PY
