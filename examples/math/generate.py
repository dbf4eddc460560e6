"""Generates the shipped example set: arithmetic word problems, one response
each in a mix of answer formats (some with slips), and gold correctness labels.

python3 examples/math/generate.py   # rewrites samples.jsonl and labels.jsonl
"""
import json
import random
from pathlib import Path

HERE = Path(__file__).parent
rng = random.Random(7)

TEMPLATES = [
    ("A baker has {a} loaves. She sells {b} and bakes {c} more. How many loaves does she have now?",
     lambda a, b, c: a - b + c,
     "{a} - {b} = {ab}\n{ab} + {c} = {ans}"),
    ("Tom buys {a} packs of {b} pencils and gives away {c}. How many pencils are left?",
     lambda a, b, c: a * b - c,
     "{a} * {b} = {ab}\n{ab} - {c} = {ans}"),
    ("A tank holds {a} liters. {b} liters leak out each hour for {c} hours. How much is left?",
     lambda a, b, c: a - b * c,
     "{b} * {c} = {ab}\n{a} - {ab} = {ans}"),
]
FORMATS = ["#### {x}", "A: {x}", "The answer is \\boxed{{{x}}}.", "So the result is {x}.", "A: ${x}.00"]

samples, labels = [], []
for i in range(200):
    question, solve, steps = TEMPLATES[i % len(TEMPLATES)]
    a, b, c = rng.randint(20, 90), rng.randint(2, 9), rng.randint(2, 9)
    answer = solve(a, b, c)
    ab = {0: a - b, 1: a * b, 2: b * c}[i % len(TEMPLATES)]
    slip = rng.random() < 0.35
    given = answer + rng.choice([-2, -1, 1, 3]) if slip else answer
    work = steps.format(a=a, b=b, c=c, ab=ab, ans=given)
    response = work + "\n" + rng.choice(FORMATS).format(x=given)
    reference = steps.format(a=a, b=b, c=c, ab=ab, ans=answer) + f"\n#### {answer}"
    sample_id = f"arith-{i:03d}"
    samples.append({"id": sample_id, "prompt": question.format(a=a, b=b, c=c),
                    "response": response, "reference": reference})
    labels.append({"id": sample_id, "label": not slip})

for name, rows in [("samples.jsonl", samples), ("labels.jsonl", labels)]:
    with open(HERE / name, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
print(f"wrote {len(samples)} samples, {sum(l['label'] for l in labels)} correct")
