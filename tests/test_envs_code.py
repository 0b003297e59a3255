"""Code envs score in the Docker sandbox: generated tasks, HumanEval, MBPP, and the feedback loop."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import needs
import pytest
from gymnasium.utils.env_checker import check_env

import rlvr.envs  # noqa: F401
from rlvr.envs import score_groups

pytestmark = pytest.mark.docker
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
needs_data = needs.skip_unless(DATA.is_dir(), "shared datasets not present")

# Our own solutions to the tier-1 templates of rlvr.envs.tasks_code.
SOLUTIONS = {
    "sum_multiples": "def sum_multiples(n, k):\n    return sum(i for i in range(1, n) if i % k == 0)\n",
    "count_vowels": "def count_vowels(s):\n    return sum(ch.lower() in 'aeiou' for ch in s)\n",
    "digital_root": "def digital_root(n):\n    return 0 if n == 0 else 1 + (n - 1) % 9\n",
    "prefix_max": "def prefix_max(xs):\n    out = []\n    for x in xs:\n        out.append(max(out[-1], x) if out else x)\n"
                  "    return out\n",
}


def fenced(code: str) -> str:
    return f"Here is the function.\n```python\n{code}\n```"


def half_wrong(name: str) -> str:
    """Our solution to template `name`, made wrong (a repr of the answer) on about half the inputs."""
    return SOLUTIONS[name].replace(f"def {name}(", f"def _right_{name}(") + (
        f"\ndef {name}(*args):\n    result = _right_{name}(*args)\n"
        "    return result if sum(map(ord, repr(args))) % 2 else repr(result)\n")


@pytest.mark.parametrize("env_id,kwargs", [("rlvr/CodeGen-v0", {"difficulty": 2}),
                                           ("rlvr/CodeFeedback-v0", {"tasks": "codegen", "max_turns": 2})])
def test_check_env_passes(env_id, kwargs):
    check_env(gym.make(env_id, **kwargs).unwrapped)


def test_codegen_scores_right_wrong_and_broken_code():
    envs = [gym.make("rlvr/CodeGen-v0", difficulty=1) for _ in range(6)]
    completions = []
    for b, env in enumerate(envs):
        env.reset(seed=b)
        name = env.unwrapped.task.fields["entry_point"]
        completions.append([fenced(SOLUTIONS[name]), fenced(half_wrong(name)), "```python\ndef broken(:\n```",
                            "I can't."])
    results = score_groups(envs, completions)
    for row in results:
        (right, info_right), (wrong, _), (_, info_broken), (_, info_none) = row
        assert right == 1.0 and info_right["correct"]
        assert 0.0 <= wrong < 1.0
        assert info_broken["score"]["reason"] == "parse_error"
        assert info_none["score"]["reason"] in ("parse_error", "no_answer")
    assert len({env.unwrapped.task.fields["entry_point"] for env in envs}) >= 2


def test_a_verifier_with_options_from_a_config_replaces_the_reward():
    """`verifier: {name: code, mode: all}` (what YAML can say): the same wrong-half-the-time program earns
    its share of tests under the default, nothing under `all`, half its share under `bonus`."""
    values = {}
    for mode in ("fraction", "all", "bonus"):
        env = gym.make("rlvr/CodeGen-v0", difficulty=1, **({} if mode == "fraction" else
                                                           {"verifier": {"name": "code", "mode": mode}}))
        env.reset(seed=4)
        name = env.unwrapped.task.fields["entry_point"]
        ((right, _), (values[mode], info)), = score_groups([env], [[fenced(SOLUTIONS[name]), fenced(half_wrong(name))]])
        assert right == 1.0 and not info["correct"]
    assert 0 < values["fraction"] < 1 and values["all"] == 0.0 and values["bonus"] == values["fraction"] / 2
    with pytest.raises(TypeError, match="needs its registered name"):
        gym.make("rlvr/CodeGen-v0", verifier={"mode": "all"})


@needs_data
def test_humaneval_and_mbpp_reference_solutions_pass():
    he = [json.loads(line) for line in (DATA / "humaneval" / "HumanEval.jsonl").read_text().splitlines()][:6]
    mbpp = [json.loads(line) for line in (DATA / "mbpp" / "mbpp.jsonl").read_text().splitlines()][10:16]
    envs, completions = [], []
    for i, record in enumerate(he):
        env = gym.make("rlvr/HumanEval-v0")
        env.reset(options={"index": i})
        envs.append(env)
        completions.append([fenced(record["prompt"] + record["canonical_solution"]),
                            fenced(f"def {record['entry_point']}(*args):\n    return None")])
    for i, record in enumerate(mbpp):
        env = gym.make("rlvr/MBPP-v0")
        env.reset(options={"index": i})
        assert env.unwrapped.task.task_id == f"mbpp/{record['task_id']}"
        envs.append(env)
        completions.append([fenced(record["code"]), fenced("pass")])
    results = score_groups(envs, completions)
    assert [row[0][0] for row in results] == [1.0] * 12
    assert all(row[1][0] < 1.0 and not row[1][1]["correct"] for row in results)


def test_code_feedback_returns_the_failing_tests_then_ends_on_success():
    env = gym.make("rlvr/CodeFeedback-v0", tasks="codegen", difficulty=1, max_turns=3)
    obs, info = env.reset(seed=4)
    name = env.unwrapped.task.fields["entry_point"]
    tests = env.unwrapped.task.fields["test_list"]
    obs, reward, terminated, truncated, info = env.step(fenced(f"def {name}(*args):\n    return -12345"))
    assert not terminated and not truncated and reward == 0.0
    assert info["turn"] == 1 and info["turn_rewards"] == [0.0] and "final_reward" not in info
    assert [m["role"] for m in obs] == ["system", "user", "assistant", "user"]
    feedback = obs[-1]["content"]
    assert f"passed 0 of {len(tests)} tests" in feedback and tests[0] in feedback and "AssertionError" in feedback
    obs, reward, terminated, _, info = env.step(fenced(SOLUTIONS[name]))
    assert terminated and reward == 1.0 and info["correct"]
    assert info["turn"] == 2 and info["turn_rewards"] == [0.0, 1.0] and info["final_reward"] == 1.0
    assert len(obs) == 5 and obs[-1]["role"] == "assistant"
    with pytest.raises(gym.error.ResetNeeded):
        env.step("again")


def test_code_feedback_stops_after_max_turns():
    env = gym.make("rlvr/CodeFeedback-v0", tasks="codegen", difficulty=1, max_turns=2)
    env.reset(seed=0)
    _, _, terminated, _, _ = env.step("```python\nx = (\n```")
    assert not terminated
    _, _, terminated, _, info = env.step("```python\nx = (\n```")
    assert terminated and info["turn_rewards"] == [0.0, 0.0] and info["final_reward"] == 0.0
    with pytest.raises(ValueError, match="max_turns"):
        gym.make("rlvr/CodeFeedback-v0", max_turns=0)


def test_a_code_mixture_scores_its_tasks_in_the_sandbox():
    envs = [gym.make("rlvr/CodeMix-v0", parts={"codegen": {"difficulty": 1}})
            for _ in range(3)]
    completions = []
    for b, env in enumerate(envs):
        env.reset(seed=b)
        name = env.unwrapped.task.fields.get("entry_point")
        completions.append([fenced(SOLUTIONS[name]), fenced(f"def {name}(*args):\n    return None\n")])
    for (right, info), (wrong, _) in score_groups(envs, completions):
        assert right == 1.0 and info["correct"] and wrong == 0.0
