"""The SVR-R1 vs plain GRPO table of bench/svr.sh, from its runs' summary.json."""
import json
import math
import statistics
import sys
import tomllib

Z = 1.96
T_2DF = 4.303  # two-sided 95% t quantile, 2 degrees of freedom (three seeds)


def wilson(p, n):
    """95% Wilson interval of a proportion p measured on n problems."""
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return centre - half, centre + half


def cell(p, n):
    if p is None:
        return "—"
    low, high = wilson(p, n)
    return f"{p:.3f} [{low:.2f}, {high:.2f}]"


def across(values):
    mean = statistics.mean(values)
    half = T_2DF * statistics.stdev(values) / math.sqrt(len(values))
    return f"{mean:.3f} ± {half:.3f}"


out = sys.argv[1]
seeds = (0, 1, 2)
runs = {(kind, seed): json.load(open(f"{out}/{kind}-{seed}/summary.json"))
        for kind in ("plain", "svr") for seed in seeds}
held_out = tomllib.load(open(f"{out}/plain-0/config.toml", "rb"))["heldout_problems"]
print("| seed | run | PR after SFT | PR final | FV final | mean turns | wall s |")
print("|---|---|---|---|---|---|---|")
for seed in seeds:
    for kind in ("plain", "svr"):
        s = runs[(kind, seed)]
        turns = s.get("mean_turns")
        print(f"| {seed} | {kind} | {cell(s['heldout_accuracy_sft'], held_out)} "
              f"| {cell(s['heldout_accuracy_final'], held_out)} "
              f"| {cell(s.get('heldout_accuracy_fv_final'), held_out)} "
              f"| {'—' if turns is None else f'{turns:.2f}'} | {s['wall_seconds']:.0f} |")
for kind in ("plain", "svr"):
    pr = [runs[(kind, s)]["heldout_accuracy_final"] for s in seeds]
    line = f"{kind}: PR final across seeds {across(pr)}"
    fv = [runs[(kind, s)].get("heldout_accuracy_fv_final") for s in seeds]
    if all(v is not None for v in fv):
        line += f"; FV final {across(fv)}"
    print(line)
