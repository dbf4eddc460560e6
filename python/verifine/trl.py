"""A TRL `reward_funcs` entry backed by a verifine rubric.

    from trl import GRPOTrainer
    from verifine.trl import reward_function
    trainer = GRPOTrainer(model=..., reward_funcs=[reward_function("math-answer", reference_column="answer")], ...)

TRL calls it as `f(prompts=, completions=, completion_ids=, **dataset
columns, trainer_state=, log_extra=, log_metric=)` and wants one float per
prompt (`None` for a sample it should ignore). Conversational prompts and
completions (lists of chat messages) are rendered to text.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from verifine import Scorer
from verifine._text import completion_text, label_text, render

#: Dataset columns tried, in order, for the reference when none is named.
REFERENCE_COLUMNS = ("reference", "answer", "solution", "ground_truth", "label")


def reward_function(
    rubric: str,
    aggregator: Optional[str] = None,
    config: Optional[Mapping[str, Any]] = None,
    reference_column: Optional[str] = None,
    context_column: Optional[str] = None,
    name: Optional[str] = None,
    log_criteria: bool = True,
    **scorer_options: Any,
) -> Callable[..., list[Optional[float]]]:
    """A reward function for TRL's trainers.

    `reference_column` names the dataset column with the reference answer
    (default: the first of `REFERENCE_COLUMNS` present); `context_column` a
    column of per-sample dicts the rubric reads (HealthBench's rubric items,
    say). With `log_criteria`, each criterion's batch mean is logged through
    TRL's `log_metric` as `verifine/<criterion>`, and failed samples as
    `verifine/reward_failed`.
    """
    scorer = Scorer(rubric, aggregator=aggregator, config=config, **scorer_options)

    def reward(prompts=None, completions=None, completion_ids=None, **columns: Any):
        log_metric = columns.pop("log_metric", None)
        columns.pop("log_extra", None)
        columns.pop("trainer_state", None)
        completions = list(completions or [])
        prompts = list(prompts) if prompts is not None else [""] * len(completions)
        column = reference_column or next((c for c in REFERENCE_COLUMNS if c in columns), None)
        references = None
        if column is not None:
            if column not in columns:
                raise KeyError(f"verifine: the dataset has no column {column!r} (columns: {sorted(columns)})")
            references = [None if r is None else label_text(r) for r in columns[column]]
        contexts = list(columns[context_column]) if context_column else None
        judgments = scorer.score(
            [render(p) for p in prompts],
            [completion_text(c) for c in completions],
            references,
            contexts,
        )
        if log_criteria and callable(log_metric) and judgments:
            sums: dict[str, list[float]] = {}
            for judgment in judgments:
                for criterion, value in judgment.criteria().items():
                    sums.setdefault(criterion, []).append(value)
            for criterion, values in sums.items():
                log_metric(f"verifine/{criterion}", sum(values) / len(values))
            failed = sum(j.total is None for j in judgments)
            log_metric("verifine/reward_failed", failed / len(judgments))
        return [j.total for j in judgments]

    stem = str(rubric).replace("\\", "/").split("/")[-1].removesuffix(".wasm")
    reward.__name__ = name or "verifine_" + stem.replace("-", "_")
    reward.__qualname__ = reward.__name__
    reward.scorer = scorer  # type: ignore[attr-defined]
    return reward
