#!/bin/sh
# A deterministic stand-in for an LLM agent, for the hot-swap walkthrough and
# its integration test. verifine calls it with a revision directory holding
# source/ (the live `answer-mentioned` rubric), disputed.jsonl and
# INSTRUCTIONS.md. It looks at the disputed cases; when rewarded responses end
# on a wrong final answer, it closes the loophole the way a person would: only
# the number after the last `####` counts. It writes revised/ (with the
# version bumped) and leaves building and gating to verifine.
set -eu
dir="$1"
cd "$dir"
if ! grep -q '"label":false' disputed.jsonl; then
    echo "no rewarded wrong answers among the disputed cases: nothing to fix"
    exit 0
fi
rm -rf revised
cp -R source revised
awk '
    /verifine-agent:begin accepted/ { print; print "    final_answer(response).as_deref() == Some(answer)"; skip = 1; next }
    /verifine-agent:end accepted/ { skip = 0 }
    !skip { print }
' source/src/lib.rs > revised/src/lib.rs
sed 's/^version = "0.1.0"$/version = "0.2.0"/' source/Cargo.toml > revised/Cargo.toml
echo "revised: only the final #### answer counts (version 0.2.0)"
