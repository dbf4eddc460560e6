"""verl's custom reward function, backed by a verifine rubric.

verl calls `compute_score(data_source, solution_str, ground_truth,
extra_info, **reward_kwargs)` in-process; point its config at this module:

    custom_reward_function:
      path: <site-packages>/verifine/verl.py
      name: compute_score
      reward_kwargs: {rubric: math-answer}

It returns a dict with `"score"` (the reward; 0.0 where scoring failed)
plus each criterion the rubric describes and `reward_failed`, so the key
set is the same for every sample. The scorer is loaded once per process
and configuration. (verl has no HTTP reward client; to score through
`verifine serve` instead, post to its `/v1/score` from a function of your
own.)
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Optional

from verifine import Scorer
from verifine._text import label_text

_scorers: dict[str, Scorer] = {}
_lock = threading.Lock()


def _scorer(rubric: str, aggregator: Optional[str], config: Optional[dict]) -> Scorer:
    key = json.dumps([rubric, aggregator, config], sort_keys=True)
    with _lock:
        if key not in _scorers:
            _scorers[key] = Scorer(rubric, aggregator=aggregator, config=config, threads=1)
        return _scorers[key]


def compute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Optional[dict] = None,
    rubric: Optional[str] = None,
    aggregator: Optional[str] = None,
    config: Optional[dict] = None,
    **kwargs: Any,
) -> dict[str, float]:
    """The reward of one response. `rubric` defaults to `$VERIFINE_RUBRIC`;
    the prompt is `extra_info["prompt"]` or `["question"]` when verl's data
    carries one."""
    rubric = rubric or os.environ.get("VERIFINE_RUBRIC")
    if not rubric:
        raise ValueError("verifine.verl.compute_score: pass rubric= in reward_kwargs or set VERIFINE_RUBRIC")
    scorer = _scorer(rubric, aggregator, config)
    extra_info = extra_info or {}
    prompt = extra_info.get("prompt") or extra_info.get("question") or ""
    if not isinstance(prompt, str):
        from verifine._text import render

        prompt = render(prompt)
    reference = None if ground_truth is None else label_text(ground_truth)
    context = extra_info.get("context")
    [judgment] = scorer.score([prompt], [solution_str], [reference], None if context is None else [context])
    result = {"score": 0.0 if judgment.total is None else float(judgment.total)}
    criteria = judgment.criteria()
    for criterion in scorer.criteria:
        result[criterion] = float(criteria.get(criterion, 0.0))
    result["reward_failed"] = float(judgment.total is None)
    return result
