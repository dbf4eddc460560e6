#!/usr/bin/env bash
# Co-evolution on a real policy with a trained verifier as the only judge.
# 1. The SFT policy's own greedy answers to 600 three-step problems of the
#    ladder, at another seed than the loop's (other problems than its
#    held-out set), labelled by math-answer against their references.
# 2. `verifine judge train`: SmolLM2-135M-Instruct LoRA-tuned on them into a
#    reference-free YES/NO verifier (the initial judge, r0).
# 3. `verifine evolve --config examples/evolve/smollm2-verifier.toml`:
#    SmolLM2 as the policy, the verifier as its reward; judge revisions are
#    the verifier retrained on the accumulated labels.
#
#   bench/evolve/smollm2_verifier.sh [RUN_DIR]     (default runs/evolve-verifier)
#
# examples/evolve/judges-verifier.toml names RUN_DIR/initial/hf for the
# default RUN_DIR; another RUN_DIR gets its own judges file. Each step is
# skipped when its output exists (rerun to resume).
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-runs/evolve-verifier}"
models/fetch.sh smollm2 >/dev/null
cargo build -q --release -p verifine
bin=target/release/verifine
mkdir -p "$out"
start=$SECONDS

if [ ! -f "$out/answers/heldout_answers.jsonl" ]; then
    python3 bench/rl/arm_config.py examples/smollm2/rl.toml "$out/answers.toml" \
        seed=1 heldout_problems=600 grpo.steps=0
    "$bin" train --config "$out/answers.toml" --run-dir "$out/answers" --overwrite \
        >"$out/answers.log" 2>&1
fi
echo "[$((SECONDS - start)) s] answers: $(wc -l <"$out/answers/heldout_answers.jsonl") labelled"

if [ ! -f "$out/initial/report.json" ]; then
    "$bin" judge train --model models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
        --format answers --labels "$out/answers/heldout_answers.jsonl" \
        --run-dir "$out/initial" --overwrite \
        ${INITIAL_FLAGS:---steps 400 --batch-size 8 --learning-rate 1e-3 --freeze-layers 15 --max-seconds 900} \
        2>"$out/initial.log"
fi
echo "[$((SECONDS - start)) s] initial verifier:"
cat "$out/initial/report.md"

config=examples/evolve/smollm2-verifier.toml
if [ "$out" != runs/evolve-verifier ]; then
    judges="$out/judges-verifier.toml"
    sed "s#../../runs/evolve-verifier/initial/hf#$(realpath "$out")/initial/hf#" \
        examples/evolve/judges-verifier.toml >"$judges"
    sed "s#^judges = .*#judges = \"$judges\"#" "$config" >"$out/evolve.toml"
    config="$out/evolve.toml"
fi
if [ -f "$out/loop/state.json" ]; then
    "$bin" evolve --resume "$out/loop" 2>"$out/loop.log"
else
    "$bin" evolve --config "$config" --run-dir "$out/loop" 2>"$out/loop.log"
fi
echo "[$((SECONDS - start)) s] evolve:"
cat "$out/loop/report.md"
