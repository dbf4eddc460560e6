#!/usr/bin/env bash
# A plugin author outside this repository, as CI checks it: the SDK is
# packaged (`cargo package`, verified) and unpacked elsewhere; the CLI is
# installed with `cargo install --path host/cli`; then, from an empty
# directory with only the installed binary and the unpacked SDK, a new
# rubric is scaffolded, built, checked and used by `score`.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

step() { printf '\n== %s\n' "$*"; }

step "package the SDK with the two crates it depends on"
# Verified in a target directory of its own: cargo treats the packaged crates
# as registry crates, whose builds it never rebuilds for a changed source
# (same name and version), so a kept target directory would verify today's
# SDK against an earlier build of the contract.
CARGO_TARGET_DIR="$work/package-target" cargo package --quiet --locked -p verifine-contract -p verifine-native-abi -p verifine-plugin-api --allow-dirty
mkdir "$work/sdk"
for name in verifine-contract verifine-native-abi verifine-plugin-api; do
    tar xzf "$work/package-target/package/$name-"*.crate -C "$work/sdk"
done
ls "$work/sdk"
# What the package holds must not reach back into the repository.
if grep -rn '\.\./wit\|\.\./\.\./' "$work/sdk"/verifine-plugin-api-*/src >/dev/null; then
    echo "the packaged SDK refers to files outside itself" >&2
    exit 1
fi

step "install the CLI"
# The workspace's target directory keeps this incremental; the installed
# binary is a copy that needs nothing from the repository at run time.
cargo install --quiet --locked --debug --path host/cli --root "$work/install" --target-dir "$root/target"
verifine=$work/install/bin/verifine

step "an outsider's empty directory"
mkdir "$work/outside"
cd "$work/outside"
export CARGO_TARGET_DIR="$work/plugin-target"
"$verifine" --version
"$verifine" plugin new rubric says-done --sdk path "$(ls -d "$work"/sdk/verifine-plugin-api-*)"
cat says-done/Cargo.toml
built=$("$verifine" plugin build says-done --target-dir "$work/plugin-target")
echo "$built"
wasm=$(printf '%s' "$built" | sed -n 's/^ *"path": "\(.*\)",$/\1/p')
[ -f "$wasm" ] || { echo "no component in: $built" >&2; exit 1; }
"$verifine" plugin check "$wasm"
printf '%s\n' \
    '{"id": "a", "prompt": "What is 2 + 2?", "response": "2 + 2 = 4\n#### 4"}' \
    '{"id": "b", "prompt": "What is 2 + 2?", "response": "It is 4."}' > rows.jsonl
"$verifine" score --rubric "$wasm" --input rows.jsonl --output scored.jsonl --summary summary.json
grep -q '"name": *"says-done"' summary.json || { cat summary.json >&2; exit 1; }
[ "$(grep -c '"says-done"' scored.jsonl)" = 2 ] || { cat scored.jsonl >&2; exit 1; }
echo "outsider workflow: ok"
