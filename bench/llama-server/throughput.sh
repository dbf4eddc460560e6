#!/usr/bin/env bash
# Judge throughput through the HTTP backend against llama-server serving the
# tiny model (4 slots, 2 threads), for BENCHMARKS.md.
#
#   bench/llama-server/throughput.sh [CHROOT_DIR] [PORT]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="${1:-/opt/verifine-sid}"
port="${2:-8093}"
"$here/setup.sh" "$root"
python3 -c "import gguf" 2>/dev/null || pip install --quiet gguf numpy
python3 "$here/tiny_gguf.py" /tmp/verifine-tiny.gguf
"$here/serve.sh" /tmp/verifine-tiny.gguf "$port" "$root" > /tmp/verifine-llama-server.log 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; pkill -f "llama-server -m /models/model.gguf --host 127.0.0.1 --port $port" || true' EXIT
until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do sleep 0.2; done
VERIFINE_JUDGE_URL="http://127.0.0.1:$port/v1" cargo bench -p verifine-judge --bench http_throughput
