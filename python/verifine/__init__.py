"""verifine for Python: sandboxed, versioned WebAssembly reward plugins.

    from verifine import Scorer
    scorer = Scorer(rubric="math-answer")
    scorer.rewards(["What is 6*7?"], ["#### 42"], references=["42"])  # [1.0]

Scoring runs in Rust with the GIL released, over threads with their own
plugin instances. Adapters for trainers live in `verifine.trl`,
`verifine.verl` and `verifine.openrlhf`.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional, Sequence

from verifine._verifine import Judgment, Verdict, __version__
from verifine._verifine import Scorer as _RustScorer
from verifine._text import label_text

__all__ = ["Scorer", "Judgment", "Verdict", "__version__"]


def _context_json(context: Any) -> Optional[str]:
    if context is None:
        return None
    if isinstance(context, str):
        return context
    return json.dumps(context)


class Scorer:
    """A rubric (a built-in name or a path to a `.wasm` component) and an
    optional aggregator, loaded once.

    `config` is the rubric's own table (what `[rubric] config` holds in a
    TOML config); `aggregator_config` the aggregator's. `threads=0` uses one
    thread per core. `call_timeout_ms` and `memory_mib` are the sandbox's
    limits per plugin call.
    """

    def __init__(
        self,
        rubric: str,
        aggregator: Optional[str] = None,
        config: Optional[Mapping[str, Any]] = None,
        aggregator_config: Optional[Mapping[str, Any]] = None,
        threads: int = 0,
        batch_size: int = 64,
        call_timeout_ms: int = 10_000,
        memory_mib: int = 256,
    ) -> None:
        self.rubric = rubric
        self.aggregator = aggregator
        self._inner = _RustScorer(
            str(rubric),
            None if aggregator is None else str(aggregator),
            json.dumps(dict(config or {})),
            json.dumps(dict(aggregator_config or {})),
            threads,
            batch_size,
            call_timeout_ms,
            memory_mib,
        )

    @property
    def criteria(self) -> list[str]:
        """The criteria the rubric describes."""
        return self._inner.criteria

    @property
    def revisions(self) -> tuple[str, str]:
        """The rubric and aggregator as `name@version+sha256`."""
        return self._inner.revisions

    def score(
        self,
        prompts: Sequence[str],
        responses: Sequence[str],
        references: Optional[Sequence[Optional[str]]] = None,
        contexts: Optional[Sequence[Any]] = None,
    ) -> list[Judgment]:
        """Judges each sample; one `Judgment` per response, in order.

        `contexts` are per-sample dicts (or JSON text) the rubric reads,
        e.g. HealthBench's rubric items."""
        return self._inner.score(
            list(prompts),
            list(responses),
            None if references is None else [None if r is None else label_text(r) for r in references],
            None if contexts is None else [_context_json(c) for c in contexts],
        )

    def rewards(
        self,
        prompts: Sequence[str],
        responses: Sequence[str],
        references: Optional[Sequence[Optional[str]]] = None,
        contexts: Optional[Sequence[Any]] = None,
        on_failure: Optional[float] = None,
    ) -> list[Optional[float]]:
        """The totals: `None` (or `on_failure`) where scoring failed."""
        return [
            on_failure if j.total is None else j.total
            for j in self.score(prompts, responses, references, contexts)
        ]
