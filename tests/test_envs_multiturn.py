"""The math env with a self-check turn."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import rlvr.envs  # noqa: F401
from rlvr.envs.multiturn import SELF_CHECK


def test_self_check_turn_then_final_answer():
    env = gym.make("rlvr/MathSelfCheck-v0", tasks="arithmetic", digits=2)
    obs, info = env.reset(seed=1)
    gold = env.unwrapped.task.reference
    obs, reward, terminated, _, info = env.step(f"\\boxed{{{int(gold) + 1}}}")
    assert not terminated and reward == 0.0 and info["turn"] == 1 and not info["correct"]
    assert obs[-1] == {"role": "user", "content": SELF_CHECK}
    assert [m["role"] for m in obs] == ["system", "user", "assistant", "user"]
    obs, reward, terminated, _, info = env.step(f"I made a mistake; it is \\boxed{{{gold}}}")
    assert terminated and reward == 1.0 and info["correct"]
    assert info["turn_rewards"] == [0.0, 1.0] and info["final_reward"] == 1.0


def test_self_check_off_is_single_turn():
    env = gym.make("rlvr/MathSelfCheck-v0", tasks="arithmetic", self_check=False)
    env.reset(seed=1)
    gold = env.unwrapped.task.reference
    _, reward, terminated, _, info = env.step(f"\\boxed{{{gold}}}")
    assert terminated and reward == 1.0 and info["turn_rewards"] == [1.0] and info["final_reward"] == 1.0


def test_a_right_first_answer_still_gets_checked_and_can_be_spoiled():
    env = gym.make("rlvr/MathSelfCheck-v0", tasks="linear", difficulty=2)
    env.reset(seed=3)
    gold = env.unwrapped.task.reference
    _, first, terminated, _, _ = env.step(f"\\boxed{{{gold}}}")
    assert first == 1.0 and not terminated
    _, final, terminated, _, info = env.step("On reflection \\boxed{12345}")
    assert terminated and final == 0.0 and info["turn_rewards"] == [1.0, 0.0] and info["final_reward"] == 0.0


def test_check_env_and_bad_arguments():
    check_env(gym.make("rlvr/MathSelfCheck-v0", tasks="arithmetic").unwrapped)
    with pytest.raises(TypeError, match="self_check"):
        gym.make("rlvr/MathSelfCheck-v0", self_check="yes")
