"""Held-out mean reward of a pretrained run before and after training, with
95% intervals: each side's normal interval over its problems, and the
paired interval of the gain (the same problems answered before and after).

"Before" is the run's own evaluation after its SFT phase, which is the
base model when the run has no SFT steps. For a run with SFT, pass
`--base DIR`: a run of the same config without training steps, whose
held-out answers are the base model's (the problems must be the same).

  python3 bench/smollm2/report.py RUN_DIR [--base BASE_RUN_DIR] [--json]
"""

import json
import math
import pathlib
import sys

run = pathlib.Path(sys.argv[1])
base_run = pathlib.Path(sys.argv[sys.argv.index("--base") + 1]) if "--base" in sys.argv else run


def totals(name, directory=run):
    path = directory / name
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {r["id"]: (r["evaluator_total"] or 0.0) for r in rows}, rows


def interval(values):
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / max(n - 1, 1)
    half = 1.96 * math.sqrt(var / n)
    return mean, mean - half, mean + half


before, rows_before = totals("heldout_answers_sft.jsonl", base_run)
after, rows_after = totals("heldout_answers.jsonl")
ids = sorted(before.keys() & after.keys())
prompts = {r["id"]: r["prompt"] for r in rows_after}
if len(ids) != len(after) or any(r["prompt"] != prompts[r["id"]] for r in rows_before if r["id"] in prompts):
    sys.exit(f"{base_run} answered other held-out problems than {run}")
summary = json.loads((run / "summary.json").read_text())
b = interval([before[i] for i in ids])
a = interval([after[i] for i in ids])
gain = interval([after[i] - before[i] for i in ids])
marked = lambda rows: sum("####" in r["response"] for r in rows) / len(rows)  # noqa: E731
result = {
    "problems": len(ids),
    "base_mean_reward": b,
    "final_mean_reward": a,
    "gain_paired": gain,
    "base_accuracy": sum(r["correct"] for r in rows_before) / len(rows_before),
    "final_accuracy": summary["heldout_accuracy_final"],
    "base_marked_share": marked(rows_before),
    "final_marked_share": marked(rows_after),
    "steps": summary["steps"],
    "wall_seconds": summary["wall_seconds"],
}
if "--json" in sys.argv:
    print(json.dumps(result))
else:
    fmt = lambda t: f"{t[0]:.3f} [{t[1]:.3f}, {t[2]:.3f}]"  # noqa: E731
    print(f"held-out problems: {len(ids)}")
    print(f"mean reward, base:  {fmt(b)}")
    print(f"mean reward, final: {fmt(a)}")
    print(f"gain (paired):      {fmt(gain)}")
    print(f"accuracy: {result['base_accuracy']:.3f} -> {result['final_accuracy']:.3f}; "
          f"answers marked '####': {result['base_marked_share']:.2f} -> {result['final_marked_share']:.2f}")
    print(f"{result['steps']} steps (SFT and GRPO), {result['wall_seconds'] / 60:.1f} minutes")
