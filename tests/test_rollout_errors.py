"""A generator that fails mid-episode (a served model's outage) ends the episode as `error` with return 0,
whatever the turns before the failure earned, under either `episode_return`. The env and the loop are
real; the generator is a message generator whose later turns fail, as an endpoint's do when its server
goes away."""

from __future__ import annotations

import re

import gymnasium as gym
import pytest

from rlvr.envs import ListTasks
from rlvr.envs.multiturn import MultiTurnEnv
from rlvr.trainer.rollout.loop import rollout
from rlvr.trainer.rollout.sessions import BatchSession, SamplingSettings, Turn

TASKS = [{"prompt": f"What is {a} + {b}?", "answer": str(a + b)} for a in range(3) for b in range(3)]


class AskAgain(MultiTurnEnv):
    """Three turns, each scored on its own: the same question again after every answer."""

    def next_message(self, score, info):
        return "Once more, please."


gym.register("test_rollout_errors/AskAgain-v0", entry_point=lambda **kw: AskAgain(ListTasks(TASKS), max_turns=3, **kw))


def right_answer(first_messages: list[dict]) -> str:
    a, b = map(int, re.findall(r"\d+", first_messages[-1]["content"]))
    return f"The sum is \\boxed{{{a + b}}}."


class RightUntil:
    """A message generator that answers right for `good` turns of every episode, then fails."""

    def __init__(self, good: int):
        self.good = good

    def start(self, batch, settings):
        return _RightUntil(batch, settings, self.good)


class _RightUntil(BatchSession):
    def __init__(self, batch, settings, good: int):
        super().__init__(batch, settings)
        self.good, self.asked = good, [0] * len(batch.envs)

    def first(self):
        return self.next(list(range(len(self.batch.envs))))

    def next(self, rows):
        turns = []
        for r in rows:
            self.asked[r] += 1
            ok = self.asked[r] <= self.good
            turns.append(Turn(r, text=right_answer(self.batch.prompts[r // self.n])) if ok
                         else Turn(r, error="the server went away"))
        return turns


def _play(generator, episode_return: str):
    envs = [gym.make("test_rollout_errors/AskAgain-v0") for _ in range(4)]
    try:
        groups = rollout(generator, envs, [{"seed": 0}, {"seed": 1}], [0, 1], SamplingSettings(n=2),
                         episode_return=episode_return)
    finally:
        for env in envs:
            env.close()
    assert [len(g.infos) for g in groups] == [2, 2]  # every episode came back: the tests loop over them
    return groups


def test_every_turn_right_earns_each_turns_reward():
    for group in _play(RightUntil(good=3), "sum"):
        assert group.rewards == [3.0, 3.0]
        assert all(i["turn_rewards"] == [1.0, 1.0, 1.0] and i["turns"] == 3 for i in group.infos)


@pytest.mark.parametrize("episode_return", ["sum", "final"])
def test_an_outage_after_a_right_turn_is_an_error_with_return_zero(episode_return):
    for group in _play(RightUntil(good=1), episode_return):
        assert group.rewards == [0.0, 0.0]
        for info in group.infos:
            assert info["score"]["reason"] == "error" and info["error"] == "the server went away"
            assert info["correct"] is False
            assert info["turns"] == 1 and info["turn_rewards"] == [1.0]  # the turn played before the outage
            assert len(info["replies"]) == 1 and re.fullmatch(r"The sum is \\boxed\{\d\}\.", info["replies"][0])
