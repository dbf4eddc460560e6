#!/usr/bin/env bash
# Self-verification rollouts (SVR-R1) against plain GRPO at the same budget:
# the same SFT steps, GRPO steps, prompts per step and rollouts per prompt
# (examples/arithmetic/self-verify.toml is train.toml with SVR on), at seeds
# 0, 1 and 2. Prints held-out greedy accuracy of the pure run (PR) and with
# final verification (FV) with 95% Wilson intervals over the held-out
# problems, mean answer turns, wall time, and the across-seed mean with a
# 95% t-interval.
#   bench/svr.sh [OUT_DIR [PLAIN_DIR]]
# PLAIN_DIR: the plain runs are bench/learning.sh's grpo-0/1/2 there (the same
# config and seeds, so the same runs) instead of running them again.
# About 3 (plain) + 4 (SVR) minutes per seed on a 2-core CPU; CI does not run it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/.."
out="${1:-$root/runs/svr}"
plain="${2:-}"
mkdir -p "$out"
cargo build --release -q -p verifine --manifest-path "$root/Cargo.toml"
verifine="$root/target/release/verifine"
for seed in 0 1 2; do
    if [ -n "$plain" ]; then
        rm -rf "$out/plain-$seed"
        ln -s "$(cd "$plain" && pwd)/grpo-$seed" "$out/plain-$seed"
    fi
    for kind in plain svr; do
        [ "$kind" = plain ] && [ -n "$plain" ] && continue
        config="$root/examples/arithmetic/train.toml"
        [ "$kind" = svr ] && config="$root/examples/arithmetic/self-verify.toml"
        sed "s/^seed = .*/seed = $seed/" "$config" > "$out/$kind-$seed.toml"
        "$verifine" train --config "$out/$kind-$seed.toml" --run-dir "$out/$kind-$seed" \
            --overwrite > "$out/$kind-$seed.log" 2>&1
    done
done
python3 "$here/svr_report.py" "$out"
