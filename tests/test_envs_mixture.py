"""rlvr/CodeMix-v0 and MixedTasks: tasks from several sources in proportion to their weights, the same
task for the same index in every process, one verifier for all (mismatched parts are refused)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import gymnasium as gym
import needs
import pytest

import rlvr.envs  # noqa: F401
from rlvr.envs.mixture import MixedTasks
from rlvr.envs.tasks import ListTasks
from rlvr.envs.tasks_arithmetic import ArithmeticTasks
from rlvr.envs.tasks_code import CodeTasks

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
needs_data = needs.skip_unless((DATA / "mbpp").is_dir(), "shared datasets not present")


def test_parts_come_in_proportion_to_their_weights_and_each_index_is_one_task():
    a = ListTasks([{"prompt": f"a{i}", "answer": "1"} for i in range(5)], family="a")
    b = ListTasks([{"prompt": f"b{i}", "answer": "1"} for i in range(5)], family="b")
    mixed = MixedTasks([(a, 1), (b, 3)])
    families = Counter(mixed.get(i).family for i in range(4000))
    assert 0.70 < families["b"] / 4000 < 0.80, families
    again = MixedTasks([(a, 1), (b, 3)])
    assert [again.get(i) for i in range(50)] == [mixed.get(i) for i in range(50)]
    assert len({mixed.get(i).prompt for i in range(200)}) == 10  # every item of both parts is reached


def test_a_generator_part_draws_from_its_unbounded_items():
    mixed = MixedTasks([(CodeTasks(difficulty=1), 1)])
    assert len({mixed.get(i).task_id for i in range(50)}) == 50


@pytest.mark.parametrize("parts,message", [
    ([], "at least one part"),
    ([(CodeTasks(), 0)], "weight"),
    ([(CodeTasks(), True)], "weight"),
    ([(CodeTasks(), 1), (ArithmeticTasks(), 1)], "must share"),
])
def test_bad_mixtures_are_refused(parts, message):
    with pytest.raises(ValueError, match=message):
        MixedTasks(parts)


@pytest.mark.parametrize("kwargs,message", [
    ({"parts": {}}, "parts must map"),
    ({"parts": {"mbpq": {}}}, "unknown part"),
])
def test_the_env_names_what_is_wrong_with_its_parts(kwargs, message):
    with pytest.raises(ValueError, match=message):
        gym.make("rlvr/CodeMix-v0", **kwargs)


@needs_data
def test_mbpp_train_with_codegen_is_one_code_env():
    env = gym.make("rlvr/CodeMix-v0", parts={"mbpp": {"split": "train"}, "codegen": {"difficulty": 1, "weight": 3}})
    seen = Counter()
    for seed in range(200):
        _, info = env.reset(seed=seed)
        seen[info["family"]] += 1
        task = env.unwrapped.task
        assert task.fields["test_list"] and task.fields["entry_point"]
        if task.family == "mbpp":
            assert 601 <= int(task.task_id.split("/")[1]) <= 974  # the train split's ids only
    assert set(seen) == {"mbpp", "codegen"} and seen["codegen"] > seen["mbpp"]
    reward, _, _ = env.unwrapped.scoring_inputs()
    assert type(reward.components["correct"][0]).__name__ == "CodeVerifier"
