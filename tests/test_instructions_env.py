"""rlvr/InstructionFollowing-v0: generated prompts with 1-3 compatible instructions, scored per instruction."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import rlvr.envs  # noqa: F401  (registers the ids)
from rlvr.envs.tasks_instructions import ALONE, InstructionTasks, compatible
from rlvr.verifiers.instructions import INSTRUCTION_IDS


@pytest.mark.parametrize("difficulty", [1, 3])
def test_check_env(difficulty):
    check_env(gym.make("rlvr/InstructionFollowing-v0", difficulty=difficulty).unwrapped)


def test_items_combine_compatible_instructions_of_every_type():
    seen = set()
    for difficulty in (1, 2, 3):
        source = InstructionTasks(difficulty=difficulty)
        for index in range(150):
            task = source.get(index)
            ids = [i["id"] for i in task.reference]
            assert len(ids) == difficulty and task.prompt.startswith("Write ")
            assert all(compatible(a, b) for n, a in enumerate(ids) for b in ids[n + 1:])
            assert difficulty == 1 or not ALONE & set(ids)
            seen.update(ids)
    assert seen == set(INSTRUCTION_IDS)
    assert InstructionTasks(2).get(7) == InstructionTasks(2).get(7)  # replayable
    assert InstructionTasks(2, seed=1).get(7).prompt != InstructionTasks(2).get(7).prompt


def _find(env, instruction_id):
    for index in range(500):
        env.reset(options={"index": index})
        if [i["id"] for i in env.unwrapped.task.reference] == [instruction_id]:
            return env.unwrapped.task
    raise AssertionError(f"no item with only {instruction_id}")


def test_step_scores_the_instructions():
    env = gym.make("rlvr/InstructionFollowing-v0")
    _find(env, "punctuation:no_comma")
    _, reward, terminated, _, info = env.step("Bees hum on the roof and the city hums below.")
    assert reward == 1.0 and terminated and info["correct"]
    _find(env, "punctuation:no_comma")
    _, reward, _, _, info = env.step("Bees, roofs, and honey.")
    assert reward == 0.0 and not info["correct"]
    assert info["score"]["reasons"]["correct"] == "not_followed"
    assert info["score"]["info"]["correct"]["instructions"][0]["why"] == "2 comma(s)"


def test_loose_and_partial_options():
    env = gym.make("rlvr/InstructionFollowing-v0", difficulty=2, partial=True, mode="loose")
    env.reset(seed=3)
    verifier = env.unwrapped.reward.components["correct"][0]
    assert verifier.mode == "loose" and verifier.partial
    with pytest.raises(ValueError, match="mode"):
        gym.make("rlvr/InstructionFollowing-v0", mode="lenient")
