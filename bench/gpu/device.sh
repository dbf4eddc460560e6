#!/usr/bin/env bash
# verifine's CUDA checks on the device machine (an H200), from the repo root,
# with bench/gpu/out/ (made by bench/gpu/build.sh) carried along:
#
#   bash bench/gpu/device.sh
#
# 1. nvidia-smi, nvcc, python/torch versions;
# 2. the CUDA libraries the binaries link (libcublas.so.13, libcublasLt.so.13,
#    libcurand.so.10, libnvrtc.so.13, libcudart.so.13; libcuda.so.1 is the
#    driver's) looked up in the device's PyTorch install (site-packages/
#    nvidia/*/lib, torch/lib), then /usr/local/cuda*, then anywhere, and put
#    on LD_LIBRARY_PATH; `ldd` must find all of them;
# 3. `verifine --version`;
# 4. the CUDA smoke: `verifine train --config bench/gpu/smoke.toml` (SFT,
#    GRPO with the math-answer plugin, evaluation, a checkpoint) in f32;
# 5. the GRPO-step bench, candle (bench/gpu/out/grpo-bench-cuda) against
#    PyTorch (bench/gpu/grpo_step_torch_cuda.py) on the same GPU, f32, models
#    gpu (hidden 1024, 8 layers), default and wide; ratios in bench-summary.txt;
# 6. the GRPO-step bench on SmolLM2-135M's shapes (random weights) at bf16,
#    candle's compute_dtype against PyTorch autocast, same GPU;
# 7. the smoke again with compute_dtype = "bf16".
#
# Everything is written under $OUT (default bench/gpu/device-out): log.txt,
# parts.tsv (part, status, seconds), nvidia-smi.txt, env.txt, ldd-*.txt,
# smoke-*/ (the run directories and logs), bench.jsonl, bench-summary.txt.
# The whole script stays within DEVICE_BUDGET_S seconds (default 420): every
# part has a timeout, and a part that no longer fits is skipped and says so.
#
# DRY_RUN=1 needs no GPU: it runs parts 1-3 and the benches on the CPU with
# one tiny step (the libcuda.so link stub of bench/gpu/.venv stands in for the
# driver, so only --device cpu code may run), and skips the smokes.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root" || exit 1
gpu="$root/bench/gpu"
OUT="${OUT:-$gpu/device-out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
budget="${DEVICE_BUDGET_S:-420}"
dry="${DRY_RUN:-0}"
work="$(mktemp -d "${TMPDIR:-/tmp}/verifine-gpu.XXXXXX")"
exec > >(tee -a "$OUT/log.txt") 2>&1
printf 'part\tstatus\tseconds\n' >"$OUT/parts.tsv"

say() { printf '\n== [%3ds] %s\n' "$SECONDS" "$*"; }
left() { echo $((budget - SECONDS)); }

# run_part NAME CAP CMD...: runs CMD under `timeout min(CAP, time left - 5)`,
# skips it when fewer than 15 s are left; records status and seconds.
run_part() {
    local name="$1" cap="$2" t0=$SECONDS rc status
    shift 2
    local limit=$(($(left) - 5))
    [ "$limit" -gt "$cap" ] && limit="$cap"
    if [ "$limit" -lt 15 ]; then
        say "$name: skipped, $(left) s of the budget left"
        printf '%s\tskipped\t0\n' "$name" >>"$OUT/parts.tsv"
        return 0
    fi
    say "$name (timeout ${limit}s)"
    # timeout signals its whole process group, so the binaries a part starts go too.
    timeout -k 5 "$limit" bash -c '"$@"' "$name" "$@"
    rc=$?
    case $rc in
        0) status=ok ;;
        124 | 137) status="timeout(${limit}s)" ;;
        *) status="failed(rc=$rc)" ;;
    esac
    printf '%s\t%s\t%d\n' "$name" "$status" $((SECONDS - t0)) >>"$OUT/parts.tsv"
    say "$name: $status in $((SECONDS - t0)) s"
    return $rc
}

# --- 1. the machine ---------------------------------------------------------
say "machine"
{
    date -u +%FT%TZ
    uname -a
    nvidia-smi 2>&1 || echo "nvidia-smi: not available"
    nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.max.sm \
        --format=csv 2>&1 || true
    command -v nvcc >/dev/null && nvcc --version | tail -2 || echo "nvcc: not on PATH"
} | tee "$OUT/nvidia-smi.txt"

# A python whose torch imports (for the library lookup and the reference).
python=""
for p in "${PYTHON:-}" python3 python /opt/conda/bin/python /usr/local/bin/python3 "$root/bench/.venv/bin/python"; do
    [ -n "$p" ] && command -v "$p" >/dev/null 2>&1 || continue
    if "$p" -c 'import torch' >/dev/null 2>&1; then python="$(command -v "$p")"; break; fi
done
{
    echo "python with torch: ${python:-none}"
    [ -n "$python" ] && "$python" -c 'import torch, sys
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda,
      "available", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")'
    cat "$gpu/out/build-info.txt" 2>/dev/null
} | tee "$OUT/env.txt"

# --- 2. the binaries and their libraries ------------------------------------
say "binaries and libraries"
bin="$gpu/out"
for b in verifine grpo-bench-cuda; do
    if [ ! -x "$bin/$b" ] && [ -f "$bin/$b.xz" ]; then
        mkdir -p "$work/bin"
        xz -dc "$bin/$b.xz" >"$work/bin/$b" 2>/dev/null \
            || "${python:-python3}" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$bin/$b.xz" "$work/bin/$b"
        chmod +x "$work/bin/$b"
    fi
done
verifine="$bin/verifine"; [ -x "$verifine" ] || verifine="$work/bin/verifine"
bench="$bin/grpo-bench-cuda"; [ -x "$bench" ] || bench="$work/bin/grpo-bench-cuda"
ls -la "$bin" "$work/bin" 2>/dev/null

needed=(libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libnvrtc.so.13 libcudart.so.13)
candidates=()
if [ -n "$python" ]; then
    # The PyTorch install's library folders: site-packages/nvidia/**/lib, torch/lib.
    mapfile -t candidates < <("$python" - <<'PY'
import os, site, sys
roots = set(site.getsitepackages() + [site.getusersitepackages()])
try:
    import torch
    roots.add(os.path.dirname(os.path.dirname(torch.__file__)))
    print(os.path.join(os.path.dirname(torch.__file__), "lib"))
except Exception:
    pass
for root in sorted(roots):
    top = os.path.join(root, "nvidia")
    for folder, dirs, files in os.walk(top):
        if folder[len(top):].count(os.sep) > 3:
            dirs[:] = []
        if any(".so" in f for f in files):
            print(folder)
PY
)
fi
candidates+=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64
             /usr/local/cuda-13*/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu /usr/lib64)
libpath=()
add_dir() { local d; for d in "${libpath[@]}"; do [ "$d" = "$1" ] && return; done; libpath+=("$1"); }
for so in "${needed[@]}"; do
    found=""
    for d in "${candidates[@]}"; do
        if [ -e "$d/$so" ]; then found="$d"; break; fi
    done
    if [ -z "$found" ]; then
        hit="$(timeout 60 find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o -name "$so" -print -quit 2>/dev/null)"
        [ -n "$hit" ] && found="$(dirname "$hit")"
    fi
    if [ -z "$found" ] && [ -f "$bin/lib/$so.xz" ]; then  # a copy build.sh may carry
        mkdir -p "$work/lib"
        xz -dc "$bin/lib/$so.xz" >"$work/lib/$so" && found="$work/lib"
    fi
    echo "$so: ${found:-NOT FOUND}"
done | tee "$OUT/libraries.txt"
while read -r so dir; do
    case "$dir" in /*) add_dir "$dir" ;; esac
done <"$OUT/libraries.txt"
if [ "$dry" = 1 ]; then
    # No driver here: the link stub answers for libcuda.so.1 (only CPU code runs).
    mkdir -p "$work/stub"
    ln -sf "$gpu/.venv/cuda-link/lib/stubs/libcuda.so" "$work/stub/libcuda.so.1"
    add_dir "$work/stub"
fi
# PyTorch finds its own libraries (RUNPATH, which LD_LIBRARY_PATH would
# override): it runs with the environment's LD_LIBRARY_PATH as it was.
torch_ld="${LD_LIBRARY_PATH:-}"
LD_LIBRARY_PATH="$(IFS=:; echo "${libpath[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" | tee -a "$OUT/env.txt"
for b in "$verifine" "$bench"; do
    [ -x "$b" ] || { echo "missing $b"; continue; }
    ldd "$b" | tee "$OUT/ldd-$(basename "$b").txt" | grep -E 'cu|nvrtc|not found'
done
if grep -q 'not found' "$OUT"/ldd-*.txt 2>/dev/null; then
    echo "!! a library is missing: the runs below will fail to start"
fi

# --- 3. the CLI binary starts -----------------------------------------------
run_part version 20 "$verifine" --version

# --- 4-6. smoke and benches -------------------------------------------------
smoke() {  # smoke DTYPE
    local dir="$OUT/smoke-$1" config="$OUT/smoke-$1.toml"
    sed "s/^compute_dtype = .*/compute_dtype = \"$1\"/" "$gpu/smoke.toml" >"$config"
    rm -rf "$dir"
    RUST_LOG="${RUST_LOG:-info}" "$verifine" train --config "$config" --run-dir "$dir" \
        >"$OUT/smoke-$1.stdout" 2>"$OUT/smoke-$1.stderr"
    local rc=$?
    tail -25 "$OUT/smoke-$1.stdout"; tail -15 "$OUT/smoke-$1.stderr"
    # the weights stay behind (small, but not needed)
    find "$dir" -name '*.safetensors' -delete 2>/dev/null
    return $rc
}

bench_pair() {  # bench_pair MODEL [DTYPE [LAYERS]]: candle, then PyTorch, one JSON line each
    local model="$1" dtype="${2:-f32}" device=cuda iters=5 extra=()
    [ -n "${3:-}" ] && extra+=(--layers "$3")
    if [ "$dry" = 1 ]; then device=cpu; iters=1; extra+=(--warmup 0 --batch 4); fi
    "$bench" --device "$device" --model "$model" --dtype "$dtype" --iters "$iters" "${extra[@]}" \
        | tee -a "$OUT/bench.jsonl" || return 1
    if [ -z "$python" ]; then echo "no python with torch: no PyTorch line"; return 1; fi
    LD_LIBRARY_PATH="$torch_ld" "$python" "$gpu/grpo_step_torch_cuda.py" --device "$device" --model "$model" \
        --dtype "$dtype" --iters "$iters" "${extra[@]}" --threads "$(nproc)" | tee -a "$OUT/bench.jsonl"
}

export OUT gpu verifine bench python dry torch_ld
export -f smoke bench_pair
if [ "$dry" = 1 ]; then
    printf 'smoke-f32\tskipped(dry run)\t0\n' >>"$OUT/parts.tsv"
    run_part bench-default 120 bench_pair default
    run_part bench-smollm2-bf16 120 bench_pair smollm2 bf16 2
else
    run_part smoke-f32 150 smoke f32
    run_part bench-gpu 150 bench_pair gpu
    run_part bench-default 90 bench_pair default
    run_part bench-wide 90 bench_pair wide
    # SmolLM2-135M's shapes (random weights: no model file travels), the
    # CPU comparison's model at bf16 on the GPU, both sides mixed precision.
    run_part bench-smollm2-bf16 150 bench_pair smollm2 bf16
    run_part smoke-bf16 120 smoke bf16
fi

# --- summary ----------------------------------------------------------------
say "summary"
"${python:-python3}" - "$OUT/bench.jsonl" <<'PY' | tee "$OUT/bench-summary.txt"
import json, sys
rows = {}
try:
    for line in open(sys.argv[1]):
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            rows[(f'{r["model"]} {r.get("dtype", "f32")}', r["impl"])] = r
except FileNotFoundError:
    pass
for model in sorted({m for m, _ in rows}):
    c, t = rows.get((model, "candle")), rows.get((model, "pytorch"))
    for key in ["rollout_tokens_per_second", "update_tokens_per_second", "step_tokens_per_second"]:
        cs = f"{c[key]:.0f}" if c else "-"
        ts = f"{t[key]:.0f}" if t else "-"
        ratio = f"{c[key] / t[key]:.2f}x" if c and t else "-"
        print(f"{model} {key}: candle {cs}, pytorch {ts}, candle/pytorch {ratio}")
PY
cat "$OUT/parts.tsv"
echo "total: $SECONDS s of a $budget s budget"
rm -rf "$work"
