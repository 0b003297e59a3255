"""The loop reports the seconds its groups spent in the envs (`Group.env_s`: scoring, tools), which the
trainer logs as `env_s` and `env_share`: a slow sandbox must show in a step's metrics, not hide in its
sampling time. The envs are real; their scoring or step is made slow on purpose."""

from __future__ import annotations

import time

import gymnasium as gym
import pytest

from rlvr.envs import ListTasks
from rlvr.envs.base import TaskEnv
from rlvr.envs.multiturn import MultiTurnEnv
from rlvr.trainer.rollout.loop import rollout
from rlvr.trainer.rollout.sessions import BatchSession, SamplingSettings, Turn

TASKS = [{"prompt": f"What is {a} + {b}?", "answer": str(a + b)} for a in range(3) for b in range(3)]
PAUSE = 0.3


class SlowScoring(TaskEnv):
    """Single-turn: its group scoring takes PAUSE seconds more."""

    def score_group(self, completions):
        time.sleep(PAUSE)
        return super().score_group(completions)


class SlowSteps(MultiTurnEnv):
    """Two turns; every step takes PAUSE seconds more."""

    def step(self, action):
        time.sleep(PAUSE)
        return super().step(action)

    def next_message(self, score, info):
        return "Once more, please."


gym.register("test_rollout_env_time/Slow-v0", entry_point=lambda **kw: SlowScoring(ListTasks(TASKS), **kw))
gym.register("test_rollout_env_time/SlowSteps-v0",
             entry_point=lambda **kw: SlowSteps(ListTasks(TASKS), max_turns=2, **kw))


class Instant:
    """A message generator that answers at once, so the envs' time is nearly all of a rollout's."""

    def start(self, batch, settings):
        return _Instant(batch, settings)


class _Instant(BatchSession):
    def first(self):
        return self.next(list(range(len(self.batch.envs))))

    def next(self, rows):
        return [Turn(r, text="The sum is \\boxed{2}.") for r in rows]


@pytest.mark.parametrize("env_id,envs_needed,pauses", [
    ("test_rollout_env_time/Slow-v0", 2, 2),  # one scoring call per prompt
    ("test_rollout_env_time/SlowSteps-v0", 4, 2),  # two turns; each turn's steps run side by side
])
def test_groups_carry_the_seconds_spent_in_the_envs(env_id, envs_needed, pauses):
    envs = [gym.make(env_id) for _ in range(envs_needed)]
    try:
        t0 = time.perf_counter()
        groups = rollout(Instant(), envs, [{"seed": 0}, {"seed": 1}], [0, 1], SamplingSettings(n=2))
        wall = time.perf_counter() - t0
    finally:
        for env in envs:
            env.close()
    total = sum(g.env_s for g in groups)
    assert pauses * PAUSE <= total <= wall
    assert groups[0].env_s == groups[1].env_s  # the batch's time, shared evenly
