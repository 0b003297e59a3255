"""Prompt replay (trainer/replay.py): which prompts are asked again, with new draws, and a resumed
run replays the same ones."""

from __future__ import annotations

import pytest
import test_trainer_run
import torch

from rlvr.trainer.config import TrainConfig
from rlvr.trainer.grpo import GRPOTrainer
from rlvr.trainer.metrics import read_jsonl
from rlvr.trainer.replay import ReplayBuffer
from rlvr.trainer.rollout.groups import prompt_seed

TOY = {**test_trainer_run.TOY, "min_lr_ratio": 1.0}  # a constant lr: a run cut short keeps the schedule


def test_the_buffer_takes_at_random_per_step_and_keeps_the_newest():
    buffer = ReplayBuffer(capacity=3, seed=7)
    buffer.add([(1, 1), (2, 1), (3, 1), (4, 1)])
    assert buffer.entries == [(2, 1), (3, 1), (4, 1)]  # the oldest fell out
    again = ReplayBuffer(capacity=3, seed=7)
    again.load(buffer.state())
    taken = buffer.take(step=5, count=2)
    assert taken == again.take(step=5, count=2)  # a function of (seed, step)
    assert len(taken) == 2 and set(taken) | set(buffer.entries) == {(2, 1), (3, 1), (4, 1)}
    rest = list(buffer.entries)
    assert buffer.take(step=6, count=5) == rest and buffer.entries == []  # no more than it holds
    off = ReplayBuffer(capacity=0, seed=0)
    off.add([(1, 1)])
    assert off.entries == []


def test_a_replayed_prompt_gets_new_draws_and_a_fresh_one_keeps_its_own():
    def draws(seed, index, draw):
        return torch.rand(4, generator=torch.Generator().manual_seed(prompt_seed(seed, index, draw))).tolist()

    # a first asking keeps the key it always had (runs without replay are unchanged)
    assert draws(3, 12, 0) == torch.rand(4, generator=torch.Generator().manual_seed(3 << 20 ^ 12)).tolist()
    seen = [draws(seed, index, draw) for seed in (0, 1) for index in (12, 13) for draw in range(4)]
    assert len({tuple(x) for x in seen}) == len(seen)
    assert draws(1, 12, 2) == draws(1, 12, 2)


def test_replay_asks_signal_prompts_again_and_draws_fewer_fresh_ones(tmp_path):
    trainer = GRPOTrainer(TrainConfig(**TOY, steps=6, replay_fraction=0.5), tmp_path / "replay")
    metrics = trainer.train()
    samples = read_jsonl(tmp_path / "replay" / "samples.jsonl")
    asked: dict[int, list[int]] = {}
    for s in samples:
        asked.setdefault(s["prompt"], []).append(s["step"])
    again = {p: steps for p, steps in asked.items() if len(steps) > 1}
    replayed = sum(r["replayed"] for r in metrics)
    assert replayed > 0 and len(again) > 0, (metrics, asked)
    assert all(r["replayed"] <= 2 for r in metrics)
    assert trainer.data_position == 6 * 4 - replayed  # replays take the place of fresh prompts
    assert max(asked) == trainer.data_position - 1
    # off by default: every prompt is asked once
    plain = GRPOTrainer(TrainConfig(**TOY, steps=3), tmp_path / "plain")
    assert all(r["replayed"] == 0 for r in plain.train())
    assert plain.data_position == 12


def test_a_resumed_run_replays_what_the_uninterrupted_run_replayed(tmp_path):
    whole = GRPOTrainer(TrainConfig(**TOY, steps=6, replay_fraction=0.5), tmp_path / "whole").train()
    GRPOTrainer(TrainConfig(**TOY, steps=3, replay_fraction=0.5, checkpoint_every=3), tmp_path / "cut").train()
    resumed = GRPOTrainer(TrainConfig(**TOY, steps=6, replay_fraction=0.5), tmp_path / "cut", resume=True)
    assert resumed.replay.entries  # the buffer came back from the checkpoint
    resumed.train()
    test_trainer_run._same(read_jsonl(tmp_path / "cut" / "metrics.jsonl"), whole)
    assert sum(r["replayed"] for r in whole[3:]) > 0


def test_a_new_curriculum_stage_starts_with_an_empty_buffer(tmp_path):
    stages = [{"until_step": 3, "env_kwargs": {"words": 2}}, {"env_kwargs": {"words": 3}}]
    metrics = GRPOTrainer(TrainConfig(**TOY, steps=5, replay_fraction=0.5, curriculum=stages), tmp_path / "c").train()
    replayed = [r["replayed"] for r in metrics]
    assert replayed[0] == 0 and replayed[3] == 0, replayed  # step 4 is the first of the second stage
    assert replayed[1] + replayed[2] > 0 and replayed[4] > 0, replayed


@pytest.mark.parametrize("bad", [{"replay_fraction": 1.5}, {"replay_fraction": -0.1}, {"replay_capacity": -1}])
def test_bad_replay_settings_are_refused(bad):
    with pytest.raises(ValueError, match="replay"):
        TrainConfig(**{**TOY, **bad})
