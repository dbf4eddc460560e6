"""A real TRL GRPOTrainer run whose reward is verifine's adapter: a tiny,
randomly initialised llama built in code (nothing downloaded), two steps on
the CPU. Skipped (with the reason) where TRL is not installed; CI installs it."""

import pytest

trl = pytest.importorskip("trl", reason="TRL is not installed (pip install trl)")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
datasets = pytest.importorskip("datasets")
tokenizers = pytest.importorskip("tokenizers")

from verifine.trl import reward_function  # noqa: E402


def tiny_tokenizer():
    """Byte-level BPE without merges: every text encodes, nothing to download."""
    alphabet = tokenizers.pre_tokenizers.ByteLevel.alphabet()
    vocab = {"<pad>": 0, "<eos>": 1}
    for ch in sorted(alphabet):
        vocab[ch] = len(vocab)
    model = tokenizers.models.BPE(vocab=vocab, merges=[])
    tok = tokenizers.Tokenizer(model)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")
    fast.padding_side = "left"
    return fast


def test_grpo_trainer_runs_two_steps_on_verifine_rewards(tmp_path):
    torch.manual_seed(0)
    tokenizer = tiny_tokenizer()
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=128,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )
    model = transformers.LlamaForCausalLM(config)
    dataset = datasets.Dataset.from_dict(
        {"prompt": [f"{a}+{b}=" for a, b in [(1, 2), (3, 4), (2, 2), (5, 1)]], "answer": ["3", "7", "4", "6"]}
    )
    calls = []
    reward = reward_function("math-answer", reference_column="answer")

    def recorded(**kwargs):
        values = reward(**kwargs)
        calls.append((len(kwargs["prompts"]), values))
        return values

    recorded.__name__ = reward.__name__
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=6,
        max_steps=2,
        learning_rate=1e-3,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        seed=0,
    )
    trainer = trl.GRPOTrainer(model=model, reward_funcs=[recorded], args=args, train_dataset=dataset, processing_class=tokenizer)
    before = [p.detach().clone() for p in model.parameters()]
    trainer.train()
    assert trainer.state.global_step == 2
    assert calls, "the reward function was never called"
    for n, values in calls:
        assert len(values) == n
        assert all(v is None or 0.0 <= v <= 1.0 for v in values)
    logged = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert logged, trainer.state.log_history
    assert any(key.startswith("verifine/") or "verifine_math_answer" in key for key in trainer.state.log_history[0]), trainer.state.log_history[0]
    changed = any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert changed or all(c[1] == calls[0][1] for c in calls), "weights move unless every reward was equal"
