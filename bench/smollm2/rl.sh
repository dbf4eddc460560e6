#!/usr/bin/env bash
# What the reward adds to a real model, against what a user would try
# instead: SmolLM2-135M-Instruct is fine-tuned on the worked solutions of
# the easy rung of the task ladder (one- and two-step problems,
# examples/smollm2/rl.toml), then trained by GRPO on the hard rung
# (three-step problems) with the reference answers only. Held-out: hard-rung
# problems never trained on, greedy.
#
#   bench/smollm2/rl.sh [--seed N] [--arms start,grpo,sft,rft,svr,verifier] RUN_DIR
#
# Arms: start (after SFT) and grpo come from one run (RUN_DIR/grpo); the
# controls start from the same SFT (the same seed replays it step for step)
# and get the GRPO phase's training seconds: sft = SFT continued on the easy
# rung's worked solutions (RUN_DIR/sft), rft = rejection-sampling
# fine-tuning on the hard rung: sample, keep what the same reward plugin
# passes, SFT on it (RUN_DIR/rft). svr = the GRPO arm's recipe with
# self-verification rollouts (SVR-R1, RUN_DIR/svr): the same SFT and GRPO
# steps, half the SFT samples teaching YES/NO verification; reported as
# pure-run (PR) and final-verification (FV) accuracy. verifier = the GRPO
# arm's recipe with a trained verifier (VERIFIER=<verifine judge train
# run>/hf) as the only reward, asked YES/NO through the healthbench rubric
# about one item, never shown the reference; its held-out answers are still
# judged by math-answer with references (RUN_DIR/verifier). Writes RUN_DIR/rl-summary.json and
# RUN_DIR/rl-accuracy.svg and prints the table (bench/rl/rl_report.py).
# An arm whose run directory already has a summary.json is not run again;
# one that stopped half-way is resumed from its newest checkpoint.
# RECIPE=path.toml runs another recipe the same way (the SmolLM2 model is
# then fetched only when the recipe names it).
set -euo pipefail
cd "$(dirname "$0")/../.."
seed=0 arms=start,grpo run=""
while [ $# -gt 0 ]; do
    case "$1" in
    --seed) seed="$2"; shift 2 ;;
    --arms) arms="$2"; shift 2 ;;
    -*) echo "usage: bench/smollm2/rl.sh [--seed N] [--arms start,grpo,sft,rft,svr,verifier] RUN_DIR" >&2; exit 2 ;;
    *) run="$1"; shift ;;
    esac
done
[ -n "$run" ] || { echo "usage: bench/smollm2/rl.sh [--seed N] [--arms start,grpo,sft,rft,svr,verifier] RUN_DIR" >&2; exit 2; }
for arm in ${arms//,/ }; do
    case "$arm" in start | grpo | sft | rft | svr | verifier) ;; *) echo "rl.sh: unknown arm $arm (start, grpo, sft, rft, svr, verifier)" >&2; exit 2 ;; esac
done
recipe="${RECIPE:-examples/smollm2/rl.toml}"
if grep -q 'models/smollm2/' "$recipe"; then models/fetch.sh smollm2 >/dev/null; fi
cargo build -q --release -p verifine
mkdir -p "$run"
config() { python3 bench/rl/arm_config.py "$recipe" "$run/$1.toml" "seed=$seed" "${@:2}"; }
train() {
    local arm=$1
    if [ -f "$run/$arm/summary.json" ]; then return; fi
    if [ -d "$run/$arm/checkpoints" ] && [ -n "$(ls "$run/$arm/checkpoints")" ]; then
        target/release/verifine train --resume "$run/$arm" >"$run/$arm.log" 2>&1
    else
        target/release/verifine train --config "$run/$arm.toml" --run-dir "$run/$arm" --overwrite >"$run/$arm.log" 2>&1
    fi
}
seconds() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["phase_seconds"]; print(eval(sys.argv[2], {}, s))' "$run/grpo/summary.json" "$1"; }

config grpo
train grpo
if [[ ",$arms," == *,sft,* ]]; then
    # SFT goes on past the start's steps for the GRPO phase's seconds.
    config sft grpo.steps=0 sft.steps=1000000 "sft.max_seconds=$(seconds 'sft + grpo')"
    train sft
fi
if [[ ",$arms," == *,rft,* ]]; then
    # The GRPO phase's own settings (learning rate included) with rejection
    # sampling's advantages: at SFT's 5e-4 the one or two answers a step
    # keeps moved Adam a full step each and the policy fell apart
    # (BENCHMARKS.md).
    config rft 'grpo.objective.adv_estimator="rejection-sampling"' grpo.steps=1000000 \
        "grpo.max_seconds=$(seconds grpo)"
    train rft
fi
if [[ ",$arms," == *,svr,* ]]; then
    # Room for answer, verification, trigger and a second answer. Two
    # prompts a step (half GRPO's rollouts): with four the run grew to
    # 24 GB by its 4th GRPO step. With two it still grows past 24 GB by
    # its 16th on a 24 GiB machine (BENCHMARKS.md, "SVR-R1 on SmolLM2").
    config svr self_verification.enabled=true model.max_seq_len=512 grpo.prompts_per_step=2
    train svr
fi
if [[ ",$arms," == *,verifier,* ]]; then
    verifier="${VERIFIER:?the verifier arm needs VERIFIER=<verifine judge train run>/hf}"
    [ -f "$verifier/model.safetensors" ] || { echo "rl.sh: $verifier holds no model.safetensors" >&2; exit 1; }
    printf '[judges.verifier]\nbackend = { kind = "local-safetensors", path = "%s" }\n' \
        "$(realpath "$verifier")" >"$run/judges-verifier.toml"
    # The item `verifine judge train` asks about every labelled answer.
    item="The response's final answer is the correct answer to the problem."
    config verifier \
        'reward.rubric={ plugin = "healthbench", config = { judge = "verifier", batch = 1, answer = "yes-no" } }' \
        reward.evaluator=@reward.rubric \
        reward.reference_free=true \
        "reward.context={ rubrics = [{ criterion = \"$item\", points = 1.0 }] }" \
        "judges.file=\"$(realpath "$run")/judges-verifier.toml\""
    train verifier
fi
python3 bench/rl/rl_report.py "$run" --seed "$seed" --arms "$arms"
