"""A CI-sized GRPO run on a reasoning-gym env with curriculum stages (the tiny random model)."""

from __future__ import annotations

from rlvr.trainer.config import TrainConfig
from rlvr.trainer.grpo import GRPOTrainer
from rlvr.trainer.metrics import read_jsonl


def test_trainer_runs_a_reasoning_gym_curriculum(tmp_path):
    config = TrainConfig(
        model="tiny", env="rg/basic_arithmetic-v0", steps=4, prompts_per_step=2, group_size=4, max_new_tokens=8,
        lr=1e-3, threads=1, progress=False, eval_prompts=4,
        # a random model boxes nothing, so every reward is 0: train on the groups anyway (zero advantages)
        skip_zero_variance=False, env_kwargs={"difficulty": 1, "weights": {"repetition": 0.5}},
        curriculum=[{"until_step": 2, "env_kwargs": {"difficulty": 1}}, {"env_kwargs": {"difficulty": 3}}],
    )
    trainer = GRPOTrainer(config, tmp_path)
    trainer.train()
    metrics = read_jsonl(tmp_path / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2, 3, 4]
    assert [m["env_kwargs"]["difficulty"] for m in metrics] == [1, 1, 3, 3]
    assert all(env.unwrapped.source.difficulty == 3 for env in trainer.envs)
    assert all(env.unwrapped.task.family == "basic_arithmetic" for env in trainer.envs)
    assert [m["groups_trained"] for m in metrics] == [2, 2, 2, 2]
    assert all("reward/correct_mean" in m and "reward/repetition_mean" in m for m in metrics)
    evals = read_jsonl(tmp_path / "eval.jsonl")
    assert [e["step"] for e in evals] == [0, 4]
