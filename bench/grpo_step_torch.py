#!/usr/bin/env python3
"""PyTorch reference for one verifine GRPO step: rollout, then update (CPU, f32).

Mirrors host/train/src/{model,sequences,grpo,optim,rollout}.rs op for op,
so that candle's throughput can be reported as a ratio against PyTorch doing
the same arithmetic. Prints one JSON line on stdout. See bench/README.md.
"""
import argparse, json, math, os, statistics, sys, time

import torch

PRESETS = {  # ModelConfig fields; rope_theta 10000 and rms_eps 1e-6 as trainer.rs sets them
    "default": dict(vocab=400, hidden=64, layers=2, heads=4, kv_heads=2, inter=128, max_seq=160),
    "wide": dict(vocab=400, hidden=256, layers=4, heads=8, kv_heads=2, inter=704, max_seq=160),
    # SmolLM2-135M's shapes with random weights (grpo_step.rs's `smollm2` preset).
    "smollm2": dict(vocab=49_152, hidden=576, layers=30, heads=9, kv_heads=3, inter=1536,
                    max_seq=160),
}
ROPE_THETA, RMS_EPS, MASKED = 10_000.0, 1e-6, -1e9
TEMPERATURE, EPSILON, EPSILON_HIGH = 1.0, 0.2, 0.28  # GrpoPhase / GrpoConfig defaults
LR, BETA1, BETA2, ADAM_EPS, WEIGHT_DECAY, MAX_GRAD_NORM = 5e-4, 0.9, 0.999, 1e-8, 0.0, 1.0


def rms_norm(x, weight):
    return x / (x.square().mean(-1, keepdim=True) + RMS_EPS).sqrt() * weight


def silu(x):
    # Written out like model.rs (candle's fused sigmoid has no backward pass).
    return x * (1.0 / ((-x).exp() + 1.0))


def rotate(x, cos, sin):
    """Rotate-half RoPE of [batch, heads, seq, dim]; cos/sin are [seq, dim]."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


def repeat_kv(x, times):
    """[b, kv, s, d] -> [b, kv*times, s, d]; query head h reads kv head h // times."""
    if times == 1:
        return x
    b, kv, s, d = x.shape
    return x.unsqueeze(2).expand(b, kv, times, s, d).reshape(b, kv * times, s, d)


def attention_mask(key_mask, start, new):
    """Additive [b, 1, new, start+new]: causal, padding keys hidden, finite MASKED."""
    total = start + new
    causal = torch.arange(total)[None, :] <= (start + torch.arange(new))[:, None]
    visible = causal[None] & (key_mask[:, None, :] != 0)
    return torch.where(visible, 0.0, MASKED).unsqueeze(1)


class Decoder:
    """model.rs `Decoder`: weights are plain leaf tensors with its names and shapes."""

    def __init__(self, cfg, gen):
        self.cfg = cfg
        h, inter, layers = cfg["hidden"], cfg["inter"], cfg["layers"]
        self.dim = h // cfg["heads"]
        kv = cfg["kv_heads"] * self.dim
        # Same distributions as Decoder::new / reseed (the values differ: torch's
        # generator, not SplitMix64 + Box-Muller); throughput does not depend on them.
        residual = 0.02 / math.sqrt(2 * layers)

        def normal(shape, std=0.02):
            return (torch.randn(shape, generator=gen) * std).requires_grad_()
        ones = lambda: torch.ones(h, requires_grad=True)  # noqa: E731

        self.p = {"embed": normal((cfg["vocab"], h)), "final_norm": ones()}
        for l in range(layers):
            n = f"layers.{l}."
            self.p.update({
                n + "attn_norm": ones(), n + "q": normal((h, h)), n + "k": normal((kv, h)),
                n + "v": normal((kv, h)), n + "o": normal((h, h), residual),
                n + "mlp_norm": ones(), n + "gate": normal((inter, h)),
                n + "up": normal((inter, h)), n + "down": normal((h, inter), residual)})
        # rotary_tables: the power in f64, cast to f32, then 1/x in f32, as model.rs does.
        powers = [ROPE_THETA ** (2 * i / self.dim) for i in range(self.dim // 2)]
        inv_freq = 1.0 / torch.tensor(powers, dtype=torch.float32)
        angles = torch.arange(cfg["max_seq"], dtype=torch.float32)[:, None] * inv_freq[None, :]
        angles = torch.cat([angles, angles], 1)
        self.cos, self.sin = angles.cos(), angles.sin()

    def new_cache(self):
        return {"kv": [None] * self.cfg["layers"], "len": 0}

    def forward(self, ids, key_mask, cache=None):
        """forward_cached: logits [b, new, vocab] for ids after the cached positions."""
        cache = cache if cache is not None else self.new_cache()
        b, new = ids.shape
        start = cache["len"]
        assert start + new <= self.cfg["max_seq"], "sequence exceeds max_seq_len"
        p = self.p
        x = p["embed"][ids]  # index_select on the tied embedding
        mask = attention_mask(key_mask, start, new)
        cos, sin = self.cos[start:start + new], self.sin[start:start + new]
        for l in range(self.cfg["layers"]):
            n = f"layers.{l}."
            x = x + self.attention(n, l, x, mask, cos, sin, cache)
            hn = rms_norm(x, p[n + "mlp_norm"])
            gate, up = hn @ p[n + "gate"].t(), hn @ p[n + "up"].t()
            x = x + (silu(gate) * up) @ p[n + "down"].t()
        cache["len"] += new
        return rms_norm(x, p["final_norm"]) @ p["embed"].t()

    def attention(self, n, l, x, mask, cos, sin, cache):
        p, (b, new, _) = self.p, x.shape
        heads, kv_heads, d = self.cfg["heads"], self.cfg["kv_heads"], self.dim
        hn = rms_norm(x, p[n + "attn_norm"])

        def split(t, count):  # candle makes these contiguous too
            return t.reshape(b, new, count, d).transpose(1, 2).contiguous()

        q = rotate(split(hn @ p[n + "q"].t(), heads), cos, sin)
        k = rotate(split(hn @ p[n + "k"].t(), kv_heads), cos, sin)
        v = split(hn @ p[n + "v"].t(), kv_heads)
        if cache["kv"][l] is not None:  # the cache grows by concatenation, as in candle
            k = torch.cat([cache["kv"][l][0], k], 2)
            v = torch.cat([cache["kv"][l][1], v], 2)
        cache["kv"][l] = (k, v)
        k, v = repeat_kv(k, heads // kv_heads), repeat_kv(v, heads // kv_heads)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d) + mask
        out = torch.softmax(scores, -1) @ v
        return out.transpose(1, 2).reshape(b, new, heads * d) @ p[n + "o"].t()


def token_log_probs(logits, targets):
    return torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


@torch.no_grad()
def rollout(model, prompts, new_tokens, gen, record=False):
    """rollout.rs `generate` without a stop token: prefill, then one token per forward.
    Like candle it makes `new_tokens` forwards, so the last sampled token is never fed."""
    b, width = prompts.shape
    cache, key_mask, inp = model.new_cache(), torch.ones(b, width, dtype=torch.long), prompts
    tokens, log_probs = [], []
    for _ in range(new_tokens):
        last = model.forward(inp, key_mask, cache)[:, -1]  # full logits, as candle computes them
        nxt = torch.multinomial(torch.softmax(last / TEMPERATURE, -1), 1, generator=gen)
        if record:  # sampling log-probs, only for --check
            log_probs.append(torch.log_softmax(last / TEMPERATURE, -1).gather(-1, nxt))
        tokens.append(nxt)
        key_mask = torch.cat([key_mask, torch.ones(b, 1, dtype=torch.long)], 1)
        inp = nxt
    return torch.cat(tokens, 1), (torch.cat(log_probs, 1) if record else None)


def grpo_loss(log_probs, old, mask, advantages):
    """grpo.rs `loss` with beta 0 and loss_type token-mean."""
    a = advantages.unsqueeze(1)
    ratio = (log_probs - old).exp()
    clipped = ratio.clamp(1.0 - EPSILON, 1.0 + EPSILON_HIGH)
    per_token = -torch.minimum(ratio * a, clipped * a)
    return (per_token * mask).sum() / mask.sum().clamp(min=1.0)


def loss_and_grads(model, ids, prompt_len, advantages):
    """sequences.rs `batch` + `log_probs`, then the trainer's loss and backward."""
    inp, targets = ids[:, :-1], ids[:, 1:]  # width = longest - 1, as `batch` builds it
    loss_mask = torch.zeros(targets.shape)
    loss_mask[:, prompt_len - 1:] = 1.0  # targets that are completion tokens
    key_mask = torch.ones(inp.shape, dtype=torch.long)  # no padding
    log_probs = token_log_probs(model.forward(inp, key_mask), targets)
    loss = grpo_loss(log_probs, log_probs.detach(), loss_mask, advantages)
    loss.backward()
    return loss, log_probs.detach()


class AdamW:
    """optim.rs written out rather than torch.optim.AdamW + clip_grad_norm_, to
    keep its clip factor max/(norm + 1e-6), its f64 norm sum in sorted-name order
    and its out-of-place moment updates. Constant lr: warm-up changes no cost."""

    def __init__(self, params):
        self.params = [params[name] for name in sorted(params)]
        self.first = [torch.zeros_like(t) for t in self.params]
        self.second = [torch.zeros_like(t) for t in self.params]
        self.steps = 0

    @torch.no_grad()
    def step(self):
        norm = math.sqrt(sum(float(t.grad.square().sum()) for t in self.params
                             if t.grad is not None))
        if not math.isfinite(norm):
            raise RuntimeError(f"gradient norm is {norm}: refusing to step")
        clip = MAX_GRAD_NORM / (norm + 1e-6) if 0 < MAX_GRAD_NORM < norm else 1.0
        self.steps += 1
        bias1, bias2 = 1.0 - BETA1 ** self.steps, 1.0 - BETA2 ** self.steps
        for i, t in enumerate(self.params):
            if t.grad is None:
                continue
            g = t.grad * clip
            self.first[i] = self.first[i] * BETA1 + g * (1.0 - BETA1)
            self.second[i] = self.second[i] * BETA2 + g.square() * (1.0 - BETA2)
            update = (self.first[i] / bias1) / ((self.second[i] / bias2).sqrt() + ADAM_EPS)
            t.copy_(t * (1.0 - LR * WEIGHT_DECAY) - update * LR)
            t.grad = None  # candle gets a fresh GradStore from every backward
        return norm


def check(model, opt, prompts, new_tokens, advantages, gen):
    """Sanity checks; raises on failure, reports on stderr."""
    completions, sampled = rollout(model, prompts, new_tokens, gen, record=True)
    ids = torch.cat([prompts, completions], 1)
    loss, log_probs = loss_and_grads(model, ids, prompts.shape[1], advantages)
    # Cached, token-by-token decoding must agree with the full training forward.
    diff = (log_probs[:, prompts.shape[1] - 1:] - sampled).abs().max().item()
    assert diff < 1e-5, f"rollout vs update log-probs differ by {diff}"
    # At ratio 1 no clip is active, so the token-mean loss is -mean(advantage).
    assert math.isfinite(loss.item()) and abs(loss.item() + advantages.mean().item()) < 1e-5
    for name, t in model.p.items():
        assert t.grad is not None, f"no gradient for {name}"
        norm = t.grad.norm().item()
        assert 0 < norm < math.inf, f"{name}: gradient norm {norm}"
    grad_norm = opt.step()
    print(json.dumps({"check": "ok", "max_logprob_diff": diff, "loss": loss.item(),
                      "grad_norm": grad_norm, "params": len(model.p)}), file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(PRESETS), default="default")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--layers", type=int, help="override the preset's layer count")
    for flag, default in [("--iters", 5), ("--warmup", 2), ("--batch", 64),
                          ("--prompt-len", 40), ("--completion-len", 48), ("--seed", 0)]:
        ap.add_argument(flag, type=int, default=default)
    ap.add_argument("--check", action="store_true", help="run sanity checks before timing")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = dict(PRESETS[args.model])
    if args.layers is not None:
        cfg["layers"] = args.layers
    gen = torch.Generator().manual_seed(args.seed)
    model = Decoder(cfg, gen)
    opt = AdamW(model.p)
    prompts = torch.randint(cfg["vocab"], (args.batch, args.prompt_len), generator=gen)
    advantages = torch.randn(args.batch, generator=gen)
    if args.check:
        check(model, opt, prompts, args.completion_len, advantages, gen)

    rollout_s, update_s = [], []
    for it in range(args.warmup + args.iters):
        # One GRPO step: sample completions, then update on them.
        t0 = time.perf_counter()
        completions, _ = rollout(model, prompts, args.completion_len, gen)
        t1 = time.perf_counter()
        ids = torch.cat([prompts, completions], 1)
        loss, _ = loss_and_grads(model, ids, args.prompt_len, advantages)
        opt.step()
        loss = loss.item()  # the trainer reads the loss back too
        t2 = time.perf_counter()
        if it >= args.warmup:
            rollout_s.append(t1 - t0)
            update_s.append(t2 - t1)
    r, u = statistics.median(rollout_s), statistics.median(update_s)
    gen_tokens = args.batch * args.completion_len
    seq_tokens = args.batch * (args.prompt_len + args.completion_len)
    print(json.dumps({
        "impl": "pytorch", "model": args.model, "threads": args.threads,
        "rollout_seconds": r, "update_seconds": u,
        "rollout_tokens_per_second": gen_tokens / r,
        "update_tokens_per_second": seq_tokens / u,
        "step_tokens_per_second": gen_tokens / (r + u),
        "torch_version": torch.__version__, "iters": args.iters, "batch": args.batch,
        "prompt_len": args.prompt_len, "completion_len": args.completion_len}))


if __name__ == "__main__":
    main()
