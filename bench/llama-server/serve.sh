#!/usr/bin/env bash
# Serves a GGUF model with llama-server from the chroot bench/llama-server/setup.sh made.
#
#   bench/llama-server/serve.sh MODEL.gguf [PORT] [CHROOT_DIR]
#
# The model file is copied into the chroot; the server listens on
# 127.0.0.1:PORT (default 8080) with an OpenAI-compatible API under /v1.
# llama-server splits its context among its slots: PARALLEL slots (default
# 4, the judge's default concurrency) of CTX_PER_SLOT tokens each (default
# 4096, room for a HealthBench prompt and its answer), so a full set of
# concurrent queries never runs out of context.
set -euo pipefail

model="$1"
port="${2:-8080}"
root="${3:-/opt/verifine-sid}"
mkdir -p "$root/models"
cp "$model" "$root/models/model.gguf"
parallel="${PARALLEL:-4}"
per_slot="${CTX_PER_SLOT:-4096}"
exec chroot "$root" llama-server -m /models/model.gguf --host 127.0.0.1 --port "$port" \
    --parallel "$parallel" -c "$((parallel * per_slot))"
