"""OpenRLHF's local reward function, backed by a verifine rubric.

OpenRLHF loads `reward_func(queries, prompts, labels)` from the Python file
given as `--remote_rm_url path/to/file.py`. Write that file as:

    from verifine.openrlhf import make_reward_func
    reward_func = make_reward_func("math-answer")

It answers exactly as `verifine serve`'s `/get_reward` does: each query is
the decoded prompt + response, the response is what follows the prompt
(end-of-turn markers removed), a label is the reference; the result is
`{"rewards", "scores", "extra_logs"}` with each criterion's score and
`reward_failed` per sample (a failed sample's reward is 0.0).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

from verifine import Scorer
from verifine._text import label_text


def make_reward_func(rubric: str, aggregator: Optional[str] = None, config: Optional[dict] = None, **scorer_options: Any) -> Callable[..., dict]:
    """`reward_func(queries, prompts, labels)` for OpenRLHF."""
    scorer = Scorer(rubric, aggregator=aggregator, config=config, **scorer_options)

    def reward_func(queries, prompts=None, labels=None, **kwargs: Any) -> dict:
        labels = None if labels is None else [label_text(l) for l in labels]
        answer = scorer._inner.openrlhf(list(queries), None if prompts is None else list(prompts), labels)
        result = json.loads(answer)
        result["extra_logs"].pop("revision_generation", None)
        return result

    reward_func.scorer = scorer  # type: ignore[attr-defined]
    return reward_func
