"""The anchor of the reward server's load test: FastAPI + uvicorn serving
OpenRLHF's `/get_reward` with the Python port of `math-answer`, the same
protocol as `verifine serve` (the response after the prompt, end-of-turn
markers removed; rewards, scores, per-criterion extra_logs)."""

import sys

import uvicorn
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

from math_answer import judge

END_MARKERS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end|>", "</s>", "<eos>", "<end_of_turn>")
app = FastAPI()


class Request(BaseModel):
    query: list[str]
    prompts: list[str] | None = None
    labels: list[str] | None = None


def strip_end(text):
    text = text.rstrip()
    while True:
        for marker in END_MARKERS:
            if text.endswith(marker):
                text = text[: -len(marker)].rstrip()
                break
        else:
            return text


@app.post("/get_reward")
def get_reward(request: Request):
    n = len(request.query)
    for name, values in (("prompts", request.prompts), ("labels", request.labels)):
        if values is not None and len(values) != n:
            raise HTTPException(400, f"`{name}` has {len(values)} entries, `query` has {n}")
    rewards, logs = [], {"format": [], "correct": [], "reward_failed": []}
    for i, query in enumerate(request.query):
        prompt = request.prompts[i] if request.prompts else ""
        response = query[len(prompt):] if prompt and query.startswith(prompt) else query
        label = request.labels[i] if request.labels else ""
        judged = judge(strip_end(response), label) if label else None
        total, criteria = judged if judged else (0.0, {"format": 0.0, "correct": 0.0})
        rewards.append(total)
        for key, value in criteria.items():
            logs[key].append(value)
        logs["reward_failed"].append(float(judged is None))
    return {"rewards": rewards, "scores": rewards, "extra_logs": logs}


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8001
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    uvicorn.run("fastapi_server:app", host="127.0.0.1", port=port, workers=workers, log_level="warning", access_log=False)
