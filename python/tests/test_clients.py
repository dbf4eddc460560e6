"""The trainers' own reward clients against `verifine serve`.

- OpenRLHF: `SingleTurnAgentExecutor._fetch_rewards_via_http` from the
  openrlhf wheel on PyPI (downloaded without dependencies; its package
  `__init__` modules, which import torch and deepspeed, are replaced by
  empty ones — the client module itself needs only aiohttp).
- slime: `slime.rollout.rm_hub.remote_rm`. slime is not on PyPI, so this
  runs when `$SLIME_SRC` names a slime checkout (the module's sibling
  imports, which pull in torch, are stubbed; `remote_rm` itself is slime's
  code, unchanged); otherwise it is skipped and says so.
"""

import asyncio
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import types
import zipfile

import pytest

OPENRLHF_VERSION = "0.11.2"


def openrlhf_agent(cache: pathlib.Path):
    wheel_dir = cache / "wheels"
    wheels = list(wheel_dir.glob(f"openrlhf-{OPENRLHF_VERSION}-*.whl"))
    if not wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", f"openrlhf=={OPENRLHF_VERSION}", "-d", str(wheel_dir)],
            check=True,
        )
        wheels = list(wheel_dir.glob(f"openrlhf-{OPENRLHF_VERSION}-*.whl"))
    root = cache / "openrlhf-src"
    if not (root / "openrlhf" / "utils" / "agent.py").exists():
        with zipfile.ZipFile(wheels[0]) as wheel:
            for name in wheel.namelist():
                for part in ("openrlhf/utils/agent.py", "openrlhf/utils/logging_utils.py"):
                    if name.endswith(part):
                        target = root / part
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(wheel.read(name))
        (root / "openrlhf" / "__init__.py").write_text("")
        (root / "openrlhf" / "utils" / "__init__.py").write_text("")
    sys.path.insert(0, str(root))
    try:
        return importlib.import_module("openrlhf.utils.agent")
    finally:
        sys.path.remove(str(root))


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    path = pathlib.Path(os.environ.get("VERIFINE_TEST_CACHE", tmp_path_factory.mktemp("cache")))
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_openrlhf_client_gets_the_rewards(serve, cache):
    agent = openrlhf_agent(cache)
    first = serve("--rubric", "math-answer")
    second = serve("--rubric", "math-answer")
    executor = agent.SingleTurnAgentExecutor(
        remote_rm_url=[f"{first.url}/get_reward", f"{second.url}/get_reward"]
    )
    prompt = "<|im_start|>user\nWhat is 6*7?<|im_end|>\n<|im_start|>assistant\n"
    queries = [prompt + r + "<|im_end|>" for r in ["#### 42", "A: 41", "maybe 42", "nothing"]]
    # As the executor sends them: shards over the servers, round-robin.
    answers = asyncio.run(executor._fetch_rewards_via_http(queries, [prompt] * 4, ["42"] * 4))
    assert len(answers) == 2
    rewards = [r for answer in answers for r in answer["rewards"]]
    assert rewards == pytest.approx([1.0, 0.1, 0.9, 0.0])
    assert answers[0]["extra_logs"]["correct"] == [1.0, 0.0]
    # One query per call, as a rollout sends it.
    [one] = asyncio.run(executor._fetch_rewards_via_http([queries[0]], [prompt], ["42"]))
    assert one["rewards"] == [1.0] and one["scores"] == [1.0]


def slime_rm_hub(source: pathlib.Path):
    stubs = {
        "slime": types.ModuleType("slime"),
        "slime.utils": types.ModuleType("slime.utils"),
        "slime.utils.misc": types.ModuleType("slime.utils.misc"),
        "slime.utils.types": types.ModuleType("slime.utils.types"),
        "slime.rollout": types.ModuleType("slime.rollout"),
    }
    stubs["slime.utils.misc"].load_function = lambda path: None
    stubs["slime.utils.types"].Sample = object
    siblings = {
        "deepscaler": ["get_deepscaler_rule_based_reward"],
        "f1": ["f1_score"],
        "gpqa": ["compute_gpqa_reward"],
        "math_dapo_utils": ["compute_score"],
        "math_utils": ["extract_answer", "grade_answer_verl"],
    }
    for module, names in siblings.items():
        stub = types.ModuleType(f"slime.rollout.rm_hub.{module}")
        for name in names:
            setattr(stub, name, lambda *a, **k: None)
        stubs[stub.__name__] = stub
    for name, module in stubs.items():
        module.__path__ = []
        sys.modules.setdefault(name, module)
    path = source / "slime" / "rollout" / "rm_hub" / "__init__.py"
    spec = importlib.util.spec_from_file_location("slime.rollout.rm_hub", path, submodule_search_locations=[])
    module = importlib.util.module_from_spec(spec)
    sys.modules["slime.rollout.rm_hub"] = module
    spec.loader.exec_module(module)
    return module


def test_slime_client_gets_the_rewards(serve):
    source = os.environ.get("SLIME_SRC")
    if not source:
        pytest.skip("slime is not on PyPI: set SLIME_SRC to a slime checkout (git clone https://github.com/THUDM/slime) to run this test")
    rm_hub = slime_rm_hub(pathlib.Path(source))
    server = serve("--rubric", "math-answer")
    args = types.SimpleNamespace(rm_url=f"{server.url}/slime")

    async def ask(prompt, response, label):
        sample = types.SimpleNamespace(prompt=prompt, response=response, label=label)
        try:
            return await rm_hub.remote_rm(args, sample)
        finally:
            session = rm_hub._shared_session
            if session is not None:
                await session.close()

    text = asyncio.run(ask("What is 6*7?", "#### 42", "42"))
    assert text["reward"] == 1.0 and text["criteria"]["correct"] == 1.0
    chat = asyncio.run(ask([{"role": "user", "content": "What is 6*7?"}], "A: 41", "42"))
    assert chat["reward"] == pytest.approx(0.1)
    assert chat["revisions"]["rubric"]["name"] == "math-answer"
