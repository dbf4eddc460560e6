"""Writes the load test's bodies from the shared GSM8K solutions: one query,
and 64; and checks the Python port of math-answer against verifine's own
rewards (`verifine serve`'s answers, passed in) on all of them."""

import json
import pathlib
import sys

from math_answer import judge

data, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
rows = [json.loads(l) for l in data.read_text().splitlines()]
pairs = [(r["question"], s["solution"], r["ground_truth"]) for r in rows for s in r.values() if isinstance(s, dict)]
prompt = "<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n"
for name, chosen in (("single", pairs[:1]), ("batch64", pairs[:64]), ("all", pairs)):
    body = {
        "query": [prompt.format(q=q) + s + "<|im_end|>" for q, s, _ in chosen],
        "prompts": [prompt.format(q=q) for q, _, _ in chosen],
        "labels": [t for _, _, t in chosen],
    }
    (out / f"{name}.json").write_text(json.dumps(body))
(out / "port-rewards.json").write_text(json.dumps([judge(s, t)[0] for _, s, t in pairs]))
