#!/usr/bin/env bash
# Builds the CUDA `verifine` binary (and the GPU GRPO-step bench) for an H200
# (sm_90) on a machine with no GPU and no system CUDA, from PyPI's CUDA 13.0
# wheels. Idempotent; run from anywhere:
#
#   bench/gpu/build.sh
#
# Outputs in bench/gpu/out/: verifine and grpo-bench-cuda (stripped), an xz
# copy of each (what a device run carries: 64 MiB at most), needed.txt (the
# shared libraries verifine links) and build-info.txt. Cargo builds into
# target/cuda, never target/release. Env knobs: JOBS (default 2),
# CUDA_COMPUTE_CAP (default 90), SKIP_BENCH=1 (only the CLI).
# bench/gpu/README.md says what is needed and why.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="$here/.venv"
out="$here/out"
jobs="${JOBS:-2}"
started=$(date +%s)

# CUDA 13.0 on purpose: a 580-series driver is CUDA 13.0, and it cannot JIT
# PTX newer than its own version (nvcc 13.1+ emits PTX ISA 9.1+). cudarc
# 0.19.10 knows up to 13.4, so 13.5 would not build anyway.
pins=(
    nvidia-cuda-nvcc==13.0.88
    nvidia-nvvm==13.0.88
    nvidia-cuda-crt==13.0.88
    nvidia-cuda-runtime==13.0.96
    nvidia-cuda-nvrtc==13.0.88
    nvidia-cuda-cccl==13.0.85
    nvidia-cublas==13.1.0.3
    nvidia-curand==10.4.0.35
)

log() { printf '[build.sh %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# 1. The CUDA toolchain: a venv holding the pinned wheels (about 1.2 GB).
if [ ! -x "$venv/bin/python" ]; then
    log "creating $venv"
    python3 -m venv "$venv"
fi
if [ "$(cat "$venv/.pins" 2>/dev/null)" != "${pins[*]}" ]; then
    log "installing ${pins[*]}"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "${pins[@]}"
    echo "${pins[*]}" >"$venv/.pins"
fi
cu="$(echo "$venv"/lib/python3*/site-packages/nvidia/cu13)"
[ -x "$cu/bin/nvcc" ] || { echo "no nvcc at $cu/bin/nvcc" >&2; exit 1; }

# 2. A link root for cudarc's build script (dynamic linking): it passes
#    `-L $CUDA_ROOT/lib -L $CUDA_ROOT/lib/stubs` and `-lcuda -lnvrtc -lcurand
#    -lcublas -lcublasLt`; candle-kernels adds `-lcudart`. The wheels only ship
#    versioned sonames, so unversioned symlinks go here.
link="$venv/cuda-link"
mkdir -p "$link/lib/stubs"
for so in cublas cublasLt curand nvrtc cudart; do
    for real in "$cu/lib/lib$so.so."*; do
        ln -sfn "$real" "$link/lib/lib$so.so"
        break
    done
done
# No wheel ships the driver's link stub (libcuda.so comes with the driver).
# Link against one made here instead: every entry point that CUDA 13.0's
# cuda.h declares (under their versioned names, the legacy
# ones, and the per-thread-stream ones), as empty functions in a library whose
# soname is the driver's, libcuda.so.1. At run time the real driver's
# libcuda.so.1 is loaded instead; nothing from this file ever runs.
if [ ! -f "$link/lib/stubs/libcuda.so" ] || [ "$cu/include/cuda.h" -nt "$link/lib/stubs/libcuda.so" ]; then
    log "generating the libcuda.so link stub from $cu/include/cuda.h"
    for defs in "" "-D__CUDA_API_VERSION_INTERNAL" "-DCUDA_API_PER_THREAD_DEFAULT_STREAM"; do
        # shellcheck disable=SC2086
        cc -E -P -x c $defs -I"$cu/include" "$cu/include/cuda.h"
    done | grep -oE '\bcu[A-Z][A-Za-z0-9_]*[[:space:]]*\(' | tr -d ' (' | sort -u \
        | sed 's/.*/void &(void) {}/' >"$link/lib/stubs/libcuda_stub.c"
    cc -shared -fPIC -O0 -Wl,-soname,libcuda.so.1 \
        -o "$link/lib/stubs/libcuda.so" "$link/lib/stubs/libcuda_stub.c"
    log "stub exports $(wc -l <"$link/lib/stubs/libcuda_stub.c") symbols"
fi

# 3. The environment the build scripts read.
unset CUDA_HOME CUDA_PATH CUDA_TOOLKIT_ROOT_DIR CUDNN_LIB
export CUDA_ROOT="$link"               # cudarc: link search roots
export CUDARC_CUDA_VERSION=13000       # cudarc: bindings for CUDA 13.0 (else parsed from `nvcc --version`)
export NVCC="$cu/bin/nvcc"             # cudaforge (candle-kernels): the compiler
export PATH="$cu/bin:$PATH"            # cudarc's fallback `nvcc --version`
export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"  # sm_90a kernels; no nvidia-smi here
export CUDAFORGE_THREADS="$jobs"       # candle-kernels' parallel nvcc jobs
# nvcc leaves the fatbins of candle-kernels' libmoe.a (GGUF/MoE kernels as
# sm_90a SASS, linked whole) uncompressed: 33 MB of a 80 MB binary. Compressed
# (the driver inflates them when it loads them) they take about 6 MB.
nvcc_flags="-Xfatbin=-compress-all"
export NVCC_APPEND_FLAGS="$nvcc_flags${NVCC_APPEND_FLAGS:+ $NVCC_APPEND_FLAGS}"
export CARGO_TARGET_DIR="$root/target/cuda"

# 4. The Rust toolchain of rust-toolchain.toml and the plugins' target.
cd "$root"
rustup show active-toolchain >/dev/null 2>&1 || rustup toolchain install
rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2

# 5. The build. candle-kernels' build script reruns only when CUDA_COMPUTE_CAP,
#    NVCC or NVCC_CCBIN change, and caches its objects by source and its own
#    arguments: when the nvcc flags above changed, its outputs go first.
stamp="$CARGO_TARGET_DIR/.verifine-nvcc-flags"
if [ -d "$CARGO_TARGET_DIR/release" ] && [ "$(cat "$stamp" 2>/dev/null)" != "$NVCC_APPEND_FLAGS" ]; then
    log "nvcc flags changed to '$NVCC_APPEND_FLAGS': cleaning candle-kernels"
    cargo clean --release -p candle-kernels
fi
mkdir -p "$CARGO_TARGET_DIR"
echo "$NVCC_APPEND_FLAGS" >"$stamp"
log "cargo build --release -p verifine --features cuda (-j $jobs, CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
nice -n 10 cargo build --release -j "$jobs" -p verifine --features cuda
cli_done=$(date +%s)

mkdir -p "$out"
install -m 755 "$CARGO_TARGET_DIR/release/verifine" "$out/verifine"
strip "$out/verifine"

# The GRPO-step bench (host/train/benches/grpo_step.rs) built for CUDA. The
# CLI package is selected too, so cargo resolves candle's features as for the
# build above and reuses it (built alone, the bench recompiles candle and its
# kernels).
if [ "${SKIP_BENCH:-0}" != 1 ]; then
    log "cargo bench --no-run (grpo_step, features cuda)"
    bench=$(nice -n 10 cargo bench --no-run -j "$jobs" -p verifine -p verifine-train \
        --features verifine/cuda,verifine-train/cuda --bench grpo_step \
        --message-format=json-render-diagnostics |
        python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "grpo_step" and m.get("executable"):
        print(m["executable"])')
    install -m 755 "$bench" "$out/grpo-bench-cuda"
    strip "$out/grpo-bench-cuda"
fi
finished=$(date +%s)

# What a device run carries (64 MiB at most): the binaries, xz-compressed
# (device.sh inflates them), or the plain ones.
for bin in "$out/verifine" "$out/grpo-bench-cuda"; do
    [ -f "$bin" ] || continue
    nice -n 10 xz -6 -T1 -kf "$bin"
done
readelf -d "$out/verifine" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' >"$out/needed.txt"
mib() { echo "$(( ($1 + 524288) / 1048576 )) MiB"; }
{
    echo "built: $(date -u +%FT%TZ) from $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$root" diff --quiet 2>/dev/null || echo ' (dirty)')"
    echo "cuda wheels: ${pins[*]}"
    echo "CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP CUDARC_CUDA_VERSION=$CUDARC_CUDA_VERSION NVCC_APPEND_FLAGS=$NVCC_APPEND_FLAGS"
    echo "nvcc: $("$NVCC" --version | tail -2 | head -1)"
    echo "seconds: cli $((cli_done - started)), total $((finished - started))"
    for bin in "$out/verifine" "$out/grpo-bench-cuda"; do
        [ -f "$bin" ] || continue
        size=$(stat -c %s "$bin") packed=$(stat -c %s "$bin.xz")
        echo "$(basename "$bin"): $size bytes ($(mib "$size")), xz $packed bytes ($(mib "$packed"))"
        echo "  needs: $(readelf -d "$bin" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')"
        echo "  glibc: $(objdump -T "$bin" | grep -oE 'GLIBC_[0-9.]+' | sort -uV | tail -1), libstdc++: $(objdump -T "$bin" | grep -oE 'GLIBCXX_[0-9.]+' | sort -uV | tail -1)"
    done
} | tee "$out/build-info.txt"
size=$(stat -c %s "$out/verifine")
if [ "$size" -ge $((64 * 1024 * 1024)) ]; then
    echo "bench/gpu/out/verifine is $size bytes, not under 64 MiB" >&2
    exit 1
fi
