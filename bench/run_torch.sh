#!/usr/bin/env bash
# Runs the PyTorch reference benchmark, creating bench/.venv with torch from
# PyPI on first use. Arguments are passed to grpo_step_torch.py unchanged.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
# The default PyPI wheel (the CPU-only index is not reachable everywhere);
# on Linux it also pulls CUDA libraries, which the CPU benchmark never loads.
if ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
    "$venv/bin/pip" install --quiet --upgrade pip
    "$venv/bin/pip" install --quiet torch numpy  # numpy only silences a warning
fi
exec "$venv/bin/python" "$here/grpo_step_torch.py" "$@"
