"""`verifine.Scorer`: the built-in rubrics from Python, with the GIL released."""

import json
import threading

import pytest

from conftest import shared_data
from verifine import Judgment, Scorer


def test_rewards_match_the_rubric():
    scorer = Scorer("math-answer")
    assert scorer.criteria == ["format", "correct"]
    rewards = scorer.rewards(["6*7?"] * 4, ["#### 42", "A: 41", "I think 42", "no idea"], references=["42"] * 4)
    assert rewards == pytest.approx([1.0, 0.1, 0.9, 0.0])
    [judgment] = scorer.score(["6*7?"], ["#### 42"], ["42"])
    assert isinstance(judgment, Judgment)
    assert judgment.error is None
    assert [(v.criterion, v.met) for v in judgment.verdicts] == [("format", True), ("correct", True)]
    assert judgment.criteria() == {"format": 1.0, "correct": 1.0}
    rubric, aggregator = scorer.revisions
    assert rubric.startswith("math-answer@") and aggregator.startswith("weighted-sum@")


def test_config_and_failures():
    scorer = Scorer("math-answer", config={"format_weight": 0.5, "correct_weight": 0.5})
    assert scorer.rewards(["q"], ["A: 41"], ["42"]) == [0.5]
    [failed] = scorer.score(["q"], ["#### 1"])  # math-answer needs a reference
    assert failed.total is None and "reference" in failed.error
    assert scorer.rewards(["q"], ["#### 1"], on_failure=0.0) == [0.0]
    with pytest.raises(ValueError, match="responses has 1 entries, prompts has 2"):
        scorer.score(["a", "b"], ["x"])
    with pytest.raises(RuntimeError, match="no-such-rubric"):
        Scorer("no-such-rubric")
    [refused] = Scorer("math-answer", config={"no_such_key": 1}).score(["q"], ["#### 1"], ["1"])
    assert refused.total is None and "no_such_key" in refused.error


def test_healthbench_rubric_reads_per_sample_contexts():
    rows = [json.loads(line) for line in shared_data("healthbench/examples.jsonl").read_text().splitlines()[:3]]
    scorer = Scorer("healthbench")
    contexts = []
    for row in rows:
        verdicts = [True] * len(row["rubrics"])
        contexts.append({"rubrics": row["rubrics"], "verdicts": verdicts})
    judgments = scorer.score(["p"] * len(rows), ["r"] * len(rows), contexts=contexts)
    for row, judgment in zip(rows, judgments):
        assert judgment.error is None, judgment.error
        assert len(judgment.verdicts) == len(row["rubrics"])


def test_scoring_releases_the_gil():
    scorer = Scorer("math-answer", threads=1)
    n = 40_000
    counter = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            counter[0] += 1

    thread = threading.Thread(target=count)
    thread.start()
    before = counter[0]
    scorer.score(["q"] * n, ["#### 42"] * n, ["42"] * n)
    during = counter[0] - before
    stop.set()
    thread.join()
    # With the GIL held for the whole call, the counting thread would stand still.
    assert during > 1000, during
