"""Real benchmark data through the Docker pool: every HumanEval canonical solution passes and a
mutated variant of each fails; MBPP reference solutions pass (test_setup_code included)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import needs
import pytest
from conftest import require_docker

from rlvr.sandbox.pool import get_pool
from rlvr.verifiers.code import CodeVerifier

pytestmark = pytest.mark.docker

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
HUMANEVAL = DATASETS / "humaneval" / "HumanEval.jsonl"
MBPP = DATASETS / "mbpp" / "mbpp.jsonl"

# Appended to a canonical solution: the outermost call returns a different value of the same
# kind, so at least one assert of every problem must fail (recursion inside stays intact).
MUTATION = '''
def _rlvr_mutate(value):
    if type(value) is bool:
        return not value
    if type(value) in (int, float):
        return value + 1.5 if type(value) is float else value + 1
    if type(value) is str:
        return value + "#"
    if type(value) in (list, tuple):
        return type(value)(list(value) + [None])
    if value is None:
        return 0
    if type(value) is dict:
        return {{**value, "#": None}}
    return None

_rlvr_depth = [0]
_rlvr_original = {name}

def {name}(*args, **kwargs):
    _rlvr_depth[0] += 1
    try:
        result = _rlvr_original(*args, **kwargs)
    finally:
        _rlvr_depth[0] -= 1
    return _rlvr_mutate(result) if _rlvr_depth[0] == 0 else result
'''


def _rows(path):
    if not path.exists():
        needs.skip(f"dataset not found at {path}")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def verifier():
    v = CodeVerifier(mode="all", timeout=10.0)
    require_docker(lambda: get_pool(v.backend, v.pool_size, v.image, v.limits))
    return v


def test_all_humaneval_canonical_solutions_pass_and_mutants_fail(verifier):
    rows = _rows(HUMANEVAL)
    assert len(rows) == 164
    fields = [{"prefix": r["prompt"], "tests": r["test"], "entry_point": r["entry_point"]} for r in rows]
    canonical = [r["canonical_solution"] for r in rows]
    mutants = [r["canonical_solution"] + MUTATION.format(name=r["entry_point"]) for r in rows]
    scores = verifier.score_batch(canonical + mutants, None, fields + fields)
    good, bad = scores[:164], scores[164:]
    not_passing = {r["task_id"]: (s.info["status"], s.info.get("errors")) for r, s in zip(rows, good) if s.value != 1}
    assert not not_passing, not_passing
    passing_mutants = [r["task_id"] for r, s in zip(rows, bad) if s.value != 0]
    assert not passing_mutants
    assert all(s.info["status"] != "error" for s in bad)


def test_humaneval_full_function_completion_in_a_fence(verifier):
    row = _rows(HUMANEVAL)[0]
    completion = f"<think>easy</think>Done:\n```python\n{row['prompt']}{row['canonical_solution']}```"
    assert verifier.score(completion, tests=row["test"], entry_point=row["entry_point"]).value == 1.0


def test_mbpp_reference_solutions_pass(verifier):
    rows = _rows(MBPP)
    picked = rows[:120] + [r for r in rows if r["test_setup_code"].strip()]
    fields = []
    for r in picked:
        entry = re.search(r"assert\W*(\w+)", r["test_list"][0]).group(1)
        fields.append({"test_list": r["test_list"], "test_setup_code": r["test_setup_code"], "entry_point": entry})
    scores = verifier.score_batch([f"```python\n{r['code']}\n```" for r in picked], None, fields)
    failing = {r["task_id"]: s.info.get("errors") or s.info["status"] for r, s in zip(picked, scores) if s.value != 1}
    assert not failing, failing
    wrong = verifier.score("```python\ndef min_cost(cost, m, n):\n    return 0\n```", **fields[0])
    assert wrong.value == 0.0 and wrong.reason == "tests_failed"
