#!/bin/sh
# A deterministic stand-in for an LLM agent that revises the judge's *code*
# in `verifine evolve`'s judge loop (`[agent] code = "crate"`). verifine
# calls it with a request directory holding source/ (the live judge's
# crate: `worked-steps`), live.json, disputed.jsonl and tried.jsonl.
#
# 1st request of a loop: a sub-criterion the library did not have,
#    grounded/only-known-numbers (every operand comes from the problem or an
#    earlier step: the "valid but ungrounded" answers), turned on in the
#    rules. It is off in the crate's default config, so the snapshot cases
#    the crate ships still hold.
# 2nd request: a reworded note that changes every snapshot, handed in
#    without updating the snapshots — verifine must refuse it.
# Then nothing more.
set -eu
dir="$1"
here=$(dirname "$0")
cd "$dir"
asked=$(wc -l < tried.jsonl)
bump() { # the crate in revised/ gets version $1 (only [package]'s version)
    awk -v version="$1" '/^\[/ { section = $0 }
        section == "[package]" && /^version = / { $0 = "version = \"" version "\"" }
        { print }' source/Cargo.toml > revised/Cargo.toml
}
case "$asked" in
0)
    rm -rf revised
    cp -R source revised
    if command -v patch >/dev/null; then
        patch -s -p1 -d revised < "$here/only-known-numbers.patch"
    else
        (cd revised && git apply "$here/only-known-numbers.patch")
    fi
    bump 0.2.0
    sed 's/^\(  *\)"grounded": {$/\1"grounded": {\n\1  "only-known-numbers": 1.0,/' live.json > revised-rules.json
    grep -q only-known-numbers revised-rules.json || {
        echo "live.json has no grounded table to add the check to" >&2
        exit 1
    }
    echo "new sub-criterion grounded/only-known-numbers: steps may use only the problem's numbers and earlier results" > rationale.txt
    ;;
1)
    rm -rf revised
    cp -R source revised
    sed 's/"#### line found"/"marked final line found"/' source/src/criteria.rs > revised/src/criteria.rs
    bump 0.3.0
    echo "clearer note for complete/final-marked (snapshots not updated)" > rationale.txt
    ;;
*)
    echo "nothing more to propose"
    ;;
esac
