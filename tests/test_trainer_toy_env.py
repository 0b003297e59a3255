"""A trivial env with the rlvr env contract, for CI-sized trainer tests with a tiny random model.

The reward is the share of a completion's characters that are lowercase ASCII letters: a
random model scores about half, with spread inside every group, and a policy raises it by
shifting probability towards word-like tokens, which a 2-layer model learns in a few steps.
With `steps=True` each whitespace-separated chunk is also a step, rewarded by its own share
(`info["step_rewards"]`, for process supervision).
`gymnasium.make("test_trainer_toy_env:Letters-v0")` imports this module and registers the id.
"""

from __future__ import annotations

import re

import gymnasium as gym
import pytest

from rlvr.envs.spaces import AnyText, Messages
from rlvr.verifiers.core import Score


def letter_share(text: str) -> float:
    return sum("a" <= ch <= "z" for ch in text) / len(text) if text else 0.0


class Letters(gym.Env):
    metadata: dict = {"render_modes": []}

    def __init__(self, words: int = 3, steps: bool = False):
        self.words, self.steps = words, steps
        self._task = None
        self.observation_space, self.action_space = Messages(), AnyText()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        n = int(self.np_random.integers(1, 1000))
        self._task = f"toy-{n}"
        text = f"Write {self.words} words about the number {n}."
        obs = [{"role": "user", "content": text}]
        return obs, {"task_id": self._task, "family": "toy", "difficulty": 0, "prompt_text": text}

    def _score(self, completion: str) -> tuple[float, dict]:
        value = letter_share(completion)
        score = Score(value, None if value == 1.0 else "wrong", components={"letters": value})
        info = {"score": score.to_dict(), "correct": value >= 0.9}
        if self.steps:
            info["step_rewards"] = [[m.end(), letter_share(m.group())] for m in re.finditer(r"\S+", completion)]
        return value, info

    def step(self, action):
        reward, info = self._score(action)
        return [{"role": "assistant", "content": action}], reward, True, False, info

    def score_group(self, completions):
        return [self._score(c) for c in completions]


if "Letters-v0" not in gym.registry:
    gym.register("Letters-v0", entry_point=Letters)


def test_toy_env_follows_the_env_contract():
    env = gym.make("test_trainer_toy_env:Letters-v0", words=2)
    obs, info = env.reset(seed=3)
    assert obs[0]["role"] == "user" and "2 words" in obs[0]["content"]
    assert {"task_id", "family", "difficulty", "prompt_text"} <= set(info)
    assert env.reset(seed=3)[1]["task_id"] == info["task_id"]
    _, reward, terminated, _, step_info = env.step("ab!!")
    assert terminated and reward == pytest.approx(0.5) and step_info["correct"] is False
    assert [r for r, _ in env.unwrapped.score_group(["abc", "A1"])] == [1.0, 0.0]


def test_steps_are_the_chunks_of_a_completion():
    env = gym.make("test_trainer_toy_env:Letters-v0", steps=True)
    env.reset(seed=0)
    (_, info), = env.unwrapped.score_group(["ab c1  x"])
    assert info["step_rewards"] == [[2, 1.0], [5, 0.5], [8, 1.0]]
