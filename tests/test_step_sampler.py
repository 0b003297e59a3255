"""One step sampler (trainer/step_sampler.py) for the synchronous trainer and the async generation workers:
a worker samples the step a synchronous trainer would, and builds neither a trainer nor an optimizer."""

from __future__ import annotations

import os
import tempfile

import pytest
import torch

from rlvr.trainer.async_workers import GenerationWorker, step_position
from rlvr.trainer.config import TrainConfig
from rlvr.trainer.grpo import GRPOTrainer

TOY = "test_trainer_toy_env:Letters-v0"


def config(**async_) -> TrainConfig:
    return TrainConfig(model="tiny", env=TOY, prompts_per_step=3, group_size=4, max_new_tokens=5, threads=1,
                       progress=False, steps=1, async_=async_ or None)


def test_a_worker_samples_the_synchronous_step_without_a_trainer_or_an_optimizer(monkeypatch):
    def refused(*args, **kwargs):
        raise AssertionError("a generation worker built a trainer or an optimizer")

    with monkeypatch.context() as patch:
        patch.setattr(GRPOTrainer, "__init__", refused)
        patch.setattr(torch.optim.AdamW, "__init__", refused)
        worker = GenerationWorker(config(workers=1, max_staleness=0), 0, os.getpriority(os.PRIO_PROCESS, 0))
        sampled = worker.sampler.collect(1, step_position(worker.config, 1), worker.part)
    with tempfile.TemporaryDirectory() as run:
        trainer = GRPOTrainer(config(), run)
        trainer.step, trainer.data_position = 1, step_position(trainer.config, 1)
        groups, kept = trainer.sample_step()
    assert [g.index for g in sampled.groups] == [g.index for g in groups] == [3, 4, 5]
    assert [g.completion_ids for g in sampled.groups] == [g.completion_ids for g in groups]
    assert [g.rewards for g in sampled.groups] == [g.rewards for g in groups]
    assert [g.index for g, _ in sampled.kept] == [g.index for g, _ in kept] and kept
    for (_, mine), (_, theirs) in zip(sampled.kept, kept):
        assert torch.equal(mine, theirs)
    assert sampled.data_position == trainer.data_position == 6
    assert worker.clock.seconds > 0  # the worker's generator was timed while it sampled


@pytest.mark.parametrize("part", [slice(0, 2), slice(2, None)])
def test_a_split_step_samples_its_part_of_the_prompts(part, tmp_path):
    trainer = GRPOTrainer(config(), tmp_path / str(part.start))
    groups, _ = trainer.sample_step(part)
    assert [g.index for g in groups] == list(range(3))[part]
