"""Verdicts that must agree with the official HumanEval and MBPP protocols, on the real Docker engine.

Officially a HumanEval job is `prompt + completion + test + check(entry_point)` in one process:
any exception in `check()` fails it, and so does `assert False`. rlvr splits `check()` into one
test per assert, which must not lose either. MBPP's `rlvr/MBPP-v0` must name the function under
test, or a task whose function shadows a builtin (MBPP/126's `sum`) cannot be solved. A job
killed for flooding its output says which limit killed it.
"""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import needs
import pytest
from conftest import require_docker

import rlvr.envs  # noqa: F401
from rlvr.envs import score_groups
from rlvr.sandbox.pool import SandboxPool
from rlvr.sandbox.protocol import Job
from rlvr.verifiers.code import CodeVerifier

pytestmark = pytest.mark.docker
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"

DOUBLE = "def double(x):\n    if x == 2:\n        raise ValueError('two')\n    return 2 * x\n"
LOOP_CHECK = "def check(candidate):\n    for x in [1, 2, 3]:\n        y = candidate(x)\n        assert y == 2 * x\n"
TRAILING_CHECK = ("def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(3) == 6\n"
                  "    kept = candidate(2)\n")
RIGHT = "def double(x):\n    return 2 * x\n"


@pytest.fixture(scope="module")
def pool():
    p = require_docker(lambda: SandboxPool(backend="docker", size=2))
    yield p
    p.close()


def fenced(code):
    return f"```python\n{code.rstrip()}\n```"


# -- an exception anywhere in check() fails the job --

def test_an_exception_outside_any_assert_fails_the_job(pool):
    in_loop, trailing, right = pool.run_batch([
        Job(code=DOUBLE, tests=LOOP_CHECK, entry_point="double"),
        Job(code=DOUBLE, tests=TRAILING_CHECK, entry_point="double"),
        Job(code=RIGHT, tests=LOOP_CHECK, entry_point="double"),
    ])
    for result in (in_loop, trailing):
        assert result.status == "failed", result
        assert result.passed < result.total
        failing = [t for t in result.tests if not t["passed"]]
        assert failing and "ValueError: two" in failing[-1]["error"], result.tests
    assert (right.status, right.passed, right.total) == ("passed", 1, 1)


def test_top_level_asserts_with_an_entry_point_are_the_tests_and_no_check_is_asked_for(pool):
    """Tests written as plain asserts (no check(candidate)) beside an entry point, as rlvr/MBPP-v0 sends them: the
    asserts are the tests; the missing check() is no failure (a right answer once scored 2/3 for it)."""
    asserts = "assert double(2) == 4\nassert double(0) == 0\n"
    right, wrong, empty = pool.run_batch([
        Job(code=RIGHT, tests=asserts, entry_point="double"),
        Job(code=DOUBLE, tests=asserts, entry_point="double"),
        Job(code=RIGHT, tests="x = 1\n", entry_point="double"),
    ])
    assert (right.status, right.passed, right.total) == ("passed", 2, 2), right.tests
    assert wrong.status == "failed" and [t["name"] for t in wrong.tests] == ["double(2) == 4", "double(0) == 0"]
    assert empty.status == "failed" and "neither check(candidate) nor an assert" in empty.tests[0]["error"], empty


@pytest.mark.parametrize("mode", ["all", "fraction"])
def test_an_exception_outside_any_assert_scores_below_one_in_either_mode(pool, mode):
    verifier = CodeVerifier(mode=mode, timeout=5.0)
    in_loop = verifier.score(fenced(DOUBLE), tests=LOOP_CHECK, entry_point="double")
    trailing = verifier.score(fenced(DOUBLE), tests=TRAILING_CHECK, entry_point="double")
    for score in (in_loop, trailing):
        assert score.value < 1.0 and score.reason == "tests_failed", score
    if mode == "all":
        assert in_loop.value == trailing.value == 0.0
    else:  # the asserts that held still count, out of one more test: the check that raised
        assert in_loop.value == 0.5 and trailing.value == pytest.approx(2 / 3)


@needs.skip_unless(DATA.is_dir(), "shared datasets not present")
def test_humaneval_32_fails_a_solution_that_raises_outside_the_assert(pool):
    rows = [json.loads(line) for line in (DATA / "humaneval" / "HumanEval.jsonl").read_text().splitlines()]
    row = rows[32]
    assert row["task_id"] == "HumanEval/32"
    # The canonical bisection, except that it refuses polynomials of degree 7 (8 coefficients),
    # which the check's random cases reach after some that it answers right.
    picky = "    if len(xs) == 8:\n        raise ValueError('degree 7')\n" + row["canonical_solution"]
    canonical, raising = pool.run_batch([
        Job(code=row["canonical_solution"], prefix=row["prompt"], tests=row["test"], entry_point=row["entry_point"]),
        Job(code=picky, prefix=row["prompt"], tests=row["test"], entry_point=row["entry_point"]),
    ])
    assert canonical.status == "passed"
    assert raising.status == "failed" and any("degree 7" in e for e in raising.errors), raising


# -- assert False is a test --

def test_a_false_constant_assert_fails_and_a_true_one_counts_for_nothing(pool):
    hint = "def check(candidate):\n    assert True, 'hint'\n    assert candidate(2) == 4\n"
    false_after = "def check(candidate):\n    assert candidate(2) == 4\n    assert False, 'never'\n"
    false_branch = ("def check(candidate):\n    assert candidate(2) == 4\n    if candidate(3) != 6:\n"
                    "        assert False, 'wrong on 3'\n")
    hinted, falsy, branch_ok, branch_bad = pool.run_batch([
        Job(code=RIGHT, tests=hint, entry_point="double"),
        Job(code=RIGHT, tests=false_after, entry_point="double"),
        Job(code=RIGHT, tests=false_branch, entry_point="double"),
        Job(code="def double(x):\n    return 4 if x == 2 else 0\n", tests=false_branch, entry_point="double"),
    ])
    assert (hinted.status, hinted.passed, hinted.total) == ("passed", 1, 1)
    assert falsy.status == "failed" and falsy.passed == 1, falsy
    assert branch_ok.status == "passed", branch_ok
    assert branch_bad.status == "failed", branch_bad


# -- MBPP names its function under test --

@needs.skip_unless(DATA.is_dir(), "shared datasets not present")
def test_mbpp_126_whose_function_is_named_sum_is_solvable_in_the_env():
    record = next(json.loads(line) for line in (DATA / "mbpp" / "mbpp.jsonl").read_text().splitlines()
                  if json.loads(line)["task_id"] == 126)
    env = gym.make("rlvr/MBPP-v0")
    env.reset(options={"index": 126 - 11})
    assert env.unwrapped.task.task_id == "mbpp/126"
    assert env.unwrapped.task.fields["entry_point"] == "sum"
    wrong = "def sum(a, b):\n    return a + b\n"
    (reference, info), (bad, _) = score_groups([env], [[fenced(record["code"]), fenced(wrong)]])[0]
    assert reference == 1.0 and info["correct"], info
    assert bad == 0.0


# -- which limit killed a job --

def test_a_job_killed_for_its_output_names_the_output_cap(pool):
    loud = "def double(x):\n    print('y' * (5 * 2**20))\n    return 2 * x\n"
    result = pool.run(Job(code=loud, tests="def check(candidate):\n    assert candidate(2) == 4\n",
                          entry_point="double"))
    assert result.status == "failed"
    assert "output limit" in result.error and "4 MiB" in result.error, result
    assert "output limit" in result.tests[0]["error"], result.tests
    score = CodeVerifier(mode="all").score(fenced(loud), tests="def check(candidate):\n    assert candidate(2) == 4\n",
                                           entry_point="double")
    assert score.value == 0.0 and "output limit" in score.info["error"] and "4 MiB" in score.info["error"]
