#!/usr/bin/env bash
# The local judge against llama-server on the same GGUF model, for
# BENCHMARKS.md: llama-server (4 slots of 4096 tokens, 2 threads) serves
# MODEL; the bench answers the same HealthBench-style batch through it and
# in process.
#
#   bench/llama-server/vs_local.sh MODEL.gguf [CHROOT_DIR] [PORT]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
model="$(realpath "$1")"
root="${2:-/opt/verifine-sid}"
port="${3:-8094}"
"$here/setup.sh" "$root" >/dev/null
"$here/serve.sh" "$model" "$port" "$root" > /tmp/verifine-llama-server.log 2>&1 &
trap 'pkill -f "llama-server -m /models/model.gguf --host 127.0.0.1 --port $port" || true' EXIT
until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do sleep 0.2; done
VERIFINE_LLAMA_URL="http://127.0.0.1:$port/v1" VERIFINE_JUDGE_GGUF="$model" \
    cargo bench -p verifine-judge --features local --bench vs_llama_server
