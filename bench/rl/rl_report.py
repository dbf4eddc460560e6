"""Held-out accuracy of the arms of one `bench/smollm2/rl.sh` run, paired
over the same held-out problems, written to RUN/rl-summary.json, printed
as a table, and drawn as accuracy against training time (RUN/rl-accuracy.svg).

    python3 bench/rl/rl_report.py RUN_DIR --seed N [--arms start,grpo,sft,rft,svr,verifier]

Arms and where their answers are:
  start  RUN/grpo/heldout_answers_sft.jsonl  (after SFT on the easy rung)
  grpo   RUN/grpo/heldout_answers.jsonl      (then GRPO on the hard rung)
  sft    RUN/sft/heldout_answers.jsonl       (control a: SFT continued)
  rft    RUN/rft/heldout_answers.jsonl       (control b: rejection sampling)
  svr    RUN/svr/heldout_answers.jsonl       (GRPO with self-verification:
         its pure-run (PR) answers; FV and mean turns from its summary)
  verifier RUN/verifier/heldout_answers.jsonl (GRPO with a trained verifier
         as the only reward; judged, as every arm, by the recipe's plugin
         with references)
An arm's wall_seconds is its training steps' time from the base model
(SFT and GRPO steps, no evaluation): the controls were given the GRPO
arm's. Intervals: Wilson for one accuracy; for a paired difference the
normal interval of the per-problem differences' mean."""

import argparse
import json
import math
import pathlib

Z = 1.959964


def read_jsonl(path: pathlib.Path) -> list:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def wilson(k: int, n: int) -> list:
    if n == 0:
        return [0.0, 0.0]
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return [round(centre - half, 4), round(centre + half, 4)]


def paired(a: list, b: list) -> dict:
    """a − b over the same problems (1 = solved)."""
    d = [x - y for x, y in zip(a, b)]
    n = len(d)
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1)) if n > 1 else 0.0
    half = Z * sd / math.sqrt(n)
    return {"mean": round(mean, 4), "ci": [round(mean - half, 4), round(mean + half, 4)], "problems": n}


def solved(rows: list, path: pathlib.Path, ids: list) -> list:
    got = [(r["id"], r["prompt"]) for r in rows]
    if got != ids:
        raise SystemExit(f"rl_report.py: {path} answers other held-out problems than the start arm")
    return [1 if r["correct"] else 0 for r in rows]


def curve(run: pathlib.Path) -> list:
    """(training seconds, held-out accuracy) at every logged evaluation."""
    points = []
    for line in read_jsonl(run / "metrics.jsonl"):
        if line.get("phase") == "eval" and "train_seconds" in line:
            points.append((line["train_seconds"], line["heldout_accuracy"]))
    return points


def svg(curves: dict, path: pathlib.Path) -> None:
    width, height, pad = 640, 400, 50
    xs = [x for pts in curves.values() for x, _ in pts] or [1.0]
    x_max = max(xs) * 1.05 or 1.0
    colours = {"grpo": "#d62728", "sft": "#1f77b4", "rft": "#2ca02c", "svr": "#9467bd", "verifier": "#ff7f0e", "start": "#555555"}
    sx = lambda x: pad + x / x_max * (width - 2 * pad)
    sy = lambda y: height - pad - y * (height - 2 * pad)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<line x1="{pad}" y1="{sy(0)}" x2="{width - pad}" y2="{sy(0)}" stroke="black"/>',
           f'<line x1="{pad}" y1="{sy(0)}" x2="{pad}" y2="{sy(1)}" stroke="black"/>',
           f'<text x="{width / 2}" y="{height - 10}" text-anchor="middle">training seconds (SFT + GRPO steps, no evaluation)</text>',
           f'<text x="14" y="{height / 2}" transform="rotate(-90 14 {height / 2})" text-anchor="middle">held-out greedy accuracy (hard rung)</text>']
    for tick in range(0, 11, 2):
        y = tick / 10
        out.append(f'<text x="{pad - 6}" y="{sy(y) + 4}" text-anchor="end">{y:.1f}</text>')
    for tick in range(0, 6):
        x = x_max * tick / 5
        out.append(f'<text x="{sx(x)}" y="{sy(0) + 16}" text-anchor="middle">{x:.0f}</text>')
    for i, (name, pts) in enumerate(curves.items()):
        colour = colours.get(name, "black")
        poly = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        out.append(f'<polyline points="{poly}" fill="none" stroke="{colour}" stroke-width="2"/>')
        out += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{colour}"/>' for x, y in pts]
        out.append(f'<text x="{width - pad - 90}" y="{pad + 16 * i}" fill="{colour}">{name}</text>')
    out.append("</svg>")
    path.write_text("\n".join(out) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run", type=pathlib.Path)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--arms", default="start,grpo")
    args = parser.parse_args()
    run, arms = args.run, args.arms.split(",")
    grpo_summary = json.loads((run / "grpo" / "summary.json").read_text())
    seconds = grpo_summary["phase_seconds"]
    start_path = run / "grpo" / "heldout_answers_sft.jsonl"
    start_rows = read_jsonl(start_path)
    ids = [(r["id"], r["prompt"]) for r in start_rows]
    sources = {
        "start": (start_path, seconds["sft"]),
        "grpo": (run / "grpo" / "heldout_answers.jsonl", seconds["sft"] + seconds["grpo"]),
    }
    summaries = {}
    for control in ("sft", "rft", "svr", "verifier"):
        if control in arms:
            summary = summaries[control] = json.loads((run / control / "summary.json").read_text())
            spent = summary["phase_seconds"]["sft"] + summary["phase_seconds"]["grpo"]
            sources[control] = (run / control / "heldout_answers.jsonl", spent)
    correct, table = {}, {}
    for name in arms:
        path, wall = sources[name]
        correct[name] = solved(read_jsonl(path), path, ids)
        k, n = sum(correct[name]), len(correct[name])
        table[name] = {"accuracy": round(k / n, 4), "ci": wilson(k, n), "wall_seconds": round(wall, 1), "problems": n}
    if "svr" in summaries:
        svr = summaries["svr"]
        table["svr"].update({
            "fv": svr.get("heldout_accuracy_fv_final"),
            "pr_after_sft": svr["heldout_accuracy_sft"],
            "fv_after_sft": svr.get("heldout_accuracy_fv_sft"),
            "mean_turns": svr.get("mean_turns"),
        })
    summary = {"seed": args.seed, "arms": table}
    for a, b in (("grpo", "start"), ("grpo", "sft"), ("grpo", "rft"), ("svr", "grpo"),
                 ("verifier", "start"), ("verifier", "grpo")):
        if a in correct and b in correct:
            summary[f"{a}_minus_{b}"] = paired(correct[a], correct[b])
    if all(k in summary for k in ("verifier_minus_start", "grpo_minus_start")):
        # The verifier's gain as a share of the gain with the recipe's own
        # reference-based reward, same steps and seed.
        own = summary["grpo_minus_start"]["mean"]
        summary["verifier_gain_share"] = round(summary["verifier_minus_start"]["mean"] / own, 3) if own else None
    (run / "rl-summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    curves = {}
    if "start" in arms or "grpo" in arms:
        curves["grpo"] = curve(run / "grpo")
    for control in ("sft", "rft", "svr", "verifier"):
        if control in arms:
            curves[control] = curve(run / control)
    svg(curves, run / "rl-accuracy.svg")
    print(f"seed {args.seed}, {len(ids)} held-out problems")
    print("| arm | accuracy | 95% CI | training seconds |\n|---|---|---|---|")
    for name, row in table.items():
        print(f"| {name} | {row['accuracy']:.3f} | [{row['ci'][0]:.3f}, {row['ci'][1]:.3f}] | {row['wall_seconds']:.0f} |")
    for key, value in summary.items():
        if "_minus_" in key:
            print(f"{key}: {value['mean']:+.3f} [{value['ci'][0]:+.3f}, {value['ci'][1]:+.3f}]")
    if summary.get("verifier_gain_share") is not None:
        print(f"verifier gain / grpo gain: {summary['verifier_gain_share']:.3f}")
    if "svr" in table:
        row = table["svr"]
        fmt = lambda x: "—" if x is None else f"{x:.3f}"
        print(f"svr: PR {fmt(row['pr_after_sft'])} -> {row['accuracy']:.3f}, "
              f"FV {fmt(row['fv_after_sft'])} -> {fmt(row['fv'])}, mean answer turns {fmt(row['mean_turns'])}")


if __name__ == "__main__":
    main()
