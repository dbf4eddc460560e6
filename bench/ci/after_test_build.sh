#!/usr/bin/env bash
# Times what CI builds after its test build (the Python extension, the CLI,
# the installed CLI), with CI's settings, and counts the crates each one
# compiles: what the workspace-hack is for (BENCHMARKS.md, "The
# workspace-hack: dropped or kept by cargo-hakari"). Run it in a clone that
# .ci/run has built (target/python-venv must exist); it builds the test
# build first if the tree changed. Prints one line per build.
set -uo pipefail
cd "$(dirname "$0")/../.."
export CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=line-tables-only RUSTFLAGS="-D warnings"
RUSTC_WORKSPACE_WRAPPER=$(rustup which clippy-driver)
export RUSTC_WORKSPACE_WRAPPER
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
timed() {
    local name=$1
    shift
    local start
    start=$(date +%s.%N)
    "$@" >"$scratch/log" 2>&1
    local status=$?
    local seconds
    seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    echo "$name: exit $status, $seconds s, $(grep -c '^ *Compiling' "$scratch/log") crates compiled"
}
timed "test build" cargo build --workspace --all-targets
timed "Python extension" target/python-venv/bin/maturin build --profile dev -m python/Cargo.toml \
    --out "$scratch/wheels" --interpreter target/python-venv/bin/python
timed "cargo build -p verifine" cargo build -p verifine
timed "cargo install" cargo install --locked --debug --path host/cli --root "$scratch/install" \
    --target-dir target
