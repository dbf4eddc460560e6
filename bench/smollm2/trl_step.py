"""One GRPO step of TRL's GRPOTrainer on a pretrained model, timed the way
verifine's `grpo_step` bench times its own (rollout = generation, update =
the rest of the step), printed as one JSON line of the same shape.

Prompts are the same length in tokens, completions are forced to full
length (min_new_tokens = max_new_tokens) and rewards are random, as in the
verifine bench, so both sides do the same work.

  python bench/smollm2/trl_step.py --model DIR [--batch 32] [--generations 8]
      [--prompt 40] [--completion 64] [--iters 3] [--warmup 1] [--threads 2]
      [--lora R]
"""

import argparse
import json
import random
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--generations", type=int, default=8)
parser.add_argument("--prompt", type=int, default=40)
parser.add_argument("--completion", type=int, default=64)
parser.add_argument("--iters", type=int, default=3)
parser.add_argument("--warmup", type=int, default=1)
parser.add_argument("--threads", type=int, default=2)
parser.add_argument("--lora", type=int, default=0)
args = parser.parse_args()
torch.set_num_threads(args.threads)

import transformers  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers.generation.utils import GenerationMixin  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

tokenizer = transformers.AutoTokenizer.from_pretrained(args.model)
model = transformers.AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)

# A prompt of exactly `--prompt` tokens: single-token words.
word = " apple"
assert len(tokenizer(word, add_special_tokens=False)["input_ids"]) == 1
prompts = [word * args.prompt for _ in range(args.batch // args.generations)]
assert all(len(tokenizer(p, add_special_tokens=False)["input_ids"]) == args.prompt for p in prompts)
dataset = Dataset.from_dict({"prompt": prompts * 1000})

generation_seconds = []
original_generate = GenerationMixin.generate


def timed_generate(self, *a, **kw):
    started = time.perf_counter()
    out = original_generate(self, *a, **kw)
    generation_seconds.append(time.perf_counter() - started)
    return out


GenerationMixin.generate = timed_generate

step_seconds = []


class StepTimer(transformers.TrainerCallback):
    def on_step_begin(self, *_, **__):
        self.started = time.perf_counter()

    def on_step_end(self, *_, **__):
        step_seconds.append(time.perf_counter() - self.started)


def random_reward(completions, **_):
    return [random.random() for _ in completions]


peft_config = None
if args.lora:
    from peft import LoraConfig

    peft_config = LoraConfig(
        r=args.lora,
        lora_alpha=2 * args.lora,
        lora_dropout=0.0,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        task_type="CAUSAL_LM",
    )

config = GRPOConfig(
    output_dir="/tmp/verifine-trl-step",
    per_device_train_batch_size=args.batch,
    num_generations=args.generations,
    max_completion_length=args.completion,
    generation_kwargs={"min_new_tokens": args.completion},
    temperature=1.0,
    learning_rate=5e-4,
    beta=0.0,
    num_iterations=1,
    max_steps=args.warmup + args.iters,
    logging_steps=1,
    report_to=[],
    use_cpu=True,
    bf16=False,
    save_strategy="no",
    disable_tqdm=True,
    seed=0,
)
trainer = GRPOTrainer(
    model=model,
    reward_funcs=random_reward,
    args=config,
    train_dataset=dataset,
    processing_class=tokenizer,
    peft_config=peft_config,
    callbacks=[StepTimer()],
)
trainer.train()

steps = step_seconds[args.warmup:]
rollouts = generation_seconds[args.warmup:][: len(steps)]
median = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
step, rollout = median(steps), median(rollouts)
update = step - rollout
generated = args.batch * args.completion
trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
print(json.dumps({
    "impl": "trl",
    "trl": __import__("trl").__version__,
    "torch": torch.__version__,
    "device": "cpu",
    "dtype": "f32",
    "model": f"{args.model} {'lora r=' + str(args.lora) if args.lora else 'full'}",
    "params": trainable,
    "threads": args.threads,
    "rollout_seconds": rollout,
    "update_seconds": update,
    "step_seconds": step,
    "rollout_tokens_per_second": generated / rollout,
    "update_tokens_per_second": args.batch * (args.prompt + args.completion) / update,
    "step_tokens_per_second": generated / step,
    "iters": len(steps),
    "batch": args.batch,
    "prompt_len": args.prompt,
    "completion_len": args.completion,
}))
