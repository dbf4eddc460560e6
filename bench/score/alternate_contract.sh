#!/usr/bin/env bash
# Runs math_answer bench binaries of several steps alternately, in rounds,
# so a noisy machine's drift lands on every step alike (BENCHMARKS.md,
# "math-answer through contract 0.3's packed batch").
#
#   bash bench/score/alternate_contract.sh ROUNDS STEP=BINARY[@COMMIT] ...
#
# BINARY is a built `math_answer` bench executable (`cargo bench -p
# verifine-runtime --features native --bench math_answer --no-run` prints
# its path). The bench builds the boundary-only plugin from the working tree
# when it starts, so a step built from another commit names it (@COMMIT) and
# that commit is checked out while it runs; the tree's branch is restored at
# the end. Needs a clean working tree when any step names a commit.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:?rounds}
shift
branch=$(git branch --show-current)
trap 'git checkout -q "$branch"' EXIT
for round in $(seq "$rounds"); do
    for step in "$@"; do
        name=${step%%=*}
        spec=${step#*=}
        binary=${spec%%@*}
        commit=$branch
        [ "$spec" != "$binary" ] && commit=${spec#*@}
        git checkout -q "$commit"
        echo "== round $round: $name"
        (cd host/runtime && "$binary" --bench --noplot --warm-up-time 2 --measurement-time 4 2>&1 \
            | grep -E '^math_answer|time:' | grep -v '%')
    done
done
