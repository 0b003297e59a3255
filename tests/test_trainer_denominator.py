"""`count_skipped`: with it, skipping the groups of equal rewards is only a saving: the gradient is
the one of training them with advantage 0 (TRL's and verl's scale)."""

from __future__ import annotations

import pytest
import test_trainer_run
import torch

from rlvr.trainer.config import TrainConfig
from rlvr.trainer.grpo import GRPOTrainer

TOY = {**test_trainer_run.TOY, "steps": 1}


def _grad_norm(tmp_path, name, count_skipped, trained_groups, groups):
    trainer = GRPOTrainer(TrainConfig(**TOY, count_skipped=count_skipped), tmp_path / name)
    return trainer._optimise(trained_groups, groups)["grad_norm"]


def test_counting_the_skipped_groups_gives_the_gradient_of_training_them_at_advantage_zero(tmp_path):
    sampler = GRPOTrainer(TrainConfig(**TOY), tmp_path / "sample")
    groups, kept = sampler.sample_step()
    assert len(kept) >= 2
    (first, adv), (second, _) = kept[0], kept[1]
    pair = [first, second]  # `second` plays a group skipped for equal rewards
    counted = _grad_norm(tmp_path, "counted", True, [(first, adv)], pair)
    explicit = _grad_norm(tmp_path, "explicit", False, [(first, adv), (second, torch.zeros(len(second.rewards)))],
                          pair)
    alone = _grad_norm(tmp_path, "alone", False, [(first, adv)], pair)
    assert counted == pytest.approx(explicit, rel=1e-5)
    # token-mean: the trained group's share of all tokens scales the gradient
    share = sum(map(len, first.completion_ids)) / sum(len(c) for g in pair for c in g.completion_ids)
    assert counted == pytest.approx(alone * share, rel=1e-4)
