#!/usr/bin/env bash
# The Python package's tests, as CI runs them: build the abi3 wheel with
# maturin, install it into a fresh virtual environment with the test
# requirements (TRL and torch for the GRPOTrainer run, transformers with
# gguf and peft as the reference for pretrained models, aiohttp for
# OpenRLHF's client, selenium for the label page), and run pytest.
# Needs the `verifine` binary (cargo build -p verifine) for the server and
# label-page tests; the browser test needs chromium + chromedriver.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
venv=${VERIFINE_PY_VENV:-$root/target/python-venv}
# No pip cache: the wheels (torch's CUDA libraries are gigabytes) would sit on
# the disk beside the installed copies for the whole CI run.
pip=("$venv/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir)
# A fresh environment each run, unless the caller made it just before
# (`--prepare-only`, then VERIFINE_PY_VENV_READY=1: CI downloads it while
# the Rust build runs).
if [ "${VERIFINE_PY_VENV_READY:-0}" != 1 ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "${pip[@]}" "maturin>=1.9.4,<2" pytest aiohttp selenium
    "${pip[@]}" torch transformers trl datasets accelerate peft gguf
fi
if [ "${1:-}" = --prepare-only ]; then
    exit 0
fi
# The dev profile shares the workspace's compiled dependencies.
# On failure the compiler's errors are said again last, where a log that
# keeps only its head and tail shows them, with the disk's free space.
build_log=$(mktemp)
if ! "$venv/bin/maturin" build --quiet --profile dev -m python/Cargo.toml \
    --out "$root/target/wheels" --interpreter "$venv/bin/python" >"$build_log" 2>&1; then
    cat "$build_log"
    echo "maturin failed; the errors it printed:"
    grep -E '^(error|warning: unused)|No space|signal|Killed' "$build_log" | head -20 || true
    df -h "$root/target"
    exit 1
fi
rm -f "$build_log"
"${pip[@]}" --force-reinstall --no-deps "$(ls -t "$root"/target/wheels/verifine-*.whl | head -1)"
cargo build --quiet -p verifine
cd python/tests
# A passing test's temporary directory goes when it ends: the training tests
# write checkpoints of hundreds of megabytes each.
VERIFINE_BIN=${VERIFINE_BIN:-$root/target/debug/verifine} \
    VERIFINE_TEST_CACHE=${VERIFINE_TEST_CACHE:-$root/target/python-test-cache} \
    "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider -o tmp_path_retention_policy=failed "$@"
