#!/usr/bin/env bash
# The default run at seeds 0, 1 and 2, and the control that spends the same
# wall time on SFT alone; prints one line per run.
#   bench/learning.sh [OUT_DIR]
# About 3 minutes per run on a 2-core CPU (release build); CI does not run it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/.."
out="${1:-$root/runs/learning}"
mkdir -p "$out"
cargo build --release -q -p verifine --manifest-path "$root/Cargo.toml"
verifine="$root/target/release/verifine"
default="$root/examples/arithmetic/train.toml"
sft_steps=$(sed -n '/^\[sft\]/,/^\[/s/^steps = //p' "$default")
grpo_steps=$(sed -n '/^\[grpo\]/,/^\[/s/^steps = //p' "$default")
# The control spends the GRPO run's wall time on SFT instead: its SFT steps
# are calibrated from a first SFT-only run (one GRPO step is kept, since a run
# evaluates after SFT when GRPO starts).
sft_only() { # seed steps name
    awk -v sft="$2" -v seed="$1" '
        /^seed = / { print "seed = " seed; next }
        /^\[/ { section = $0 }
        section == "[sft]" && /^steps = / { print "steps = " sft; next }
        section == "[grpo]" && /^steps = / { print "steps = 1"; next }
        { print }' "$default" > "$out/$3.toml"
    "$verifine" train --config "$out/$3.toml" --run-dir "$out/$3" --overwrite > "$out/$3.log" 2>&1
}
wall() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['wall_seconds'])" "$1/summary.json"; }
for seed in 0 1 2; do
    sed "s/^seed = .*/seed = $seed/" "$default" > "$out/grpo-$seed.toml"
    "$verifine" train --config "$out/grpo-$seed.toml" --run-dir "$out/grpo-$seed" --overwrite > "$out/grpo-$seed.log" 2>&1
    calibration=$((sft_steps + grpo_steps))
    sft_only "$seed" "$calibration" "calibrate-$seed"
    steps=$(python3 -c "print(int($calibration * $(wall "$out/grpo-$seed") / $(wall "$out/calibrate-$seed")))")
    sft_only "$seed" "$steps" "sft-only-$seed"
done
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
print("seed  run       steps  after SFT  pass@k  final  gain    wall s")
for seed in (0, 1, 2):
    for kind in ("grpo", "sft-only"):
        s = json.load(open(f"{out}/{kind}-{seed}/summary.json"))
        gain = s["heldout_accuracy_final"] - s["heldout_accuracy_sft"]
        print(f"{seed:<5} {kind:<9} {s['steps']:<6} {s['heldout_accuracy_sft']:<10.3f} "
              f"{s.get('heldout_pass_at_k_sft') or float('nan'):<7.3f} "
              f"{s['heldout_accuracy_final']:<6.3f} {gain:+.3f} {s['wall_seconds']:7.1f}")
PY
