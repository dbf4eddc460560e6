#!/usr/bin/env python3
"""bench/grpo_step_torch.py on a CUDA device, unchanged op for op.

The reference is imported as it is; this wrapper only
- makes CUDA the default device, so every tensor it creates lives there, and
  gives it a CUDA generator (torch.Generator() would be a CPU one);
- synchronizes at the end of each rollout, so the rollout time covers its
  kernels (the update already ends in loss.item(), a synchronizing read);
- adds the `gpu` model preset of bench/gpu/grpo-bench (hidden 1024, 8 layers,
  16 heads, 4 kv heads, MLP 2816);
- adds "device", "dtype", "tf32" and "gpu" to the JSON line.

f32 throughout with TF32 off (PyTorch's default for matmuls, set explicitly),
as candle's f32 cuBLAS GEMMs are. Arguments are those of grpo_step_torch.py,
plus `--device cuda|cpu` (default cuda; cpu only to dry-run this wrapper).
"""
import contextlib, io, json, os, sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import grpo_step_torch as ref  # noqa: E402

ref.PRESETS["gpu"] = dict(vocab=400, hidden=1024, layers=8, heads=16, kv_heads=4,
                          inter=2816, max_seq=160)


def take_device(argv):
    """Removes `--device X` from argv (the reference does not know it); returns X."""
    if "--device" not in argv:
        return "cuda"
    i = argv.index("--device")
    device = argv[i + 1]
    del argv[i:i + 2]
    if device not in ("cuda", "cpu"):
        sys.exit(f"--device {device}: cuda or cpu")
    return device


def main():
    device = take_device(sys.argv)
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("grpo_step_torch_cuda.py: torch sees no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_default_device(device)
    plain_generator = torch.Generator
    torch.Generator = lambda *args, **kwargs: plain_generator(device=device)
    plain_rollout = ref.rollout

    def rollout(*args, **kwargs):
        result = plain_rollout(*args, **kwargs)
        if device == "cuda":
            torch.cuda.synchronize()
        return result

    ref.rollout = rollout
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        ref.main()
    line = json.loads(captured.getvalue().strip().splitlines()[-1])
    line.update(device=device, dtype="f32", tf32=False,
                gpu=torch.cuda.get_device_name(0) if device == "cuda" else None)
    print(json.dumps(line))


if __name__ == "__main__":
    main()
