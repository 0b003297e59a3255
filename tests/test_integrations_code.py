"""The code verifier through every adapter, on real MBPP and HumanEval tasks in the Docker sandbox."""

import json
import sys
from pathlib import Path

import needs
import pytest

from rlvr.integrations.openrlhf import score_queries
from rlvr.integrations.trl import RewardFunc
from rlvr.integrations.verl import compute_score, compute_score_batch

pytestmark = pytest.mark.docker
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_serve import AUTH, start_server, stop  # noqa: E402

WRONG = "```python\ndef nothing(*args):\n    return None\n```"


def rows(name, file, n):
    path = DATA / name / file
    if not path.exists():
        needs.skip(f"{path} is missing")
    with path.open() as fh:
        return [json.loads(line) for _, line in zip(range(n), fh)]


def fenced(code):
    return f"<think>I will write it.</think>\n```python\n{code}\n```"


def test_trl_reward_on_mbpp_columns():
    tasks = rows("mbpp", "mbpp.jsonl", 3)
    columns = {k: [t[k] for t in tasks] for k in tasks[0]}  # every MBPP column, as TRL passes them
    reward = RewardFunc("code")
    right = reward(prompts=columns["text"], completions=[fenced(t["code"]) for t in tasks], **columns)
    assert right == [1.0, 1.0, 1.0]
    broken = reward(prompts=columns["text"], completions=[WRONG, "no code at all", fenced("def f(:")], **columns)
    assert broken == [0.0, 0.0, 0.0]


def test_verl_code_ground_truths_mbpp_and_stdin_stdout():
    tasks = rows("mbpp", "mbpp.jsonl", 2)
    truths = [json.dumps({"test_list": t["test_list"], "test_setup_code": t["test_setup_code"]}) for t in tasks]
    out = compute_score_batch(["mbpp"] * 4, [fenced(tasks[0]["code"]), fenced(tasks[1]["code"]), WRONG, WRONG],
                              truths + truths, [None] * 4)
    assert [(o["score"], o["acc"], o["reason"]) for o in out[:2]] == [(1.0, True, "")] * 2
    assert [(o["score"], o["reason"]) for o in out[2:]] == [(0.0, "tests_failed")] * 2
    adder = "import sys\nprint(sum(map(int, sys.stdin.read().split())))"
    io_truth = {"inputs": ["1 2\n", "5 5 5\n"], "outputs": ["3\n", "15\n"]}
    assert compute_score("codecontests", fenced(adder), json.dumps(io_truth))["score"] == 1.0
    half = compute_score("codecontests", fenced("print(3)"), io_truth)
    assert (half["score"], half["reason"]) == (0.5, "tests_failed")


def test_openrlhf_json_labels_route_to_the_code_verifier():
    tasks = rows("humaneval", "HumanEval.jsonl", 2)
    labels = [json.dumps({"verifier": "code", "tests": t["test"], "entry_point": t["entry_point"]}) for t in tasks]
    prompts = [f"<|im_start|>user\n{t['prompt']}<|im_end|>\n<|im_start|>assistant\n" for t in tasks]
    queries = [p + fenced(t["prompt"] + t["canonical_solution"]) + "<|im_end|>" for p, t in zip(prompts, tasks)]
    out = score_queries(queries + [prompts[0] + WRONG], prompts + prompts[:1], labels + labels[:1])
    assert out["rewards"] == [1.0, 1.0, 0.0] and out["scores"] == [1.0, 1.0, 0.0]
    assert out["extra_logs"]["rlvr/tests_failed"] == [0.0, 0.0, 1.0]


def test_humaneval_over_http():
    tasks = rows("humaneval", "HumanEval.jsonl", 2)
    proc, url = start_server()
    try:
        import httpx

        items = [{"completion": fenced(t["prompt"] + t["canonical_solution"]),
                  "fields": {"tests": t["test"], "entry_point": t["entry_point"]}} for t in tasks]
        items.append({"completion": WRONG, "fields": items[0]["fields"]})
        response = httpx.post(f"{url}/score", json={"verifier": "code", "options": {"mode": "all"}, "items": items},
                              headers=AUTH, timeout=120)
        assert response.status_code == 200, response.text
        results = response.json()["results"]
        assert [r["score"] for r in results] == [1.0, 1.0, 0.0]
        assert results[0]["info"]["status"] == "passed" and results[2]["reason"] == "tests_failed"
    finally:
        stop(proc)
    assert proc.returncode == 0  # the sandbox pool did not hold up the shutdown
