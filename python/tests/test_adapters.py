"""The trainer adapters, called exactly as TRL, verl and OpenRLHF call them."""

import json

import pytest

from conftest import shared_data
from verifine.openrlhf import make_reward_func
from verifine.trl import reward_function
from verifine.verl import compute_score


def test_trl_reward_function_standard_and_conversational():
    reward = reward_function("math-answer", reference_column="answer")
    assert reward.__name__ == "verifine_math_answer"
    logged = {}
    rewards = reward(
        prompts=["6*7?", "6*7?", "2+2?"],
        completions=["#### 42", "#### 41", "#### 4"],
        completion_ids=[[1], [2], [3]],
        answer=["42", "42", "4"],
        other_column=[1, 2, 3],
        trainer_state=object(),
        log_extra=lambda *a, **k: None,
        log_metric=lambda name, value: logged.__setitem__(name, value),
    )
    assert rewards == pytest.approx([1.0, 0.1, 1.0])
    assert logged["verifine/correct"] == pytest.approx(2 / 3)
    assert logged["verifine/reward_failed"] == 0.0

    conversational = reward(
        prompts=[[{"role": "system", "content": "S"}, {"role": "user", "content": "6*7?"}]],
        completions=[[{"role": "assistant", "content": "It is 42.\n#### 42"}]],
        answer=["42"],
    )
    assert conversational == [1.0]


def test_trl_failed_samples_are_none_and_a_missing_column_is_named():
    reward = reward_function("math-answer")
    # No reference column at all: math-answer fails every sample.
    assert reward(prompts=["q", "q"], completions=["#### 1", "#### 2"]) == [None, None]
    # The reference is found under the first known column name.
    assert reward(prompts=["q"], completions=["#### 2"], solution=["2"]) == [1.0]
    with pytest.raises(KeyError, match="no column 'gold'"):
        reward_function("math-answer", reference_column="gold")(prompts=["q"], completions=["x"], answer=["1"])


def test_verl_compute_score_as_verl_calls_it():
    result = compute_score("openai/gsm8k", "so\n#### 18", "18", {"split": "test", "index": 0}, rubric="math-answer")
    assert result == {"score": 1.0, "format": 1.0, "correct": 1.0, "reward_failed": 0.0}
    wrong = compute_score(data_source="openai/gsm8k", solution_str="#### 17", ground_truth="18", extra_info=None, rubric="math-answer")
    assert wrong["score"] == pytest.approx(0.1) and wrong["correct"] == 0.0
    failed = compute_score("x", "#### 17", None, rubric="math-answer")
    assert failed["score"] == 0.0 and failed["reward_failed"] == 1.0
    assert set(failed) == set(result), "the same keys for every sample"


def test_verl_agrees_with_gsm8k_labels():
    """The real GSM8K model solutions: math-answer's `correct` against the
    labelled correctness, through the adapter verl calls."""
    rows = [json.loads(l) for l in shared_data("gsm8k/model_solutions.jsonl").read_text().splitlines()[:100]]
    pairs = [
        (solution["solution"], row["ground_truth"], solution["is_correct"])
        for row in rows
        for key, solution in row.items()
        if isinstance(solution, dict)
    ]
    agree = sum(
        (compute_score("openai/gsm8k", text, truth, {"question": "q"}, rubric="math-answer")["correct"] == 1.0) == label
        for text, truth, label in pairs
    )
    assert len(pairs) == 400
    assert agree / len(pairs) > 0.9, agree


def test_openrlhf_reward_func_matches_the_server_protocol():
    reward_func = make_reward_func("math-answer")
    prompt = "<|im_start|>user\n6*7?<|im_end|>\n<|im_start|>assistant\n"
    result = reward_func([prompt + "#### 42<|im_end|>", prompt + "#### 41<|im_end|>"], [prompt, prompt], ["42", "42"])
    assert result["rewards"] == pytest.approx([1.0, 0.1])
    assert result["scores"] == result["rewards"]
    assert result["extra_logs"]["correct"] == [1.0, 0.0]
    assert result["extra_logs"]["reward_failed"] == [0.0, 0.0]
    with pytest.raises(ValueError, match="`labels` has 1 entries"):
        reward_func(["a", "b"], None, ["1"])
