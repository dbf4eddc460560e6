"""The Python adapter's per-sample overhead over calling the scorer from
Rust, one run: the first 64 GSM8K questions x 4 solutions (256 samples),
math-answer, one thread, one batch.

    python python/bench/overhead.py [../shared/data/gsm8k/model_solutions.jsonl]

Anchor: `Scorer._score_timed`, the same scoring timed inside Rust (no
Python objects). Then `Scorer.score` on the same batch (lists in, Judgment
objects out), and 256 one-sample `score` calls (what a per-sample reward
callback costs)."""

import json
import pathlib
import statistics
import sys
import time

from verifine import Scorer

path = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/gsm8k/model_solutions.jsonl")
rows = [json.loads(l) for l in path.read_text().splitlines()[:64]]
pairs = [(r["question"], s["solution"], r["ground_truth"]) for r in rows for s in r.values() if isinstance(s, dict)]
prompts, responses, references = map(list, zip(*pairs))
n = len(pairs)
scorer = Scorer("math-answer", threads=1, batch_size=n)
inner = scorer._inner
repeats = 200

rust = statistics.median(inner._score_timed(prompts, responses, references, repeats))


def median_of(call, repeats):
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


batch = median_of(lambda: scorer.score(prompts, responses, references), repeats)
single = median_of(lambda: [scorer.score([p], [r], [t]) for p, r, t in pairs], 20)
print(f"samples per batch: {n}")
print(f"rust (anchor):        {rust * 1e3:8.3f} ms per batch, {rust / n * 1e6:7.2f} us per sample")
print(f"python, one batch:    {batch * 1e3:8.3f} ms per batch, {batch / n * 1e6:7.2f} us per sample "
      f"({batch / rust:.2f}x; overhead {(batch - rust) / n * 1e6:.2f} us per sample)")
print(f"python, one by one:   {single * 1e3:8.3f} ms per {n}, {single / n * 1e6:7.2f} us per sample "
      f"({single / rust:.2f}x; overhead {(single - rust) / n * 1e6:.2f} us per sample)")
