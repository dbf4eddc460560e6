#!/usr/bin/env bash
# Runs the tests against llama.cpp's llama-server (host/judge/tests/all/llama_server.rs):
# installs the server into a sid chroot if needed (root, a Debian mirror),
# the `gguf` Python package, then the test.
#
#   bench/llama-server/test.sh [CHROOT_DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="${1:-/opt/verifine-sid}"
"$here/setup.sh" "$root"
python3 -c "import gguf" 2>/dev/null || pip install --quiet gguf numpy
VERIFINE_LLAMA_ROOT="$root" cargo test -p verifine-judge --features local --test all llama_server -- --ignored --nocapture
