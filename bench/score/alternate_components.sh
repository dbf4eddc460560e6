#!/usr/bin/env bash
# Times several builds of the guest side (the math-answer and boundary-only
# components) with one math_answer bench binary, alternately, in rounds, so
# a noisy machine's drift lands on every step alike and the native anchor
# is measured in the same run as each step (BENCHMARKS.md, "math-answer:
# the guest side's own costs").
#
#   bash bench/score/alternate_components.sh ROUNDS STEP=DIR ...
#
# DIR holds math_answer.wasm and boundary_only.wasm (e.g. copied from
# target/wasm-plugins/wasm32-wasip2/release after building a step); the
# bench binary is the one `cargo bench -p verifine-runtime --features native
# --bench math_answer --no-run` builds from this tree.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:?rounds}
shift
binary=$(cargo bench -p verifine-runtime --features native --bench math_answer --no-run 2>&1 \
    | sed -n 's/.*Executable.*(\(.*\))/\1/p' | tail -1)
for round in $(seq "$rounds"); do
    for step in "$@"; do
        name=${step%%=*}
        dir=${step#*=}
        echo "== round $round: $name"
        (cd host/runtime && MATH_ANSWER_COMPONENT="$dir/math_answer.wasm" \
            BOUNDARY_COMPONENT="$dir/boundary_only.wasm" \
            "$OLDPWD/$binary" --bench --noplot --warm-up-time 2 --measurement-time 4 2>&1 \
            | grep -E '^math_answer|time:' | grep -v '%' | paste - - | awk '{print $1, $5, $6}')
    done
done
