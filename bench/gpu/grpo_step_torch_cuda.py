#!/usr/bin/env python3
"""bench/grpo_step_torch.py on a CUDA device, unchanged op for op.

The reference is imported as it is; this wrapper only
- makes CUDA the default device, so every tensor it creates lives there, and
  gives it a CUDA generator (torch.Generator() would be a CPU one);
- synchronizes at the end of each rollout, so the rollout time covers its
  kernels (the update already ends in loss.item(), a synchronizing read);
- adds the `gpu` model preset of bench/gpu/grpo-bench (hidden 1024, 8 layers,
  16 heads, 4 kv heads, MLP 2816) and `smollm2` (SmolLM2-135M's shapes:
  vocabulary 49 152, hidden 576, 30 layers, 9 heads, 3 kv heads, MLP 1 536;
  random weights), with `--layers N` to take fewer;
- `--dtype bf16` runs every forward pass under autocast to bfloat16 with the
  f32 parameters and optimizer kept (the mixed precision verifine's
  `compute_dtype = "bf16"` uses: bf16 copies, f32 master weights);
- adds "device", "dtype", "tf32" and "gpu" to the JSON line.

f32 by default with TF32 off (PyTorch's default for matmuls, set
explicitly), as candle's f32 cuBLAS GEMMs are. Arguments are those of
grpo_step_torch.py, plus `--device cuda|cpu` (default cuda; cpu only to
dry-run this wrapper), `--dtype f32|bf16` and `--layers N`.
"""
import contextlib, io, json, os, sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import grpo_step_torch as ref  # noqa: E402

ref.PRESETS["gpu"] = dict(vocab=400, hidden=1024, layers=8, heads=16, kv_heads=4,
                          inter=2816, max_seq=160)
ref.PRESETS["smollm2"] = dict(vocab=49152, hidden=576, layers=30, heads=9, kv_heads=3,
                              inter=1536, max_seq=160)


def take_option(argv, flag, default, choices=None):
    """Removes `flag X` from argv (the reference does not know it); returns X."""
    if flag not in argv:
        return default
    i = argv.index(flag)
    value = argv[i + 1]
    del argv[i:i + 2]
    if choices is not None and value not in choices:
        sys.exit(f"{flag} {value}: one of {', '.join(choices)}")
    return value


def main():
    device = take_option(sys.argv, "--device", "cuda", ("cuda", "cpu"))
    dtype = take_option(sys.argv, "--dtype", "f32", ("f32", "bf16"))
    layers = take_option(sys.argv, "--layers", None)
    model = sys.argv[sys.argv.index("--model") + 1] if "--model" in sys.argv else "default"
    if layers is not None:
        ref.PRESETS[model] = dict(ref.PRESETS[model], layers=int(layers))
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
    precision = (torch.autocast(device_type=device, dtype=torch.bfloat16)
                 if dtype == "bf16" else contextlib.nullcontext())
    with contextlib.redirect_stdout(captured), precision:
        ref.main()
    line = json.loads(captured.getvalue().strip().splitlines()[-1])
    if layers is not None:
        line["model"] = f"{line['model']} ({layers} layers)"
    line.update(device=device, dtype=dtype, tf32=False,
                gpu=torch.cuda.get_device_name(0) if device == "cuda" else None)
    print(json.dumps(line))


if __name__ == "__main__":
    main()
